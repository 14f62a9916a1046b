"""The sentinel on a terminal (``gpubot watch``): incidents as lines, or JSON objects.

``TerminalPublisher`` is the ``Publisher`` of ``bot/sentinel/service.py`` that prints each
change of an incident (opened, updated, re-opened, resolved with its duration and GPU-hours);
``print_observed`` prints what one look at a cluster or snapshot shows (``--once``), with how
long it has lasted when the objects' own timestamps say.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from bot.sentinel.incidents import Incident
from bot.sentinel.watcher import Seen
from handlers.sentinel.detectors import REGISTRY
from handlers.timefmt import age_text

SHOWN = 3  # member lines under an incident
_ANSI = {"opened": "1;31", "reopened": "1;31", "updated": "33", "resolved": "32",
         "observed": "1", "dim": "2"}
# What an incident's GPU-hours are, by detector.
HOURS_WORD = {"gpu-capacity-lost": "GPU-hours lost", "gpu-stack-down": "GPU-hours at stake",
              "gpu-pending": "GPU-hours waited"}


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hours_word(detector: str) -> str:
    return HOURS_WORD.get(detector, "GPU-hours")


def _plural(n: float, word: str) -> str:
    return f"{n:g} {word}{'' if n == 1 else 's'}"


def paint(text: str, style: str, color: bool) -> str:
    return f"\x1b[{_ANSI[style]}m{text}\x1b[0m" if color else text


def _command(pair: Sequence[str], cluster: str = "") -> str:
    return f"gpubot {pair[0]} {pair[1]}" + (f" --cluster {cluster}" if cluster else "")


class TerminalPublisher:
    """Prints incident changes; ``visible`` filters what is shown (``-n``). Each incident is
    marked printed whatever ``visible`` says, so it is not handed over again."""

    def __init__(self, out: TextIO, *, as_json: bool = False, color: bool = False,
                 visible: Callable[[Incident], bool] = lambda i: True) -> None:
        self.out = out
        self.as_json = as_json
        self.color = color
        self.visible = visible
        self._lock = threading.Lock()

    def publish(self, inc: Incident, now: float) -> Mapping[str, Any] | None:
        before = (inc.posted or {}).get("state")
        if inc.state == "resolved":
            event = "resolved"
        elif not inc.posted:
            event = "opened"
        elif before == "resolved":
            event = "reopened"
        else:
            event = "updated"
        if self.visible(inc):
            self._write(self._json(inc, event, now) if self.as_json
                        else self._text(inc, event, now))
        return {"printed": iso(now), "state": inc.state}

    def _write(self, text: str) -> None:
        with self._lock:
            self.out.write(text + "\n")
            self.out.flush()

    def _text(self, inc: Incident, event: str, now: float) -> str:
        head = (f"{iso(now)}  {paint(f'{event.upper():<9}', event, self.color)} "
                f"{inc.title} · {inc.group}"
                + (f" · cluster {inc.cluster}" if inc.cluster else ""))
        if event == "resolved":
            return (f"{head}: back after {age_text(inc.duration(now))}, "
                    f"{inc.gpu_hours(now):.2f} {hours_word(inc.detector)} "
                    f"(at most {_plural(inc.peak, 'GPU')})")
        lines = [f"{head}: {_plural(inc.gpus, 'GPU')}, {_plural(inc.members_total, 'member')}, "
                 f"since {iso(inc.since)} ({age_text(inc.duration(now))}), "
                 f"{inc.gpu_hours(now):.2f} {hours_word(inc.detector)} so far"]
        members = sorted(inc.members.values(), key=lambda m: (-float(m["gpus"]),
                                                              str(m["summary"])))
        lines += [f"    {m['summary']}" for m in members[:SHOWN]]
        if inc.members_total > SHOWN:
            lines.append(f"    ... and {inc.members_total - SHOWN} more")
        lines += [paint(f"    diagnose: {_command(pair, inc.cluster)}", "dim", self.color)
                  for pair in inc.diagnose(2)]
        return "\n".join(lines)

    @staticmethod
    def _json(inc: Incident, event: str, now: float) -> str:
        members = sorted(inc.members.values(), key=lambda m: (-float(m["gpus"]),
                                                              str(m["summary"])))
        return json.dumps({
            "time": iso(now), "event": event, "detector": inc.detector, "title": inc.title,
            "group": inc.group, "state": inc.state, "gpus": inc.gpus, "peak": inc.peak,
            "members": inc.members_total, "since": iso(inc.since),
            "duration_s": round(inc.duration(now), 1),
            "gpu_hours": round(inc.gpu_hours(now), 4),
            "resolved": iso(inc.resolved) if inc.resolved is not None else None,
            "summaries": [str(m["summary"]) for m in members[:20]],
            "diagnose": [_command(pair, inc.cluster) for pair in inc.diagnose()],
            "pools": inc.pools, "namespaces": inc.namespaces, "key": inc.key,
            **({"cluster": inc.cluster} if inc.cluster else {}),
        }, sort_keys=False)


@dataclass
class Observed:
    """One incident group as one look shows it: its members, and how long it has lasted
    when every member's object says since when."""

    detector: str
    group: str
    members: list[Seen]
    threshold: float

    @property
    def gpus(self) -> float:
        return sum(s.obs.gpus for s in self.members)

    @property
    def since(self) -> float | None:
        """The earliest member's own start; None when any member's object has no date
        (then how long it lasted cannot be known from one look)."""
        if any(s.obs.since is None for s in self.members):
            return None
        return min(s.start() for s in self.members)

    def due(self, now: float) -> bool | None:
        since = self.since
        return None if since is None else now - since >= self.threshold


def observed(seen: Mapping[str, Mapping[str, Seen]], thresholds: Mapping[str, float]
             ) -> list[Observed]:
    """The watcher's observations (``Watcher.seen``) by incident group, most GPUs first."""
    groups: dict[tuple[str, str], Observed] = {}
    for det, by_subject in seen.items():
        d = REGISTRY.get(det)
        limit = thresholds.get(d.setting, d.default) if d is not None else 0.0
        for s in by_subject.values():
            groups.setdefault((det, s.obs.group), Observed(det, s.obs.group, [], limit)
                              ).members.append(s)
    return sorted(groups.values(), key=lambda g: (-g.gpus, g.detector, g.group))


def print_observed(out: TextIO, groups: Iterable[Observed], now: float, *,
                   as_json: bool = False, color: bool = False, live: bool = False) -> None:
    """One block (or JSON object) per group. ``live``: a cluster looked at once, whose
    objects without a date could have changed just now; else a snapshot."""
    unknown = ("a live cluster looked at once cannot say: watch it to time it" if live
               else "a snapshot shows one moment: its objects do not say since when")
    for g in groups:
        d = REGISTRY.get(g.detector)
        title = d.title if d is not None else g.detector
        setting = d.setting if d is not None else "threshold"
        since, due = g.since, g.due(now)
        members = sorted(g.members, key=lambda s: (-s.obs.gpus, s.obs.subject))
        if as_json:
            out.write(json.dumps({
                "time": iso(now), "event": "observed", "detector": g.detector, "title": title,
                "group": g.group, "gpus": g.gpus, "members": len(g.members),
                "since": iso(since) if since is not None else None,
                "duration_s": round(now - since, 1) if since is not None else None,
                "due": due, "threshold_s": g.threshold,
                "summaries": [s.obs.summary for s in members[:20]],
                "diagnose": list(dict.fromkeys(_command(s.obs.diagnose) for s in members))[:3],
            }) + "\n")
            continue
        if since is None:
            when = f"since when unknown ({unknown})"
        else:
            lasted = age_text(now - since)
            verdict = (f"over {setting} {age_text(g.threshold)}: an incident" if due
                       else f"under {setting} {age_text(g.threshold)}: not yet an incident")
            when = f"since {iso(since)} ({lasted}, {verdict})"
        lines = [f"{iso(now)}  {paint('OBSERVED ', 'observed', color)} {title} · {g.group}: "
                 f"{_plural(g.gpus, 'GPU')}, {_plural(len(g.members), 'member')}, {when}"]
        lines += [f"    {s.obs.summary}" for s in members[:SHOWN]]
        if len(members) > SHOWN:
            lines.append(f"    ... and {len(members) - SHOWN} more")
        lines += [paint(f"    diagnose: {c}", "dim", color)
                  for c in list(dict.fromkeys(_command(s.obs.diagnose) for s in members))[:2]]
        out.write("\n".join(lines) + "\n")
    out.flush()
