"""A command that got past the guards, diagnosed and answered.

A command runs in a bounded pool (``pool.DiagnosisPool``) under a deadline, and the asker
is told at once that it is on its way (or that gpubot is busy). The answer is a verdict
card posted in the channel (or the thread it was asked in), the proof in the card's thread,
and, when Block Kit's limits cut it, the full report attached as files. A Re-check edits
the card in place and says what changed. The alert threads (``bot.alerts``) diagnose
through ``diagnose`` too.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.fleet import ClusterHandle, Fleet
from bot.metrics import METRIC_COMMANDS
from bot.slack import messages, scope
from bot.slack.access import AccessPolicy
from bot.slack.blocks import Changes, Message, Rendered, Renderer, diff_codes
from bot.slack.commands import ROUTES, Command
from bot.slack.commands import run as run_command
from bot.slack.config import Settings
from bot.slack.metrics import Metrics
from bot.slack.pool import Deadline, DiagnosisPool, Job
from bot.slack.poster import Poster, error_name
from bot.slack.reads import GuardedView, reading
from bot.slack.request import Asked, Request, target_of
from handlers.errors import GpubotError
from handlers.model import Diagnosis
from handlers.runtime.source import MetricsSource
from handlers.view import ClusterView, Reader

log = logging.getLogger("gpubot.slack")


class Diagnoses:
    def __init__(self, settings: Settings, view: ClusterView | Fleet, metrics: Metrics,
                 poster: Poster, renderer: Renderer, pool: DiagnosisPool, policy: AccessPolicy,
                 *, clock: Callable[[], float] = time.monotonic,
                 extra_help: Sequence[dict[str, str]] = ()) -> None:
        self.settings = settings
        self.fleet = view if isinstance(view, Fleet) else Fleet.single(view)
        self.metrics = metrics
        self.poster = poster
        self.renderer = renderer
        self.pool = pool
        self.policy = policy
        self._clock = clock
        self.extra_help = extra_help  # help entries of the approval-gated actions, when on
        # /gpu sentinel's answer in a request's channel (bot/slack/sentinel.py)
        self.sentinel_status: Callable[[Request], dict[str, Any]] | None = None
        self._rechecking: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    @property
    def prometheus(self) -> MetricsSource | None:
        """The default cluster's Prometheus, for the metric-reading commands."""
        return self.fleet.default.prometheus

    @prometheus.setter
    def prometheus(self, source: MetricsSource | None) -> None:
        self.fleet.default.prometheus = source

    @property
    def view(self) -> ClusterView:
        """The default cluster's view (a single cluster's: the one there is)."""
        view = self.fleet.default.view
        assert view is not None  # the first cluster opens, or serve stops
        return view

    def source_of(self, cmd: Command) -> str:
        """What a command reads, for the user: its cluster, or every cluster."""
        if cmd.cluster is None and self.fleet.multi:
            return "every cluster" if cmd.all_clusters else "the clusters this channel may read"
        return self.fleet.label(self.fleet.get(cmd.cluster))

    # -- asked ------------------------------------------------------------------------------

    def answer(self, asked: Asked) -> None:
        """A parsed, admitted command (``/gpu`` or a mention): the help, the sentinel's
        state, or the diagnosis queued and the asker told."""
        cmd, req = asked.command, asked.request
        assert cmd is not None
        if cmd.name == "help":
            self.metrics.count("help", "help")
            req.finished("help", "help", target=target_of(cmd))
            msg = self.help_message(cmd.target, req, asked.prefix)
            asked.answer(msg["text"], msg["blocks"])
            return
        if cmd.name == "sentinel" and self.sentinel_status is not None:
            self.metrics.count("sentinel", "answered")
            req.finished("sentinel", "answered")
            msg = self.sentinel_status(req)
            asked.answer(msg["text"], msg["blocks"])
            return
        if self.submit(cmd, req) is None:
            self.metrics.count(cmd.name, "busy")
            req.finished(cmd.name, "busy", target=target_of(cmd))
            asked.answer(messages.busy(self.pool.queued))
            return
        asked.answer(messages.diagnosing(cmd.line(), self.source_of(cmd)))

    def recheck(self, asked: Asked) -> None:
        """A Re-check: queued unless one of the same card is running already."""
        cmd, req = asked.command, asked.request
        assert cmd is not None
        key = (req.channel, req.card_ts or "")
        with self._lock:
            if key in self._rechecking:
                self.metrics.duplicates.labels(why="recheck_running").inc()
                req.finished(cmd.name, "duplicate", target=target_of(cmd))
                return
            self._rechecking.add(key)
        if self.submit(cmd, req) is None:
            with self._lock:
                self._rechecking.discard(key)
            self.metrics.count(cmd.name, "busy")
            req.finished(cmd.name, "busy", target=target_of(cmd))
            asked.answer(messages.busy(self.pool.queued))

    def help_message(self, topic: str | None, req: Request,
                     command: str | None = None) -> dict[str, Any]:
        allowed = self.policy.allowed(req.channel, req.channel_name)
        routes = [r for r in ROUTES.values() if topic is None or r.name in (topic, "help")]
        msg = self.renderer.render_template(
            "slack/help.j2", command=command or self.settings.command, topic=topic,
            routes=[{"usage": r.usage, "summary": r.summary, "example": r.example}
                    for r in routes] + (list(self.extra_help) if topic is None else []),
            allowed=(sorted(allowed) if allowed is not None
                     else None) if self.policy.channel_map is not None else None,
        )[0]
        return {"text": msg.text, "blocks": msg.blocks, "response_type": "ephemeral"}

    # -- the work ---------------------------------------------------------------------------

    def submit(self, cmd: Command, req: Request) -> Job | None:
        """Queue the diagnosis; None when the pool is full. Its answer, failure or timeout
        goes to the asker from the pool."""
        line = cmd.line()
        ran: list[float] = []
        chosen: list[Command] = []  # the command as run: with the cluster it was found in
        allowed = self.policy.allowed(req.channel, req.channel_name, cmd.cluster)

        def work(deadline: Deadline) -> Diagnosis:
            where, diag = self.diagnose_where(cmd, deadline, allowed, req.channel,
                                              req.channel_name)
            chosen.append(where)
            ran.append(deadline.elapsed())
            return diag

        def deliver(diag: Diagnosis) -> None:
            ran_cmd = chosen[0] if chosen else cmd
            try:
                self.metrics.diagnosis_seconds.labels(command=cmd.name).observe(
                    ran[0] if ran else 0.0)
                if req.card_ts:
                    self.update_card(ran_cmd, diag, req)
                else:
                    self.post_answer(ran_cmd, diag, req)
            finally:
                self._done_rechecking(req)

        def on_error(err: BaseException) -> None:
            self._done_rechecking(req)
            if isinstance(err, GpubotError):
                outcome = "not_found" if type(err).__name__ == "TargetNotFound" else (
                    "usage_error")
                self.metrics.count(cmd.name, outcome)
                req.finished(cmd.name, outcome, target=target_of(cmd))
                self.poster.respond(req, messages.failed(line, scope.error_text(err, allowed)))
            else:
                self.metrics.count(cmd.name, "error")
                req.finished(cmd.name, "error", target=target_of(cmd))
                self.poster.respond(req, messages.internal_error(line))

        def on_timeout(deadline: Deadline) -> None:
            self._done_rechecking(req)
            self.metrics.count(cmd.name, "timeout")
            req.finished(cmd.name, "timeout", target=target_of(cmd))
            self.metrics.diagnosis_seconds.labels(command=cmd.name).observe(deadline.seconds)
            self.poster.respond(req, messages.timed_out(line, deadline.seconds, deadline.doing,
                                                        self.source_of(cmd)))

        return self.pool.submit(line, work, deliver=deliver, on_error=on_error,
                                on_timeout=on_timeout, seconds=self.settings.deadline)

    def _done_rechecking(self, req: Request) -> None:
        if req.card_ts:
            with self._lock:
                self._rechecking.discard((req.channel, req.card_ts))

    def diagnose(self, cmd: Command, deadline: Deadline,
                 allowed: frozenset[str] | None = None, channel: str | None = None
                 ) -> Diagnosis:
        """``allowed``: the namespaces the asking channel may query (None: all)."""
        return self.diagnose_where(cmd, deadline, allowed, channel)[1]

    def diagnose_where(self, cmd: Command, deadline: Deadline,
                       allowed: frozenset[str] | None = None, channel: str | None = None,
                       channel_name: str = "") -> tuple[Command, Diagnosis]:
        """The diagnosis, and the command as run: a target named without a cluster in a
        fleet is looked for in the clusters ``channel`` may read, and the command run gets
        ``-c`` where it was found (its card's Re-check goes there). Which cluster is
        ``bot/fleet/run.py``'s, shared with the CLI."""
        from bot.fleet.elsewhere import BUDGET_SECONDS, Budget
        from bot.fleet.run import run_on_fleet
        from handlers.target import Target

        # The target: looked for when no cluster is named; why-pending's for fits elsewhere.
        target = None
        if self.fleet.multi and not cmd.all_clusters and (
                cmd.cluster is None or cmd.name == "why-pending"):
            bound = cmd.route.bind(cmd.given()).target
            target = bound if isinstance(bound, Target) else None

        def readable(namespace: str | None) -> list[str]:
            if channel is None:
                return self.fleet.names
            return self.policy.clusters_for(channel, channel_name, namespace)

        def diagnose(handle: ClusterHandle, view: ClusterView) -> Diagnosis:
            return self._run(view, handle.prometheus, cmd, deadline, allowed)

        # Fits elsewhere reads the other clusters within the deadline, half what is left.
        budget = Budget(lambda v: GuardedView(v, deadline),
                        lambda: min(BUDGET_SECONDS, deadline.remaining() / 2))
        answer = run_on_fleet(self.fleet, cmd.name, diagnose, cluster=cmd.cluster,
                              all_clusters=cmd.all_clusters, target=target,
                              namespace=cmd.namespace, readable=readable, budget=budget)
        if cmd.cluster is None and target is not None and answer.cluster is not None:
            return replace(cmd, cluster=answer.cluster), answer.diagnosis
        return cmd, answer.diagnosis

    def _run(self, base: ClusterView, prometheus: MetricsSource | None, cmd: Command,
             deadline: Deadline, allowed: frozenset[str] | None) -> Diagnosis:
        view = GuardedView(base, deadline)
        metrics = prometheus if cmd.name in METRIC_COMMANDS else None
        with reading(base):  # a watch cache: one state of it
            diag = run_command(Reader(view, metrics=metrics), cmd)
        for problem in scope.visible_problems(view.problems, allowed):
            line = f"not read: {problem}"
            if line not in diag.unchecked:
                diag.unchecked.append(line)
        return diag

    def render(self, cmd: Command, diag: Diagnosis, req: Request,
               changes: Changes | None = None) -> Rendered:
        return self.renderer.render(diag, argv=cmd.argv(), source=self.source_of(cmd),
                                    requester=req.user or None, changes=changes,
                                    request_id=req.id,
                                    command_prefix=self.settings.command)

    # -- the answer -------------------------------------------------------------------------

    def post_answer(self, cmd: Command, diag: Diagnosis, req: Request) -> None:
        """The card in the channel, the proof in its thread, files if anything was cut."""
        rendered = self.render(cmd, diag, req)
        try:
            ts = self.poster.post(req.channel, rendered.card, req.thread_ts, unfurl=False)
        except SlackApiError as err:
            self._cannot_post(cmd, req, rendered, err)
            return
        self.post_thread(req.channel, req.thread_ts or ts, rendered, cmd, diag)
        self.metrics.count(cmd.name, "answered")
        req.finished(cmd.name, "answered", target=target_of(cmd),
                     codes=[f.code for f in diag.findings])
        self.metrics.answer_seconds.labels(command=cmd.name).observe(self._clock() - req.received)
        if cmd.name == "nodes":  # drawing takes a second: not on the worker that answers
            # On the Slack I/O executor, which shutdown waits for: a chart being uploaded
            # is not cut off (nor left retrying against a Slack the process no longer has).
            with contextlib.suppress(RuntimeError):  # shutting down: the answer stands
                self.poster.io.submit(self.attach_chart, req.channel, ts, diag)

    def update_card(self, cmd: Command, diag: Diagnosis, req: Request) -> None:
        """Re-check: the card edited in place, saying what changed; new proof if it did."""
        changes = diff_codes(req.card_codes, [f.code for f in diag.findings])
        changes.by = req.user or None
        rendered = self.render(cmd, diag, req, changes)
        assert req.card_ts is not None
        try:
            self.poster.update(req.channel, req.card_ts, rendered.card)
        except SlackApiError as err:
            req.finished(cmd.name, "error", target=target_of(cmd))
            self.poster.respond(req, messages.cannot_post(error_name(err)))
            return
        if changes.added or changes.resolved or not changes.known:
            self.post_thread(req.channel, req.thread_ts or req.card_ts, rendered, cmd, diag)
        self.metrics.count("recheck", "answered")
        req.finished(cmd.name, "answered", target=target_of(cmd),
                     codes=[f.code for f in diag.findings])
        self.metrics.answer_seconds.labels(command="recheck").observe(
            self._clock() - req.received)

    def post_thread(self, channel: str, ts: str, rendered: Rendered, cmd: Command,
                    diag: Diagnosis) -> None:
        """The proof under the card at ``ts``, and the full report if anything was cut."""
        for m in rendered.thread:
            # A failed part is counted and logged by the poster; the card and others stand.
            with contextlib.suppress(SlackApiError):
                self.poster.post(channel, m, ts, unfurl=False)
        if rendered.truncated:
            self.metrics.truncated.inc()
            self.attach_report(channel, ts, cmd, diag)

    def attach_chart(self, channel: str, thread_ts: str, diag: Diagnosis) -> None:
        """`nodes`: the supply-and-demand chart as a PNG in the thread; without the chart
        extra (no matplotlib), a line there saying how to get it."""
        from bot.chart import missing, render_png
        from handlers.chart import chart_data

        why = missing()
        if why is not None:
            text = messages.no_chart(why)
            note = Message("chart", text, [{"type": "context", "elements": [
                {"type": "mrkdwn", "text": text}]}])
            with contextlib.suppress(SlackApiError):  # counted and logged by the poster
                self.poster.post(channel, note, thread_ts, unfurl=False)
            return
        try:
            png = render_png(chart_data(diag))
        except Exception:  # the answer stands without its picture
            log.warning("could not draw the nodes chart", exc_info=True)
            return
        try:
            self.poster.upload(channel, thread_ts, [{
                "content": png, "filename": "gpubot-nodes.png",
                "title": "GPUs per model: supply and demand"}])
        except SlackApiError:
            pass  # counted and logged by the poster
        except Exception:  # its own thread: nothing above it would log this
            log.warning("could not upload the nodes chart", exc_info=True)

    def attach_report(self, channel: str, thread_ts: str, cmd: Command, diag: Diagnosis) -> None:
        """The full report as files in the thread."""
        from bot.render import render_json, render_text

        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", f"gpubot-{cmd.name}-{diag.target}").strip("-")
        uploads: list[dict[str, Any]] = []
        try:
            uploads.append({"content": render_text(diag, source=self.view.source,
                                                   runbooks=self.renderer.runbooks),
                            "filename": f"{stem}.txt", "title": f"{stem}.txt"})
        except Exception:  # no CLI template for this command: the JSON still says it all
            log.debug("no text report for %s", cmd.name, exc_info=True)
        uploads.append({"content": render_json(diag, source=self.view.source,
                                               runbooks=self.renderer.runbooks),
                        "filename": f"{stem}.json", "title": f"{stem}.json"})
        with contextlib.suppress(SlackApiError):
            self.poster.upload(channel, thread_ts, uploads,
                               "The full report (the messages above were cut to Slack's "
                               "limits).")

    def _cannot_post(self, cmd: Command, req: Request, rendered: Rendered,
                     err: SlackApiError) -> None:
        """The bot is not in the channel (or it is a DM): answer the asker privately."""
        name = error_name(err)
        self.metrics.count(cmd.name, "error")
        req.finished(cmd.name, "error", target=target_of(cmd))
        blocks: Sequence[dict[str, Any]] = rendered.card.blocks
        self.poster.respond(req, messages.cannot_post(name), blocks=[
            {"type": "section", "text": {"type": "mrkdwn", "text": messages.cannot_post(name)}},
            *[b for b in blocks if b.get("type") != "actions"]])
