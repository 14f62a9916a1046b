"""Timestamps in a snapshot: parsing, and finding the newest one cheaply."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from handlers.view import Obj

_CONDITION_FIELDS = ("lastTransitionTime", "lastHeartbeatTime", "lastProbeTime", "lastUpdateTime")
# The API server sets only these on the conditions of the kinds read most.
_KIND_CONDITION_FIELDS = {
    "Pod": ("lastTransitionTime", "lastProbeTime"),
    "Node": ("lastHeartbeatTime", "lastTransitionTime"),
}
_EVENT_FIELDS = (
    "lastTimestamp",
    "firstTimestamp",
    "eventTime",
    "deprecatedLastTimestamp",
    "deprecatedFirstTimestamp",
)
_STATUS_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp as an aware UTC datetime; None for null or garbage."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def newest(stamps: Iterable[Any]) -> datetime | None:
    """The latest of many timestamps without parsing them all.

    The API server writes UTC ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``: the first 19 characters
    compare as text, so only the ties at the top second (and odd formats) get parsed.
    """
    top = ""
    tied: list[str] = []
    odd: list[str] = []
    for s in stamps:
        if s.__class__ is not str or not s:
            continue
        if len(s) >= 20 and s[-1] == "Z" and s[10] == "T":
            head = s[:19]
            if head > top:
                top, tied = head, [s]
            elif head == top:
                tied.append(s)
        else:
            odd.append(s)
    parsed = [t for t in map(parse_time, tied + odd) if t is not None]
    return max(parsed, default=None)


def collect_stamps(kind: str, objs: list[Obj], out: set[Any]) -> None:
    """Add the timestamps that say when objects of ``kind`` last changed: creation,
    conditions, container states, event times. ``out`` also gets None and non-text values;
    ``newest`` skips them. ``deletionTimestamp`` is left out: it lies in the future during
    graceful deletion.

    This touches every object of a 30,000-pod dump, and each touch is a cache miss: one
    pass per object, flat loops, a set (the same second recurs thousands of times).
    """
    add = out.add
    is_pod = kind == "Pod"
    fields = _KIND_CONDITION_FIELDS.get(kind, _CONDITION_FIELDS)
    for obj in objs:
        meta = obj.get("metadata")
        if meta.__class__ is dict:
            add(meta.get("creationTimestamp"))
        status = obj.get("status")
        if status.__class__ is not dict:
            continue
        for cond in _list(status.get("conditions")):
            if cond.__class__ is dict:
                for field in fields:
                    add(cond.get(field))
        if is_pod:
            add(status.get("startTime"))
            for key in _STATUS_LISTS:
                for cstatus in _list(status.get(key)):
                    if cstatus.__class__ is dict:
                        _container_stamps(cstatus, add)
    if kind == "Event":
        _event_stamps(objs, add)


def _container_stamps(cstatus: Obj, add: Callable[[Any], None]) -> None:
    for state in (cstatus.get("state"), cstatus.get("lastState")):
        if state.__class__ is dict:
            for detail in state.values():
                if detail.__class__ is dict:
                    add(detail.get("startedAt"))
                    add(detail.get("finishedAt"))


def _event_stamps(events: list[Obj], add: Callable[[Any], None]) -> None:
    for ev in events:
        for field in _EVENT_FIELDS:
            add(ev.get(field))
        series = ev.get("series")
        if series.__class__ is dict:
            add(series.get("lastObservedTime"))


def _list(value: Any) -> list[Any]:
    return value if value.__class__ is list else _EMPTY


_EMPTY: list[Any] = []
