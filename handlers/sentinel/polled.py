"""Detectors that ask Prometheus, polled on the sentinel's timer (only where one is configured).

They ask what the metric findings ask (``handlers/runtime/checks.py``: the same PromQL, the
same exporter label dialects) and say what holds now:

- ``gpu-idle``: a running pod holding GPUs that stayed below ``idle_threshold`` percent for
  the whole ``idle_window`` (``GPU_IDLE_ALLOCATED``), one observation per pod, grouped by its
  namespace and controller. It has been idle since at least the window's start, so an
  incident opens once that is ``idle_after`` ago.
- ``gpu-xid``: a GPU whose last Xid (a gauge: dcgm-exporter keeps the last code until the GPU
  is reset) is one the GPU does not shrug off, one observation per GPU and code, grouped by
  pool. A code a poll had not seen before joins its pool's incident (or opens one after
  ``xid_after``); it stays a member until the GPU is reset. An application's own fault
  (Xid 13, 31, 43...: the GPU is fine) opens nothing. A code already set when the sentinel
  started counts from its first poll: the gauge does not say when it was set.

A poll raises ``MetricsError`` when Prometheus cannot answer or no exporter writes the
metric: the sentinel then keeps what it last saw (an outage neither opens nor resolves).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from handlers.grouping import pool_of
from handlers.knowledge.xid import severity_conditions, xid_info
from handlers.model import ObjectRef
from handlers.runtime.checks import UTIL, XID, XID_SET, duration_seconds, idle_query, or_absent
from handlers.runtime.labels import gpu_of, node_of, pod_of
from handlers.runtime.source import MetricsError, MetricsSource, Sample
from handlers.sentinel.detectors import (
    Lookup,
    Obj,
    Observation,
    controller,
    poller,
    pool_group,
)
from handlers.timefmt import parse_time


def _ask(metrics: MetricsSource, query: str, metric: str) -> list[Sample]:
    """The query's samples; MetricsError when no exporter writes ``metric`` (not "none")."""
    out = metrics.instant(or_absent(query, metric))
    if len(out) == 1 and not out[0].labels:
        raise MetricsError(f"{metrics.source} has no {metric} series: is dcgm-exporter "
                           "scraped?")
    return out


# -- GPUs allocated but idle --------------------------------------------------------------


def _running_since(pod: Obj) -> datetime | None:
    """When the pod started running; None when it is not running (or going)."""
    meta, st = pod.get("metadata") or {}, pod.get("status") or {}
    if st.get("phase") != "Running" or meta.get("deletionTimestamp"):
        return None
    return parse_time(st.get("startTime") or meta.get("creationTimestamp"))


@poller("gpu-idle", title="GPUs allocated but idle", setting="idle_after", default=3600.0)
def idle(metrics: MetricsSource, look: Lookup, now: datetime) -> list[Observation]:
    """Running pods holding GPUs that stayed under the threshold for the whole window. A
    pod younger than the window is not judged (the window saw only part of its life), and
    one the cluster no longer runs is gone (its series linger for the window)."""
    window, threshold = metrics.idle_window, metrics.idle_threshold
    span = duration_seconds(window) or 0.0
    held: dict[tuple[str, str], list[Sample]] = {}
    for s in _ask(metrics, idle_query(window, threshold), UTIL):
        key = pod_of(s.labels)
        if key is not None and s.value < threshold:
            held.setdefault(key, []).append(s)
    began = now - timedelta(seconds=span)
    out: list[Observation] = []
    for (ns, name), samples in sorted(held.items()):
        pod = look.pod(ns, name)
        started = _running_since(pod) if pod is not None else None
        if pod is None or started is None or started > began:
            continue
        kind, owner = controller(pod)
        nodes = sorted({node_of(s.labels) for s in samples if node_of(s.labels)})
        node = str((pod.get("spec") or {}).get("nodeName") or (nodes[0] if nodes else ""))
        gpus = len(samples)
        out.append(Observation(
            "gpu-idle", f"pod/{ns}/{name}", f"{ns}/{kind} {owner}", float(gpus),
            f"{ns}/{name} on {node or '?'}: {gpus} GPU{'s' if gpus > 1 else ''} under "
            f"{threshold:g}% for {window}", (ObjectRef("Pod", name, ns),),
            # `nodes` names the idle GPUs with their owners (GPU_IDLE_ALLOCATED).
            ("nodes", ""), since=began, node=node or None, namespace=ns,
            evidence=tuple(f"{UTIL} {gpu_of(s.labels)} on {node_of(s.labels) or '?'}: max "
                           f"{s.value:g}% over {window}" for s in samples)))
    return out


# -- Xid errors ---------------------------------------------------------------------------


def _node(look: Lookup, label: str) -> tuple[str, Obj | None]:
    """The node a series names: DCGM's ``Hostname`` may be the FQDN of a node named by its
    short name."""
    for name in dict.fromkeys((label, label.split(".")[0])):
        if name and (node := look.node(name)) is not None:
            return name, node
    return label, None


@poller("gpu-xid", title="GPU Xid errors", setting="xid_after", default=60.0)
def xid(metrics: MetricsSource, look: Lookup, now: datetime) -> list[Observation]:
    """GPUs whose last Xid needs the GPU reset, the node drained or the GPU repaired (or is
    one gpubot's table does not know)."""
    out: dict[str, Observation] = {}
    for s in _ask(metrics, XID_SET, XID):
        code = int(s.value)
        info = xid_info(code)
        if code == 0 or severity_conditions(info) == {"app-fault"}:
            continue
        name, node = _node(look, node_of(s.labels))
        pool = pool_of(node)
        gpu = gpu_of(s.labels)
        which = s.labels.get("UUID") or s.labels.get("uuid") or s.labels.get("gpu") or gpu
        what = f"{info.name}: {info.action}" if info is not None else "not in gpubot's table"
        subject = f"gpu/{name}/{which}/xid-{code}"
        out[subject] = Observation(
            "gpu-xid", subject, pool_group(pool), 1.0,
            f"{name}: {gpu} Xid {code} ({what})", (ObjectRef("Node", name),),
            ("doctor", name), node=name, pool=pool,
            evidence=(f"{XID} = {code} on {node_of(s.labels)} {gpu} (the last Xid it "
                      "reported; it stays until the GPU is reset)",
                      *((f"Xid {code}: {info.meaning}",) if info is not None else ())))
    return list(out.values())
