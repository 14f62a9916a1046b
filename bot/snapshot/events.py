"""Events in one shape: events.k8s.io/v1 (and new-style core/v1) fields copied into the
core/v1 fields handlers read. Original fields stay as they are."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from handlers.view import Obj

from .timestamps import parse_time

_NEVER = datetime.min.replace(tzinfo=UTC)


def normalise_event(ev: Obj) -> None:
    """Fill ``involvedObject``, ``message``, ``count``, ``firstTimestamp``,
    ``lastTimestamp`` and ``source.component`` when missing or null, in place."""
    source = ev.get("source")
    if (ev.get("lastTimestamp") and ev.get("firstTimestamp")
            and ev.get("count").__class__ is int and ev.get("message") is not None
            and ev.get("involvedObject").__class__ is dict
            and source.__class__ is dict and source.get("component")):
        return  # a core/v1 Event as the API server writes it: nothing to fill
    raw_series = ev.get("series")
    series: dict[str, Any] = raw_series if isinstance(raw_series, dict) else {}
    if not isinstance(ev.get("involvedObject"), dict) and isinstance(ev.get("regarding"), dict):
        ev["involvedObject"] = ev["regarding"]
    if ev.get("message") is None and ev.get("note") is not None:
        ev["message"] = ev["note"]
    if not isinstance(ev.get("count"), int):
        ev["count"] = _first_int(series.get("count"), ev.get("deprecatedCount"), default=1)
    if not ev.get("lastTimestamp"):
        ev["lastTimestamp"] = _first(
            series.get("lastObservedTime"), ev.get("deprecatedLastTimestamp"),
            ev.get("eventTime"), ev.get("firstTimestamp"), ev.get("deprecatedFirstTimestamp"),
        )
    if not ev.get("firstTimestamp"):
        ev["firstTimestamp"] = _first(
            ev.get("deprecatedFirstTimestamp"), ev.get("eventTime"), ev.get("lastTimestamp")
        )
    _normalise_source(ev)


def _normalise_source(ev: Obj) -> None:
    source = ev.get("source")
    if not isinstance(source, dict):
        old = ev.get("deprecatedSource")
        source = dict(old) if isinstance(old, dict) else {}
        ev["source"] = source
    if not source.get("component"):
        component = _first(ev.get("reportingController"), ev.get("reportingComponent"))
        if component:
            source["component"] = component


def event_time(ev: Obj) -> datetime:
    """When the event last happened, for ordering; events with no time sort first."""
    series = ev.get("series")
    last_seen = series.get("lastObservedTime") if isinstance(series, dict) else None
    for value in (ev.get("lastTimestamp"), last_seen, ev.get("eventTime"),
                  ev.get("firstTimestamp")):
        parsed = parse_time(value)
        if parsed is not None:
            return parsed
    return _NEVER


def involved_key(ev: Obj) -> tuple[str, str, str] | None:
    """(kind, name, namespace) of the object the event is about."""
    inv = ev.get("involvedObject")
    if not isinstance(inv, dict):
        return None
    meta = ev.get("metadata")
    own_ns = meta.get("namespace") if isinstance(meta, dict) else None
    return (str(inv.get("kind") or ""), str(inv.get("name") or ""),
            str(inv.get("namespace") or own_ns or ""))


def _first(*values: Any) -> Any:
    return next((v for v in values if v), None)


def _first_int(*values: Any, default: int) -> int:
    return next((v for v in values if isinstance(v, int) and not isinstance(v, bool)), default)
