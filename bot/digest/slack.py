"""The daily digest in Slack (``gpubot serve``): a card in the digest channel, the details in
its thread, the supply-and-demand chart attached there.

Off by default: on when ``digest_time`` is set and the sentinel runs (the digest reads its
incidents and posts on its leader only). The channel is ``digest_channel``, else the
sentinel's, else the alert channel; the channel's namespace map holds (a channel that may
see only some namespaces gets only their workloads).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError

from bot.digest.build import build, fleet_rows
from bot.digest.schedule import DailyDigest
from bot.sentinel.incidents import IncidentBook
from bot.slack.blocks import Renderer
from bot.slack.poster import Poster
from bot.store import Store
from handlers.errors import GpubotError
from handlers.view import ViewError

if TYPE_CHECKING:
    from bot.sentinel.service import Sentinel
    from bot.slack.app import SlackBot
    from bot.slack.config import Settings
    from handlers.model import Diagnosis

log = logging.getLogger("gpubot.digest")

CHART_NAME = "gpubot-digest.png"


def digest_channel(settings: Settings) -> str | None:
    return settings.digest_channel or settings.sentinel_channel or settings.alert_channel


def post(poster: Poster, renderer: Renderer, channel: str, diag: Diagnosis, *,
         source: str = "", command_prefix: str = "/gpu") -> dict[str, Any]:
    """The card (raises SlackApiError when it cannot be posted), then its thread and chart
    (a part that fails is logged; the card stands). What was posted: channel and ts."""
    rendered = renderer.render(diag, source=source, command_prefix=command_prefix)
    ts = poster.post(channel, rendered.card, unfurl=False)
    for m in rendered.thread:
        with contextlib.suppress(SlackApiError):  # counted and logged by the poster
            poster.post(channel, m, ts, unfurl=False)
    _attach_chart(poster, channel, ts, diag)
    if rendered.truncated:
        _attach_report(poster, channel, ts, diag, source)
    return {"channel": channel, "ts": ts}


def _attach_chart(poster: Poster, channel: str, ts: str, diag: Diagnosis) -> None:
    from bot.chart import missing, render_png
    from handlers.chart import chart_data

    if missing() is not None:  # the base install: the tables in the thread stand alone
        return
    try:
        png = render_png(chart_data(diag))
        poster.upload(channel, ts, [{"content": png, "filename": CHART_NAME,
                                     "title": "GPUs per model: supply and demand"}])
    except SlackApiError:
        pass  # counted and logged by the poster
    except Exception:  # the digest stands without its picture
        log.warning("could not draw or upload the digest chart", exc_info=True)


def _attach_report(poster: Poster, channel: str, ts: str, diag: Diagnosis,
                   source: str) -> None:
    from bot.render import render_json, render_text

    files = [{"content": render_text(diag, source=source), "filename": "gpubot-digest.txt",
              "title": "gpubot-digest.txt"},
             {"content": render_json(diag, source=source), "filename": "gpubot-digest.json",
              "title": "gpubot-digest.json"}]
    with contextlib.suppress(SlackApiError):
        poster.upload(channel, ts, files, "The full digest (the messages above were cut to "
                                          "Slack's limits).")


def post_fleet(bot: SlackBot, store: Store, channel: str, command_prefix: str
               ) -> dict[str, Any]:
    """Several clusters: each cluster's digest (its view, Prometheus and incidents, what
    the channel may see there), then the fleet's figures per cluster and in total; a
    cluster that does not answer is said there, the others are posted. What was posted:
    the first card's channel and ts."""
    parts: list[tuple[str, Diagnosis]] = []
    not_read: list[str] = []
    first: dict[str, Any] | None = None
    for i, handle in enumerate(bot.fleet):
        metrics = handle.prometheus if handle.prometheus is not None or i else bot.prometheus
        book = IncidentBook(store, cluster=handle.name, legacy=i == 0)
        namespaces = bot.policy.allowed(channel, "", handle.name)
        try:
            diag = build(handle.readable(), book, metrics=metrics, namespaces=namespaces)
        except (GpubotError, ViewError) as err:  # unreachable: the others are posted
            log.warning("digest: cluster %s not read: %s", handle.name, err)
            not_read.append(f"{handle.name}: {err}")
            continue
        posted = post(bot.poster, bot.renderer, channel, diag,
                      source=bot.fleet.label(handle), command_prefix=command_prefix)
        first = first or posted
        parts.append((handle.name, diag))
    rows = fleet_rows(parts)
    msg = bot.renderer.render_template("slack/digest_fleet.j2", rows=rows,
                                       not_read=not_read)[0]
    ts = bot.poster.post(channel, msg, unfurl=False)
    return first or {"channel": channel, "ts": ts}


@dataclass
class DigestRunning:
    thread: threading.Thread
    stopping: threading.Event
    daily: DailyDigest

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        self.thread.join(timeout)


def start_digest(bot: SlackBot, settings: Settings, sentinel: Sentinel | None
                 ) -> DigestRunning | None:
    """The digest's thread, or None when it is off (said in the log)."""
    if not settings.digest_time:
        return None
    channel = digest_channel(settings)
    if channel is None:
        log.warning("digest off: no channel (GPUBOT_DIGEST_CHANNEL, GPUBOT_SENTINEL_CHANNEL "
                    "or GPUBOT_ALERT_CHANNEL)")
        return None
    if sentinel is None:
        log.warning("digest off: it reads the sentinel's incidents, and the sentinel is off")
        return None
    store = sentinel.book.store
    namespaces = bot.policy.allowed(channel, "")

    def post_now() -> Mapping[str, Any]:
        if not bot.fleet.named:
            diag = build(bot.view, IncidentBook(store), metrics=bot.prometheus,
                         namespaces=namespaces)
            return post(bot.poster, bot.renderer, channel, diag, source=bot.view.source,
                        command_prefix=settings.command)
        return post_fleet(bot, store, channel, settings.command)

    daily = DailyDigest(settings.digest_time, sentinel.book.store, post_now,
                        leader=sentinel.leader)
    stopping = threading.Event()
    thread = threading.Thread(target=daily.run, args=(stopping,), daemon=True,
                              name="gpubot-digest")
    thread.start()
    log.info("digest on: %s UTC daily to %s", settings.digest_time, channel)
    return DigestRunning(thread, stopping, daily)
