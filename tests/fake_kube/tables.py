"""Server-side printing: ``meta.k8s.io/v1`` Tables, which ``kubectl get`` asks for.

Pods, nodes and events get kubectl's usual columns; every other resource ``Name`` and
``Age``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .resources import ResourceType

Obj = dict[str, Any]


def wants_table(accept: str) -> bool:
    return any("as=Table" in part and "g=meta.k8s.io" in part for part in accept.split(","))


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def age(obj: Obj) -> str:
    return since((obj.get("metadata") or {}).get("creationTimestamp"))


def since(stamp: Any) -> str:
    if not stamp:
        return "<unknown>"
    try:
        when = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return human_duration((datetime.now(UTC) - when).total_seconds())


def _col(name: str, type_: str = "string", fmt: str = "", priority: int = 0,
         description: str = "") -> Obj:
    return {"name": name, "type": type_, "format": fmt, "description": description,
            "priority": priority}


NAME = _col("Name", fmt="name", description="Name must be unique within a namespace.")
AGE = _col("Age", description="CreationTimestamp is a timestamp representing the server time "
           "when this object was created.")

POD_COLUMNS = [NAME, _col("Ready", description="The aggregate readiness state of this pod "
                          "for accepting traffic."),
               _col("Status", description="The aggregate status of the containers in this "
                    "pod."),
               _col("Restarts", description="The number of times the containers in this pod "
                    "have been restarted and when the last container in this pod has "
                    "restarted."),
               AGE, _col("IP", priority=1), _col("Node", priority=1),
               _col("Nominated Node", priority=1), _col("Readiness Gates", priority=1)]
NODE_COLUMNS = [NAME, _col("Status"), _col("Roles"), AGE, _col("Version"),
                _col("Internal-IP", priority=1), _col("External-IP", priority=1),
                _col("OS-Image", priority=1), _col("Kernel-Version", priority=1),
                _col("Container-Runtime", priority=1)]


EVENT_COLUMNS = [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"),
                 _col("Subobject", priority=1), _col("Source", priority=1), _col("Message"),
                 _col("First Seen", priority=1), _col("Count", priority=1),
                 _col("Name", priority=1)]


def event_row(ev: Obj) -> list[Any]:
    inv = ev.get("involvedObject") or ev.get("regarding") or {}
    series = ev.get("series") or {}
    last = (series.get("lastObservedTime") or ev.get("lastTimestamp")
            or ev.get("deprecatedLastTimestamp") or ev.get("eventTime"))
    first = (ev.get("firstTimestamp") or ev.get("deprecatedFirstTimestamp")
             or ev.get("eventTime"))
    source = ev.get("source") or ev.get("deprecatedSource") or {}
    component = source.get("component") or ev.get("reportingComponent") or ev.get(
        "reportingController") or ""
    if source.get("host"):
        component += f", {source['host']}"
    count = series.get("count") or ev.get("count") or ev.get("deprecatedCount") or 1
    return [since(last), ev.get("type", ""), ev.get("reason", ""),
            f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}",
            inv.get("fieldPath", ""), component, ev.get("message") or ev.get("note") or "",
            since(first), count, ev["metadata"]["name"]]


def pod_row(pod: Obj) -> list[Any]:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    restarts = 0
    ready = 0
    statuses = status.get("containerStatuses") or []
    for cs in reversed(statuses):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated"):
            term = state["terminated"]
            reason = term.get("reason") or (f"Signal:{term['signal']}" if term.get("signal")
                                            else f"ExitCode:{term.get('exitCode', 0)}")
        elif state.get("running") and cs.get("ready"):
            ready += 1
    for ics in status.get("initContainerStatuses") or []:
        term = (ics.get("state") or {}).get("terminated") or {}
        waiting = (ics.get("state") or {}).get("waiting") or {}
        if term and term.get("exitCode", 0) != 0:
            reason = f"Init:{term.get('reason') or 'Error'}"
            break
        if waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
            break
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    total = len(spec.get("containers") or [])
    nominated = status.get("nominatedNodeName") or "<none>"
    return [pod["metadata"]["name"], f"{ready}/{total}", reason, restarts, age(pod),
            status.get("podIP") or "<none>", spec.get("nodeName") or "<none>", nominated,
            "<none>"]


def node_row(node: Obj) -> list[Any]:
    status = node.get("status") or {}
    ready = "Unknown"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = "Ready" if cond.get("status") == "True" else "NotReady"
    text = "NotReady" if ready == "Unknown" else ready
    if (node.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels
                   if k.startswith("node-role.kubernetes.io/") and "/" in k)
    info = status.get("nodeInfo") or {}
    addrs = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [node["metadata"]["name"], text, ",".join(roles) or "<none>", age(node),
            info.get("kubeletVersion", ""), addrs.get("InternalIP") or "<none>",
            addrs.get("ExternalIP") or "<none>", info.get("osImage", "<unknown>"),
            info.get("kernelVersion", "<unknown>"), info.get("containerRuntimeVersion",
                                                             "<unknown>")]


def columns(rt: ResourceType) -> list[Obj]:
    if rt.kind == "Pod" and rt.group == "":
        return POD_COLUMNS
    if rt.kind == "Node":
        return NODE_COLUMNS
    if rt.kind == "Event":
        return EVENT_COLUMNS
    return [NAME, AGE]


def row(rt: ResourceType, obj: Obj, include: str) -> Obj:
    if rt.kind == "Pod" and rt.group == "":
        cells = pod_row(obj)
    elif rt.kind == "Node":
        cells = node_row(obj)
    elif rt.kind == "Event":
        cells = event_row(obj)
    else:
        cells = [obj["metadata"]["name"], age(obj)]
    out: Obj = {"cells": cells}
    if include == "Object":
        out["object"] = obj
    elif include != "None":
        out["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                         "metadata": obj.get("metadata") or {}}
    return out


def table(rt: ResourceType, objs: list[Obj], include: str, meta: Obj,
          with_columns: bool = True) -> Obj:
    out: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
    if with_columns:
        out["columnDefinitions"] = columns(rt)
    out["rows"] = [row(rt, o, include) for o in objs]
    return out
