"""Events are stored once, in core/v1 shape, and served by both event APIs: events.k8s.io/v1
objects are converted on the way in and out (the apiserver's own field mapping)."""

from __future__ import annotations

from typing import Any

from .resources import ResourceType

Obj = dict[str, Any]


def to_v1(rt: ResourceType, core: Obj) -> Obj:
    """A stored (core/v1) event in events.k8s.io/v1 shape."""
    out: Obj = {"kind": "Event", "apiVersion": rt.api_version,
                "metadata": core.get("metadata", {})}
    mapping = (("eventTime", "eventTime"), ("series", "series"),
               ("reportingComponent", "reportingController"),
               ("reportingInstance", "reportingInstance"), ("action", "action"),
               ("reason", "reason"), ("involvedObject", "regarding"),
               ("related", "related"), ("message", "note"), ("type", "type"),
               ("source", "deprecatedSource"), ("firstTimestamp", "deprecatedFirstTimestamp"),
               ("lastTimestamp", "deprecatedLastTimestamp"), ("count", "deprecatedCount"))
    for src, dst in mapping:
        if core.get(src) not in (None, "", {}):
            out[dst] = core[src]
    out.setdefault("eventTime", None)
    return out


def to_core(obj: Obj) -> Obj:
    """An events.k8s.io/v1 event in core/v1 shape (how it is stored)."""
    out: Obj = {"metadata": obj.get("metadata", {})}
    mapping = (("regarding", "involvedObject"), ("note", "message"), ("reason", "reason"),
               ("type", "type"), ("eventTime", "eventTime"), ("series", "series"),
               ("reportingController", "reportingComponent"),
               ("reportingInstance", "reportingInstance"), ("action", "action"),
               ("related", "related"), ("deprecatedSource", "source"),
               ("deprecatedFirstTimestamp", "firstTimestamp"),
               ("deprecatedLastTimestamp", "lastTimestamp"), ("deprecatedCount", "count"))
    for src, dst in mapping:
        if obj.get(src) is not None:
            out[dst] = obj[src]
    for already_core in ("involvedObject", "message", "source", "count", "firstTimestamp",
                         "lastTimestamp", "reportingComponent"):
        if already_core in obj and already_core not in out:
            out[already_core] = obj[already_core]
    return out
