"""Build a PendingContext by hand from a scenario snapshot, for unit tests of check families."""

from __future__ import annotations

from pathlib import Path

from bot.snapshot import load_snapshot
from handlers.pending.context import PendingContext
from handlers.view import Obj, Reader

SCENARIOS = Path(__file__).parent / "scenarios"


def reader_for(scenario: str) -> Reader:
    d = SCENARIOS / scenario
    snap = d / "cluster.json" if (d / "cluster.json").exists() else d / "cluster.yaml"
    return Reader(load_snapshot(snap))


def _by_time(e: Obj) -> str:
    return str(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or "")


def pod_context(scenario: str, namespace: str, pod: str) -> PendingContext:
    """The context of an existing pod."""
    reader = reader_for(scenario)
    obj = reader.get("Pod", pod, namespace)
    assert obj is not None, f"{scenario}: no pod {namespace}/{pod}"
    ctx = PendingContext(reader, obj, True, namespace)
    ctx.events = sorted(reader.events("Pod", pod, namespace), key=_by_time)
    return ctx


def controller_context(scenario: str, namespace: str, kind: str, name: str) -> PendingContext:
    """The context of a controller whose pods were never created (template as the pod)."""
    reader = reader_for(scenario)
    ctrl = reader.get(kind, name, namespace)
    assert ctrl is not None, f"{scenario}: no {kind} {namespace}/{name}"
    tmpl = (ctrl.get("spec") or {}).get("template") or {}
    meta = dict(tmpl.get("metadata") or {})
    meta.update({"name": f"{name}-<not created>", "namespace": namespace})
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": meta,
           "spec": dict(tmpl.get("spec") or {}), "status": {"phase": "Pending"}}
    ctx = PendingContext(reader, pod, False, namespace, ctrl)
    events = list(reader.events(kind, name, namespace))
    if kind == "Deployment":
        uid = (ctrl.get("metadata") or {}).get("uid")
        for rs in reader.list("ReplicaSet", namespace):
            refs = (rs.get("metadata") or {}).get("ownerReferences") or []
            if any(r.get("uid") == uid for r in refs):
                events += reader.events("ReplicaSet", rs["metadata"]["name"], namespace)
    ctx.controller_events = sorted(events, key=_by_time)
    return ctx
