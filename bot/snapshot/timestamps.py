"""Timestamps in a snapshot: parsing, and finding the newest one cheaply."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from handlers.view import Obj

_CONDITION_FIELDS = ("lastTransitionTime", "lastHeartbeatTime", "lastProbeTime", "lastUpdateTime")
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


Add = Callable[[Any], None]


def stamp_reader(kind: str) -> Callable[[Obj, Add], object]:
    """``read(obj, add)``: passes to ``add`` the timestamps that say when an object of
    ``kind`` last changed: creation, conditions, container states, event times, and
    removes those that are null (kubectl prints "lastProbeTime": null; the snapshot's
    JSON decoder leaves them for this pass, handlers never see a null). ``add`` also gets
    non-text values; ``newest`` skips them. ``deletionTimestamp`` is left out: it lies in
    the future during graceful deletion.

    The loader reads each object's as it keeps the object: a pass over every object of a
    30,000-pod dump afterwards misses the cache at each one.
    """
    if kind == "Pod":
        return _pod_stamps
    if kind == "Event":
        return _event_stamps
    if kind in UNSTAMPED_KINDS:
        return _no_stamps
    return _object_stamps  # its return value is for _pod_stamps


# A rollout's own times follow its pods' and events' (the snapshot's loader reads these
# kinds' dump files only when asked, so "now" must not depend on them).
UNSTAMPED_KINDS = frozenset({"ReplicaSet", "Deployment"})


def _no_stamps(obj: Obj, add: Add) -> None:
    """Nothing to add, and no null to drop: these kinds are not decoded, misfit() dropped
    their nulls."""


def _take(d: Obj, fields: tuple[str, ...], add: Add) -> None:
    for key in fields:
        value = d.get(key)
        if value is not None:
            add(value)
        elif key in d:
            del d[key]


_CREATED = ("creationTimestamp",)
_STARTED = ("startTime",)
_STATE_FIELDS = ("startedAt", "finishedAt")
_SERIES_FIELDS = ("lastObservedTime",)


def _object_stamps(obj: Obj, add: Add) -> Obj | None:
    """Creation and condition times; the status, if it is a mapping."""
    meta = obj.get("metadata")
    if meta.__class__ is dict:
        _take(meta, _CREATED, add)
    status = obj.get("status")
    if status.__class__ is not dict:
        return None
    for cond in _list(status.get("conditions")):
        if cond.__class__ is dict:
            _take(cond, _CONDITION_FIELDS, add)
    return status


def _pod_stamps(pod: Obj, add: Add) -> None:
    status = _object_stamps(pod, add)
    if status is None:
        return
    _take(status, _STARTED, add)
    for key in _STATUS_LISTS:
        for cstatus in _list(status.get(key)):
            if cstatus.__class__ is dict:
                for state in (cstatus.get("state"), cstatus.get("lastState")):
                    if state.__class__ is dict:
                        for detail in state.values():
                            if detail.__class__ is dict:
                                _take(detail, _STATE_FIELDS, add)


def _event_stamps(ev: Obj, add: Add) -> None:
    _object_stamps(ev, add)
    _take(ev, _EVENT_FIELDS, add)
    series = ev.get("series")
    if series.__class__ is dict:
        _take(series, _SERIES_FIELDS, add)


def _list(value: Any) -> list[Any]:
    return value if value.__class__ is list else _EMPTY


_EMPTY: list[Any] = []
