"""Metric findings: Xid errors, GPUs held by idle pods, allocation and quota figures.

Each check asks the ``MetricsSource`` on ``reader.metrics`` (none configured: nothing runs).
A backend that cannot answer, or a series no exporter writes, becomes one
``METRICS_UNAVAILABLE`` finding (``info``) naming what could not be checked; figures go in
``diag.details["metrics"]`` for the templates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from handlers.fixes import xid_fix
from handlers.knowledge.xid import severity_conditions, xid_info
from handlers.kube.commands import kubectl, line
from handlers.model import Diagnosis, Finding, Fix, ObjectRef
from handlers.runtime.labels import gpu_of, node_of, pod_of
from handlers.runtime.source import MetricsError, MetricsSource, Sample
from handlers.timefmt import seconds_since
from handlers.view import Reader

XID = "DCGM_FI_DEV_XID_ERRORS"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
KSM_GPU = 'resource="nvidia_com_gpu"'
# Pods that hold their node's resources (kube-state-metrics keeps finished pods' requests).
_ACTIVE = ('* on (namespace, pod) group_left () '
           '(max by (namespace, pod) (kube_pod_status_phase{phase=~"Pending|Running"}) == 1)')
ALLOCATED = f'sum(kube_pod_container_resource_requests{{{KSM_GPU}, node!=""}} {_ACTIVE})'
ALLOCATABLE = f"sum(kube_node_status_allocatable{{{KSM_GPU}}})"
# GPUs whose last Xid is not 0 (DCGM keeps it until the GPU is reset).
XID_SET = f"{XID} != 0"

_ACTION_TEXT = {
    "app-fix": "the application caused it: fix or restart the workload; the GPU is fine",
    "reset": "reset the GPU once its workloads are drained (nvidia-smi -r, or reboot the node)",
    "drain": "drain the node and reboot it; the GPU cannot be used until then",
    "repair": "the GPU needs hardware service: cordon the node and contact the vendor (RMA)",
}
# Codes whose GPU shortage idle pods could relieve: then GPU_IDLE_ALLOCATED is a warning.
_SHORTAGE = {"INSUFFICIENT_GPU", "GPU_FRAGMENTATION", "QUOTA_EXCEEDED",
             "PREEMPTION_BLOCKED", "QUEUE_QUOTA_EXHAUSTED"}


def or_absent(query: str, metric: str) -> str:
    """``query``, or one labelless sample when no exporter writes ``metric`` at all (an
    empty answer then means "none", not "not scraped")."""
    return f"({query}) or on () absent({metric})"


def idle_query(window: str, threshold: float) -> str:
    """GPUs whose utilisation stayed below ``threshold`` percent for the whole ``window``."""
    return f"max_over_time({UTIL}[{window}]) < {threshold:g}"


@dataclass
class _Run:
    """One diagnosis' metric checks: what could not be checked, figures to show."""

    metrics: MetricsSource
    missing: list[str] = field(default_factory=list)
    error: str | None = None
    figures: list[str] = field(default_factory=list)

    def query(self, q: str, what: str, *, required: bool = True,
              metric: str | None = None) -> list[Sample] | None:
        """Samples, or None (recorded as not checked) when the backend fails or, for a
        ``required`` series, when no exporter writes it. With ``metric``, ``q`` is a filter
        (only the interesting series come back, however large the cluster) and
        ``absent(metric)`` tells an empty answer from a missing exporter."""
        if metric is not None:
            q = or_absent(q, metric)
        if self.error is not None:
            self._miss(what)
            return None
        try:
            out = self.metrics.instant(q)
        except MetricsError as err:
            self.error = str(err)
            self._miss(what)
            return None
        if metric is not None and len(out) == 1 and not out[0].labels:
            self._miss(f"{what}: no {metric} series in Prometheus")
            return None
        if required and metric is None and not out:
            self._miss(f"{what}: no series answers {q}")
            return None
        return out

    def _miss(self, what: str) -> None:
        if not any(m.split(":")[0] == what.split(":")[0] for m in self.missing):
            self.missing.append(what)

    def finish(self, diag: Diagnosis) -> None:
        diag.check(f"metrics from {self.metrics.source}")
        if self.figures:
            diag.details.setdefault("metrics", []).extend(self.figures)
        if not self.missing:
            return
        head = (f"{self.metrics.source} could not answer ({self.error})" if self.error
                else f"{self.metrics.source} has no data for some checks")
        diag.add(Finding(
            "METRICS_UNAVAILABLE",
            f"{head}; not checked: " + "; ".join(m.split(":")[0] for m in self.missing) + ".",
            evidence=tuple(self.missing),
            fix=_metrics_fix(self.metrics.source),
        ))
        for m in self.missing:
            line = f"metrics: {m}"
            if line not in diag.unchecked:
                diag.unchecked.append(line)


def _quote(value: str) -> str:
    """A PromQL string literal (Go's quoting rules, which JSON's escapes satisfy)."""
    return json.dumps(value)


def _node_match(label: str, nodes: set[str] | None) -> bool:
    # DCGM's Hostname may be the node's FQDN while the node is named by its short name.
    return nodes is None or label in nodes or label.split(".")[0] in nodes


def check_xid(run: _Run, nodes: Iterable[str] | None) -> list[Finding]:
    """GPU_XID_ERRORS per GPU whose last Xid (a gauge: DCGM keeps the last code, 0 for
    none, until the GPU is reset) is not 0, on ``nodes`` (None: every node)."""
    scope = None if nodes is None else set(nodes)
    samples = run.query(XID_SET, f"Xid errors ({XID} from dcgm-exporter)", metric=XID)
    out: list[Finding] = []
    for s in samples or []:
        node, code = node_of(s.labels), int(s.value)
        if code == 0 or not _node_match(node, scope):
            continue
        info = xid_info(code)
        gpu = gpu_of(s.labels)
        shown = ", ".join(f"{k}={_quote(v)}" for k, v in sorted(s.labels.items())
                          if k in ("Hostname", "node", "gpu", "UUID", "modelName"))
        evidence = [f"{XID}{{{shown}}} = {code} (the last Xid this GPU reported; it stays "
                    "until the GPU is reset)"]
        if info is None:
            summary = (f"{node}: {gpu} reported Xid {code}, which gpubot's table does not "
                       "know.")
        else:
            summary = (f"{node}: {gpu} reported Xid {code} ({info.name}): "
                       f"{_ACTION_TEXT.get(info.action, info.action)}.")
            evidence.append(f"Xid {code}: {info.meaning} (source: {info.source})")
            if info.hardware:
                evidence.append("a hardware fault: restarting the device plugin does not help")
        out.append(Finding("GPU_XID_ERRORS", summary, (ObjectRef("Node", node),),
                           tuple(evidence), xid_fix(node, code, info),
                           conditions=severity_conditions(info)))
    return out


_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def duration_seconds(text: str) -> float | None:
    """A PromQL duration (``1h30m``) in seconds; None when unreadable."""
    parts = re.findall(r"(\d+)(ms|[smhdwy])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(int(n) * _UNITS[u] for n, u in parts)


def _younger(reader: Reader, held: tuple[str, str], span: float | None) -> bool:
    """True when the pod has run for less than the window: too soon to call it idle."""
    if span is None:
        return False
    pod = reader.get("Pod", held[1], held[0])
    if pod is None:
        return False
    started = pod.get("status", {}).get("startTime") or pod.get("metadata", {}).get(
        "creationTimestamp")
    age = seconds_since(reader.now(), started)
    return age is not None and age < span


def _owner(reader: Reader, ns: str, pod: str) -> str:
    """``deployment/x`` (through its ReplicaSet), ``job/y``...; ``pod/z`` when it has none."""
    obj = reader.get("Pod", pod, ns)
    refs = (obj or {}).get("metadata", {}).get("ownerReferences") or []
    if not refs:
        return f"pod/{pod}" if obj is not None else "owner unknown"
    kind, name = str(refs[0].get("kind", "")), str(refs[0].get("name", ""))
    if kind == "ReplicaSet":
        rs = reader.get("ReplicaSet", name, ns)
        for ref in (rs or {}).get("metadata", {}).get("ownerReferences") or []:
            if ref.get("kind") == "Deployment":
                return f"deployment/{ref.get('name')}"
    return f"{kind.lower()}/{name}"


def _idle(run: _Run, reader: Reader) -> dict[tuple[str, str], list[str]]:
    """(namespace, pod) -> one evidence line per GPU it holds below the threshold for the
    whole window."""
    window, threshold = run.metrics.idle_window, run.metrics.idle_threshold
    q = idle_query(window, threshold)
    samples = run.query(q, f"idle GPUs ({UTIL} from dcgm-exporter)", metric=UTIL)
    idle: dict[tuple[str, str], list[str]] = {}
    span = duration_seconds(window)
    for s in samples or []:
        held = pod_of(s.labels)
        if held is None or s.value >= threshold or _younger(reader, held, span):
            continue
        idle.setdefault(held, []).append(
            f"{held[0]}/{held[1]} on {node_of(s.labels) or '?'} {gpu_of(s.labels)}: "
            f"max utilisation {s.value:g}% over {window}")
    return idle


def idle_pods(reader: Reader, diag: Diagnosis) -> dict[tuple[str, str], int]:
    """GPUs held by idle pods, per (namespace, pod), for reports that count them (the
    digest); what could not be checked goes on ``diag`` as METRICS_UNAVAILABLE. Empty
    without a metrics source."""
    if reader.metrics is None:
        return {}
    run = _Run(reader.metrics)
    idle = _idle(run, reader)
    run.finish(diag)
    return {held: len(lines) for held, lines in idle.items()}


def check_idle(run: _Run, reader: Reader, diag: Diagnosis) -> list[Finding]:
    """GPU_IDLE_ALLOCATED: GPUs held by pods whose utilisation stayed below the threshold
    for the whole window."""
    window, threshold = run.metrics.idle_window, run.metrics.idle_threshold
    idle = _idle(run, reader)
    if not idle:
        return []
    shortage = any(c in _SHORTAGE for c in diag.codes)
    owners = {k: _owner(reader, *k) for k in idle}
    gpus = sum(len(v) for v in idle.values())
    pods = ", ".join(f"{ns}/{pod} ({owners[(ns, pod)]})" for ns, pod in sorted(idle))
    evidence = [line for k in sorted(idle) for line in idle[k]]
    return [Finding(
        "GPU_IDLE_ALLOCATED",
        f"{gpus} GPU{'s' if gpus > 1 else ''} held by pods below {threshold:g}% utilisation "
        f"for {window}: {pods}." + (" They are the GPUs this pod could have." if shortage
                                    else ""),
        tuple(ObjectRef("Pod", pod, ns) for ns, pod in sorted(idle)), tuple(evidence),
        Fix("Ask the owners to scale down or delete the idle workloads.", tuple(
            kubectl("scale", owners[(ns, pod)], "--replicas=0", namespace=ns)
            if owners[(ns, pod)].startswith(("deployment/", "statefulset/"))
            else kubectl("delete", "pod", pod, namespace=ns) for ns, pod in sorted(idle)[:3])),
        conditions=frozenset({"shortage"} if shortage else ()),
    )]


def allocation_figures(run: _Run) -> None:
    """Cluster GPU allocation now and over the last day, from kube-state-metrics."""
    what = "GPU allocation (kube_node_status_allocatable from kube-state-metrics)"
    total = run.query(ALLOCATABLE, what)
    used = run.query(ALLOCATED, what, required=False)
    if not total:
        return
    alloc = total[0].value
    now = used[0].value if used else 0.0
    run.figures.append(f"kube-state-metrics: {now:g} of {alloc:g} allocatable GPUs requested "
                       "by running or bound pods")
    try:
        series = run.metrics.range(f"({ALLOCATED}) / ({ALLOCATABLE})", 86400, 3600)
    except MetricsError:
        return  # the instant figures stand; the day's trend is a nicety
    values = [v for s in series for _, v in s.points]
    if values:
        run.figures.append(f"GPU allocation over the last 24h: min {min(values):.0%}, "
                           f"max {max(values):.0%}")


def quota_figures(run: _Run, namespace: str) -> None:
    q = (f'kube_resourcequota{{namespace={_quote(namespace)}, '
         r'resource=~"(requests|limits)\\.nvidia\\.com/.+|nvidia\\.com/.+"}')
    samples = run.query(q, "GPU quota (kube_resourcequota)", required=False)
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for s in samples or []:
        key = (s.labels.get("resourcequota", "?"), s.labels.get("resource", "?"))
        rows.setdefault(key, {})[s.labels.get("type", "?")] = s.value
    for (quota, resource), v in sorted(rows.items()):
        run.figures.append(f"kube-state-metrics: quota {namespace}/{quota} {resource}: "
                           f"used {v.get('used', 0):g} of {v.get('hard', 0):g}")


def enrich(reader: Reader, diag: Diagnosis, *, nodes: Iterable[str] | None = None,
           idle: bool = False, allocation: bool = False,
           namespace: str | None = None) -> None:
    """Add the metric findings that apply to ``diag`` (call before ``diag.finish()``)."""
    metrics = reader.metrics
    if metrics is None:
        return
    run = _Run(metrics)
    diag.add_all(check_xid(run, nodes))
    if idle:
        diag.add_all(check_idle(run, reader, diag))
    if allocation:
        allocation_figures(run)
    if namespace:
        quota_figures(run, namespace)
    run.finish(diag)



def _metrics_fix(source: str) -> Fix:
    """Where Prometheus is: its own answer to ``up`` shows what it scrapes."""
    url = source.split()[-1] if source.split() else ""
    return Fix("Check the Prometheus URL and credentials (--prometheus, GPUBOT_PROMETHEUS_URL), "
               "and that dcgm-exporter and kube-state-metrics are scraped.",
               (line("curl", "-s", f"{url.rstrip('/')}/api/v1/query?query=up"),)
               if url.startswith(("http://", "https://")) else ())
