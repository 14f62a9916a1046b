"""What the threads the bot starts on its own share: alert groups (``bot/alerts``) and
incidents (``bot/sentinel``). Nobody typed a command there, so:

- ``SlackPort``: post (returns ts) and edit one message, paced per channel (``Pacer``);
- ``ChannelDiagnoses``: a diagnosis run for a channel, under that channel's namespace map
  (``AccessPolicy``) like a ``/gpu`` typed there, and rendered as the command's answer
  (card with its action buttons, then the proof);
- ``diagnose_in_thread``: each diagnosis posted in the thread only when its codes differ
  from the last time, so a thread that is updated again and again does not repeat itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.slack.access import AccessPolicy, Refusal
from bot.slack.blocks import Message, Rendered, Renderer
from bot.slack.commands import Command
from bot.slack.config import Settings
from bot.slack.diagnoses import Diagnoses
from bot.slack.pool import Deadline
from bot.slack.poster import Poster
from handlers.errors import GpubotError
from handlers.model import Diagnosis

log = logging.getLogger("gpubot.slack.threads")

Diagnose = Callable[[Command, str], Diagnosis]
Render = Callable[[Command, Diagnosis], Rendered]


class NotAllowed(GpubotError):
    """The channel's namespace map does not let it see this diagnosis."""


class Pacer:
    """Per-channel token bucket: ``rate`` messages a second with bursts of ``burst``
    (Slack allows about one message a second per channel, with short bursts)."""

    def __init__(self, rate: float, burst: int = 5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def wait(self, channel: str) -> None:
        if self.rate <= 0:
            return
        with self._lock:
            now = self.clock()
            tokens, at = self._buckets.get(channel, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) * self.rate) - 1
            self._buckets[channel] = (tokens, now)
        if tokens < 0:
            time.sleep(-tokens / self.rate)


@dataclass
class SlackPort:
    """What a bot-started thread needs of Slack: post (returns ts) and update one message."""

    post: Callable[[str, Message, str | None], str]
    update: Callable[[str, str, Message], None]


def paced_port(poster: Poster, pacer: Pacer) -> SlackPort:
    def post(channel: str, m: Message, thread_ts: str | None) -> str:
        pacer.wait(channel)
        return poster.post(channel, m, thread_ts, unfurl=False)

    def update(channel: str, ts: str, m: Message) -> None:
        pacer.wait(channel)
        poster.update(channel, ts, m)

    return SlackPort(post, update)


class ChannelDiagnoses:
    """Diagnoses for a channel nobody typed in: ``who`` names the asker in the refusal log
    (``alertmanager``, ``sentinel``)."""

    def __init__(self, settings: Settings, policy: AccessPolicy, diagnoses: Diagnoses,
                 renderer: Renderer, source: Callable[[], str], who: str) -> None:
        self.settings = settings
        self.policy = policy
        self.diagnoses = diagnoses
        self.renderer = renderer
        self.source = source
        self.who = who

    def allowed(self, channel: str, cluster: str | None = None) -> frozenset[str] | None:
        """The namespaces the channel may see in ``cluster`` (None: all; several clusters
        and no cluster: in any of them)."""
        return self.policy.allowed(channel, "", cluster)

    def diagnose(self, cmd: Command, channel: str) -> Diagnosis:
        # No namespace's data in a channel that may not query it.
        resolved = self.policy.resolve(cmd, channel, "", self.who)
        if isinstance(resolved, Refusal):
            raise NotAllowed(resolved.message)
        deadline = Deadline(self.settings.deadline)
        deadline.start()
        return self.diagnoses.diagnose(resolved, deadline,
                                       self.allowed(channel, resolved.cluster), channel)

    def render(self, cmd: Command, diag: Diagnosis) -> Rendered:
        # Several clusters: the card says which one it read (an alert's cluster label).
        source = self.diagnoses.source_of(cmd) if self.diagnoses.fleet.named else self.source()
        return self.renderer.render(diag, argv=cmd.argv(), source=source,
                                    command_prefix=self.settings.command)


def cause_of(diag: Diagnosis) -> dict[str, str]:
    """The diagnosis' answer in one line, for a card that leads with it: the root cause
    (handlers.finish), else its first problem, else that it found none."""
    if diag.root_cause is not None:
        return {"code": diag.root_cause.code, "summary": diag.root_cause.summary}
    problems = diag.problems
    if problems:
        return {"code": problems[0].code, "summary": problems[0].summary}
    return {"code": "", "summary": "no problem found"}


def diagnose_in_thread(slack: SlackPort, channel: str, ts: str, commands: Sequence[Command],
                       codes: dict[str, list[str]], diagnose: Diagnose, render: Render,
                       causes: dict[str, dict[str, str]] | None = None
                       ) -> dict[str, list[str]]:
    """Run each diagnosis; post it in the thread when its codes differ from ``codes`` (the
    last ones posted, by command line). The codes now, by command line. ``causes``, when
    given, gets each command's ``cause_of`` (or why it was not diagnosed)."""
    for cmd in commands:
        try:
            diag = diagnose(cmd, channel)
        except Exception as err:  # a diagnosis that fails must not lose the thread
            log.warning("diagnosis %s for thread %s failed: %s", cmd.line(), ts,
                        type(err).__name__)
            why = str(err) if isinstance(err, GpubotError) else (
                f"it failed ({type(err).__name__}); the bot's log has the details")
            if causes is not None:
                causes[cmd.line()] = {"code": "", "summary": f"not diagnosed here: {why}"}
            if codes.get(cmd.line()) != [f"error: {why}"]:
                codes[cmd.line()] = [f"error: {why}"]
                text = f"gpubot {cmd.line()}: not diagnosed here: {why}"
                slack.post(channel, Message("error", text, [{
                    "type": "section", "text": {"type": "plain_text", "text": text[:2900],
                                                "emoji": False}}]), ts)
            continue
        if causes is not None:
            causes[cmd.line()] = cause_of(diag)
        now = sorted({f.code for f in diag.findings})
        if codes.get(cmd.line()) == now:
            continue
        codes[cmd.line()] = now
        for m in render(cmd, diag).messages:
            slack.post(channel, m, ts)
    return codes
