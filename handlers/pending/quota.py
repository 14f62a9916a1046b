"""Quota checks: ResourceQuota and LimitRange rules that keep a GPU pod from being created.

What the API server does (kubernetes/kubernetes), and so what this module assumes:

- ResourceQuota admission (``apiserver/pkg/admission/plugin/resourcequota/controller.go``)
  refuses a pod with ``exceeded quota: Q, requested: r=n, used: r=n, limited: r=n``, with
  ``status unknown for quota: Q, resources: r`` while ``status.used`` lacks a tracked
  resource, and with ``failed quota: Q: must specify ...`` when the quota tracks cpu/memory
  and a container does not set them (only cpu/memory: ``pkg/quota/v1/evaluator/core/pods.go``
  ``validationSet`` says never to add GPUs to that list).
- For extended resources only ``requests.<name>`` is tracked (``isExtendedResourceNameForQuota``);
  ``limits.nvidia.com/gpu`` and a bare ``nvidia.com/gpu`` in ``spec.hard`` are accepted by
  validation but never enforced.
- LimitRange admission (``plugin/pkg/admission/limitranger``) first fills missing requests
  and limits from ``defaultRequest``/``default`` (API defaulting stored ``default = max`` and
  ``defaultRequest = default or min``), then checks ``min``/``max`` per Container and per Pod
  (a Pod sum exists only when every container sets the resource).

These rules are checked against a pod that does not exist yet (the controller's template);
a pod that exists was admitted, so only what still matters for it is reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from handlers.fixes import raise_quota
from handlers.gpu import (
    GPU_RESOURCE,
    MIG_RESOURCE_RE,
    SHARED_GPU_RESOURCE,
    gpu_count,
    is_gpu_resource,
    labels,
    name_of,
    ns_of,
)
from handlers.kube.commands import kubectl, line, merge_patch
from handlers.kube.quantity import QuantityError, fmt_quantity, parse_quantity
from handlers.kube.resources import pod_requests
from handlers.model import Finding, Fix, ObjectRef
from handlers.pending.checks import pending_check
from handlers.pending.context import PendingContext
from handlers.view import ACTIVE_PODS, Obj
from handlers.words import counted

REQUESTS = "requests."
LIMITS = "limits."
LIMIT_RANGER_ANNOTATION = "kubernetes.io/limit-ranger"
# Resources whose quota makes every container name them (pods.go validationSet).
CPU_MEMORY_QUOTA_KEYS = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu",
                         "limits.memory")

EXCEEDED_RE = re.compile(
    r"exceeded quota: (?P<quota>[^,\s]+), requested: (?P<requested>\S+), "
    r"used: (?P<used>\S+), limited: (?P<limited>[^\s\"']+)", re.IGNORECASE)
STATUS_UNKNOWN_RE = re.compile(r"status unknown for quota: (?P<quota>[^,\s\"']+)", re.IGNORECASE)
MUST_SPECIFY_RE = re.compile(r"failed quota: (?P<quota>[^:\s]+): must specify (?P<what>.+)",
                             re.IGNORECASE)
LIMITRANGE_RE = re.compile(
    r"(?P<bound>maximum|minimum) (?P<resource>\S+) usage per (?P<type>Container|Pod) is "
    r"(?P<enforced>[^\s.,]+)(?:, but (?P<which>limit|request) is (?P<value>[^\s.,]+)|\. +No "
    r"(?P<missing>limit|request) is specified)", re.IGNORECASE)
LIMIT_RANGER_SET_RE = re.compile(r"(?P<resources>[\w./, -]+?) (?P<what>request|limit) for "
                                 r"(?:init )?container (?P<container>[\w.-]+)")


# ------------------------------------------------------------------------------ helpers

def _q(value: Any) -> float | None:
    """The quantity, or None when it is absent or unreadable."""
    if value is None or value == "":
        return None
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def _fmt(value: float | None) -> str:
    return "?" if value is None else fmt_quantity(value)


def _gpu_key(key: str) -> str | None:
    """The GPU resource a quota key counts (``requests.nvidia.com/gpu`` -> ``nvidia.com/gpu``)."""
    for prefix in (REQUESTS, LIMITS, ""):
        if key.startswith(prefix) and is_gpu_resource(key[len(prefix):]):
            return key[len(prefix):]
    return None


def _tracked(key: str) -> bool:
    """Whether the API server enforces this quota key for pods' extended resources."""
    return key.startswith(REQUESTS) and is_gpu_resource(key[len(REQUESTS):])


def _failed_create(ctx: PendingContext) -> list[str]:
    return [str(e.get("message", "")) for e in ctx.controller_events + ctx.events
            if e.get("reason") in ("FailedCreate", "FailedCreatePod", "Failed")]


def _parse_pairs(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        k, _, v = part.partition("=")
        if k and v:
            out[k.strip()] = v.strip()
    return out


def containers(pod: Obj, init: bool = True) -> Iterator[Obj]:
    spec = pod.get("spec") or {}
    yield from spec.get("containers") or []
    if init:
        yield from spec.get("initContainers") or []


def _resources(c: Obj) -> tuple[dict[str, Any], dict[str, Any]]:
    res = c.get("resources") or {}
    return dict(res.get("requests") or {}), dict(res.get("limits") or {})


def _quota_applies(q: Obj, pod: Obj) -> bool:
    """Quota scopes the way pods.go podMatchesScopeFunc reads them (the common ones)."""
    spec = q.get("spec") or {}
    scopes = list(spec.get("scopes") or [])
    selector = ((spec.get("scopeSelector") or {}).get("matchExpressions")) or []
    pspec = pod.get("spec") or {}
    best_effort = all(not any(_resources(c)) for c in containers(pod))
    terminating = pspec.get("activeDeadlineSeconds") is not None
    checks = {"BestEffort": best_effort, "NotBestEffort": not best_effort,
              "Terminating": terminating, "NotTerminating": not terminating}
    for s in scopes:
        if s in checks and not checks[s]:
            return False
    for expr in selector:
        scope, op, values = expr.get("scopeName"), expr.get("operator"), expr.get("values") or []
        if scope in checks:
            if checks[scope] != (op != "DoesNotExist"):
                return False
        elif scope == "PriorityClass":
            pc = pspec.get("priorityClassName") or ""
            ok = {"In": pc in values, "NotIn": bool(pc) and pc not in values,
                  "Exists": bool(pc), "DoesNotExist": not pc}.get(str(op), True)
            if not ok:
                return False
    return True


def _holders(ctx: PendingContext, resource: str) -> list[tuple[str, float, str]]:
    """(pod, amount, where) for active pods of the namespace that hold ``resource``."""
    out = []
    for p in ctx.reader.list("Pod", ctx.namespace, field_selector=ACTIVE_PODS):
        if name_of(p) == ctx.pod_name:
            continue
        amount = pod_requests(p).get(resource, 0.0)
        if amount > 0:
            node = (p.get("spec") or {}).get("nodeName") or "not scheduled"
            phase = (p.get("status") or {}).get("phase", "?")
            out.append((name_of(p), amount, f"{phase} on {node}"))
    return sorted(out, key=lambda h: (-h[1], h[0]))


def _holder_lines(ctx: PendingContext, resource: str, limit: int = 6) -> list[str]:
    hs = _holders(ctx, resource)
    lines = [f"holder {ctx.namespace}/{n}: {resource}={fmt_quantity(a)} ({where})"
             for n, a, where in hs[:limit]]
    if len(hs) > limit:
        lines.append(f"... and {len(hs) - limit} more pods holding {resource}")
    return lines


# ------------------------------------------------------------------------------ quota
@dataclass
class _Exceeded:
    quota: str
    keys: dict[str, tuple[str | None, str | None, str | None]] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)


def check_quota_exceeded(ctx: PendingContext, quotas: list[Obj]) -> list[Finding]:
    found: dict[str, _Exceeded] = {}
    for msg in _failed_create(ctx):
        m = EXCEEDED_RE.search(msg)
        if not m:
            continue
        ex = found.setdefault(m["quota"], _Exceeded(m["quota"]))
        req, used, lim = (_parse_pairs(m[g]) for g in ("requested", "used", "limited"))
        for k in lim:
            ex.keys[k] = (req.get(k), used.get(k), lim.get(k))
        if msg not in ex.evidence:
            ex.evidence.append(msg)
    if not ctx.pod_exists:
        # The pod would be refused now: used + what it asks > hard, on a tracked GPU key.
        need = pod_requests(ctx.pod)
        for q in quotas:
            if not _quota_applies(q, ctx.pod):
                continue
            st = q.get("status") or {}
            hard, used = st.get("hard") or {}, st.get("used") or {}
            for key, hv in hard.items():
                if not _tracked(key) or key not in used:
                    continue
                want = need.get(key[len(REQUESTS):], 0.0)
                h, u = _q(hv), _q(used_now := used[key])
                if want > 0 and h is not None and u is not None and u + want > h:
                    ex = found.setdefault(name_of(q), _Exceeded(name_of(q)))
                    ex.keys.setdefault(key, (fmt_quantity(want), str(used_now), str(hv)))
    out = []
    for ex in found.values():
        gpu_keys = [k for k in ex.keys if _gpu_key(k)] or list(ex.keys)
        evidence = []
        for k in gpu_keys:
            k_req, k_used, k_lim = ex.keys[k]
            evidence.append(f"ResourceQuota {ex.quota}: {k} used {k_used} / hard {k_lim}; "
                            f"this pod asks {k_req}")
        evidence += ex.evidence[-1:]
        for k in gpu_keys:
            res = k[len(REQUESTS):] if k.startswith(REQUESTS) else k
            evidence += _holder_lines(ctx, res)
        key = gpu_keys[0] if gpu_keys else "requests.nvidia.com/gpu"
        # A holder by name, not "above": on a Slack card the evidence is in the thread.
        holders = _holders(ctx, key.removeprefix(REQUESTS))
        stop = "stop a pod that holds it" + (
            f", such as {ctx.namespace}/{holders[0][0]}" if holders else "")
        q_req, q_used, q_lim = ex.keys.get(key, (None, None, None))
        bigger = fmt_quantity((_q(q_used) or 0.0) + (_q(q_req) or 0.0)) if q_used else ""
        out.append(Finding(
            "QUOTA_EXCEEDED",
            f"ResourceQuota {ex.quota} in {ctx.namespace} is used up for {key}: used {q_used} of "
            f"{q_lim}, and the pod asks {q_req} more; the API server refuses to create it.",
            (ctx.target_ref, ObjectRef("ResourceQuota", ex.quota, ctx.namespace)),
            tuple(evidence),
            raise_quota(ctx.namespace, ex.quota, key, bigger, stop) if bigger
            else Fix(f"Free quota ({stop}), or raise it.",
                     (kubectl("edit", "resourcequota", ex.quota, namespace=ctx.namespace),)),
        ))
    return out


def check_quota_not_ready(ctx: PendingContext, quotas: list[Obj]) -> list[Finding]:
    out: list[Finding] = []
    seen: set[str] = set()
    by_name = {name_of(q): q for q in quotas}
    for msg in _failed_create(ctx):
        m = STATUS_UNKNOWN_RE.search(msg)
        if m and m["quota"] not in seen:
            seen.add(m["quota"])
            out.append(_not_ready_status(ctx, m["quota"], by_name.get(m["quota"]), [msg]))
            continue
        m = MUST_SPECIFY_RE.search(msg)
        if m and ("must:" + m["quota"]) not in seen:
            seen.add("must:" + m["quota"])
            out.append(_must_specify(ctx, m["quota"], [msg], m["what"]))
    if ctx.pod_exists:
        return out
    for q in quotas:
        if not _quota_applies(q, ctx.pod):
            continue
        qname = name_of(q)
        st = q.get("status") or {}
        used = st.get("used")
        tracked = [k for k in (q.get("spec") or {}).get("hard") or {}
                   if _tracked(k) or k in CPU_MEMORY_QUOTA_KEYS]
        missing = [k for k in tracked if used is None or k not in used]
        if missing and qname not in seen:
            seen.add(qname)
            out.append(_not_ready_status(ctx, qname, q, [
                f"ResourceQuota {qname}: status.used has no {', '.join(missing)}"]))
        lacking = _cpu_memory_missing(ctx.pod, (q.get("spec") or {}).get("hard") or {})
        if lacking and ("must:" + qname) not in seen:
            seen.add("must:" + qname)
            what = "; ".join(f"{k} for: {','.join(cs)}" for k, cs in lacking.items())
            out.append(_must_specify(ctx, qname, [f"ResourceQuota {qname} tracks "
                                                  f"{', '.join(lacking)}"], what))
    return out


def _not_ready_status(ctx: PendingContext, qname: str, q: Obj | None,
                      evidence: list[str]) -> Finding:
    ev = list(evidence)
    if q is not None:
        used = (q.get("status") or {}).get("used")
        ev.append(f"ResourceQuota {qname} status.used: "
                  + (", ".join(f"{k}={v}" for k, v in used.items()) if used else "(none)"))
    return Finding(
        "QUOTA_NOT_READY",
        f"ResourceQuota {qname} has no computed usage yet, so the API server refuses every new "
        "pod in the namespace until the quota controller catches up.",
        (ctx.target_ref, ObjectRef("ResourceQuota", qname, ctx.namespace)), tuple(ev),
        Fix("Check the quota controller: the quota's status, kube-controller-manager's log "
            "(resourcequota), and aggregated APIs that do not answer (they stall it).",
            (kubectl("describe", "resourcequota", qname, namespace=ctx.namespace),
             line("kubectl", "get", "apiservices") + " | grep False")),
    )


def _must_specify(ctx: PendingContext, qname: str, evidence: list[str], what: str) -> Finding:
    return Finding(
        "QUOTA_NOT_READY",
        f"ResourceQuota {qname} requires every container to set {what.strip()}; the pod "
        "does not, so it is refused.",
        (ctx.target_ref, ObjectRef("ResourceQuota", qname, ctx.namespace)), tuple(evidence),
        Fix(f"Set {what.strip()} in every container, at what the workload needs (or add a "
            "LimitRange default for the namespace).",
            (kubectl("describe", "resourcequota", qname, namespace=ctx.namespace),),
            docs=("https://kubernetes.io/docs/concepts/policy/resource-quotas/",)),
    )


def _cpu_memory_missing(pod: Obj, hard: Mapping[str, Any]) -> dict[str, list[str]]:
    required = [k for k in hard if k in CPU_MEMORY_QUOTA_KEYS]
    out: dict[str, list[str]] = {}
    for c in containers(pod):
        req, lim = _resources(c)
        for key in required:
            res = key.split(".")[-1]
            have = res in lim if key.startswith(LIMITS) else (res in req or res in lim)
            if not have:
                out.setdefault(key, []).append(str(c.get("name", "?")))
    return out


def check_requests_limits_unequal(ctx: PendingContext, quotas: list[Obj]) -> list[Finding]:
    out = []
    for q in quotas:
        hard = (q.get("spec") or {}).get("hard") or {}
        by_res: dict[str, dict[str, str]] = {}
        for k, v in hard.items():
            res = _gpu_key(k)
            if res:
                kind = "requests" if k.startswith(REQUESTS) else (
                    "limits" if k.startswith(LIMITS) else "bare")
                by_res.setdefault(res, {})[kind] = str(v)
        for res, kinds in sorted(by_res.items()):
            req = kinds.get("requests")
            others = {k: v for k, v in kinds.items() if k != "requests"}
            if not others:
                continue  # only requests.<gpu>: the form the API server enforces
            if req is not None and all(_q(v) == _q(req) for v in others.values()):
                continue
            shown = [f"{'' if k == 'bare' else k + '.'}{res}: {v}" for k, v in
                     sorted(kinds.items())]
            why = ("only the requests. entry is enforced for extended resources"
                   if req is not None else "no requests. entry: nothing is enforced")
            out.append(Finding(
                "QUOTA_REQUESTS_LIMITS_UNEQUAL",
                f"ResourceQuota {name_of(q)} sets {', '.join(shown)}; {why}, so the quota does "
                "not limit what it seems to.",
                (ObjectRef("ResourceQuota", name_of(q), ns_of(q) or ctx.namespace),),
                tuple(f"ResourceQuota {name_of(q)} spec.hard {s}" for s in shown),
                _one_value(q, res, kinds, ctx.namespace),
            ))
    return out


def _time_sliced(node: Obj) -> int:
    lab = labels(node)
    try:
        replicas = int(lab.get("nvidia.com/gpu.replicas", "1"))
    except ValueError:
        replicas = 1
    if lab.get("nvidia.com/gpu.sharing-strategy") in ("time-slicing", "mps"):
        replicas = max(replicas, 2)
    return replicas


def check_sharing_miscount(ctx: PendingContext, quotas: list[Obj]) -> list[Finding]:
    gpu_quotas = [q for q in quotas if any(_tracked(k) for k in
                                           (q.get("spec") or {}).get("hard") or {})]
    if not gpu_quotas:
        return []
    need = {r: v for r, v in pod_requests(ctx.pod).items() if is_gpu_resource(r) and v > 0}
    out = []
    for q in gpu_quotas:
        hard = (q.get("spec") or {}).get("hard") or {}
        for res in sorted(need):
            key = REQUESTS + res
            sliced = [n for n in ctx.nodes if _time_sliced(n) > 1 and gpu_count(n, "capacity", res)]
            if key in hard and sliced and res in (GPU_RESOURCE, SHARED_GPU_RESOURCE):
                ev = [f"ResourceQuota {name_of(q)}: {key} hard {hard[key]}"]
                for n in sliced[:3]:
                    lab = labels(n)
                    ev.append(f"node {name_of(n)}: nvidia.com/gpu.replicas="
                              f"{lab.get('nvidia.com/gpu.replicas', '?')}, "
                              f"nvidia.com/gpu.count={lab.get('nvidia.com/gpu.count', '?')}, "
                              f"capacity {res}: {fmt_quantity(gpu_count(n, 'capacity', res))}")
                r = _time_sliced(sliced[0])
                hv = _q(hard[key]) or 0.0
                out.append(Finding(
                    "QUOTA_SHARING_MISCOUNT",
                    f"Time-slicing advertises {r} {res} per physical GPU, and ResourceQuota "
                    f"{name_of(q)} counts those slices: {key}={hard[key]} is "
                    f"{counted(hv / r, 'physical GPU')}, not {hard[key]}.",
                    (ObjectRef("ResourceQuota", name_of(q), ctx.namespace),
                     *(ObjectRef("Node", name_of(n)) for n in sliced[:3])),
                    tuple(ev),
                    Fix(f"Count slices in the quota ({fmt_quantity(hv * r)} for "
                        f"{fmt_quantity(hv)} GPUs), or rename shared GPUs (renameByDefault: true "
                        "-> nvidia.com/gpu.shared) and quota requests.nvidia.com/gpu.shared "
                        "separately.",
                        (merge_patch("resourcequota", name_of(q),
                                     {"spec": {"hard": {key: fmt_quantity(hv * r)}}},
                                     namespace=ctx.namespace),)),
                ))
            elif key not in hard and (MIG_RESOURCE_RE.match(res) or res == SHARED_GPU_RESOURCE):
                tracked = ", ".join(f"{k}={v}" for k, v in sorted(hard.items()) if _tracked(k))
                held = sum(a for _, a, _ in _holders(ctx, res))
                out.append(Finding(
                    "QUOTA_SHARING_MISCOUNT",
                    f"The pod asks {res}, which ResourceQuota {name_of(q)} does not count: "
                    f"GPU slices of that kind in {ctx.namespace} escape the GPU quota "
                    f"({fmt_quantity(held)} in use by other pods, uncounted).",
                    (ctx.target_ref, ObjectRef("ResourceQuota", name_of(q), ctx.namespace)),
                    (f"pod requests {res}: {fmt_quantity(need[res])}",
                     f"ResourceQuota {name_of(q)} counts only: {tracked}",
                     *_holder_lines(ctx, res, 4)),
                    _count_slice(ctx, name_of(q), key,
                                 fmt_quantity(held + need[res])),
                ))
    return out


# ------------------------------------------------------------------------------ LimitRange
def _lr_items(lr: Obj, kind: str) -> Iterator[Obj]:
    for item in (lr.get("spec") or {}).get("limits") or []:
        if item.get("type") == kind:
            yield item


def _admitted_resources(pod: Obj, lrs: list[Obj]) -> list[tuple[Obj, dict[str, Any],
                                                               dict[str, Any]]]:
    """Each container's (requests, limits) after API defaulting and LimitRanger defaults."""
    out = []
    for c in containers(pod):
        req, lim = _resources(c)
        for r, v in lim.items():
            req.setdefault(r, v)  # SetDefaults_Pod: a limit stands in for a missing request
        for lr in lrs:
            for item in _lr_items(lr, "Container"):
                for r, v in (item.get("defaultRequest") or {}).items():
                    req.setdefault(r, v)
                for r, v in (item.get("default") or {}).items():
                    lim.setdefault(r, v)
        out.append((c, req, lim))
    return out


def _bound_violation(bound: str, res: str, enforced: Any, req: Mapping[str, Any],
                     lim: Mapping[str, Any]) -> str | None:
    e = _q(enforced)
    if e is None:
        return None
    rq, lm = _q(req.get(res)), _q(lim.get(res))
    if bound == "max":
        if lm is None:
            return f"maximum {res} is {enforced}, no limit is specified"
        if lm > e:
            return f"maximum {res} is {enforced}, but limit is {lim[res]}"
        if rq is not None and rq > e:
            return f"maximum {res} is {enforced}, but request is {req[res]}"
    else:
        if rq is None:
            return f"minimum {res} is {enforced}, no request is specified"
        if rq < e:
            return f"minimum {res} is {enforced}, but request is {req[res]}"
        if lm is not None and lm < e:
            return f"minimum {res} is {enforced}, but limit is {lim[res]}"
    return None


def _sum_all(parts: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """limitranger ``sum``: a key appears only when every container sets it."""
    parts = list(parts)
    keys = set().union(*(p.keys() for p in parts)) if parts else set()
    out = {}
    for k in keys:
        vals = [_q(p.get(k)) for p in parts]
        if all(v is not None and k in p for v, p in zip(vals, parts, strict=True)):
            out[k] = fmt_quantity(sum(v for v in vals if v is not None))
    return out


def check_limitrange_violation(ctx: PendingContext, lrs: list[Obj]) -> list[Finding]:
    out: list[Finding] = []
    seen: set[str] = set()
    for msg in _failed_create(ctx):
        for m in LIMITRANGE_RE.finditer(msg):
            if not is_gpu_resource(m["resource"]) or m.group(0) in seen:
                continue
            seen.add(m.group(0))
            out.append(_lr_finding(ctx, lrs, m["type"], m["resource"], m["bound"].lower()[:3],
                                   m["enforced"], [msg]))
    if ctx.pod_exists or not lrs:
        return out
    admitted = _admitted_resources(ctx.pod, lrs)
    for lr in lrs:
        for kind in ("Container", "Pod"):
            for item in _lr_items(lr, kind):
                for bound in ("max", "min"):
                    for res, enforced in (item.get(bound) or {}).items():
                        if not is_gpu_resource(res):
                            continue
                        if kind == "Container":
                            subjects = [(f"container {c.get('name')}", rq, lm)
                                        for c, rq, lm in admitted]
                        else:
                            subjects = [("pod", _sum_all(rq for _, rq, _ in admitted),
                                         _sum_all(lm for _, _, lm in admitted))]
                        for who, rq, lm in subjects:
                            v = _bound_violation(bound, res, enforced, rq, lm)
                            if v:
                                out.append(_lr_finding(
                                    ctx, lrs, kind, res, bound, str(enforced),
                                    [f"LimitRange {name_of(lr)}: {bound} {res} per {kind} "
                                     f"{enforced}; {who}: {v}"]))
    return _dedupe(out)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    out: list[Finding] = []
    keys: set[tuple[str, ...]] = set()
    for f in findings:
        key = (f.code, f.summary)
        if key not in keys:
            keys.add(key)
            out.append(f)
    return out


def _lr_finding(ctx: PendingContext, lrs: list[Obj], kind: str, res: str, bound: str,
                enforced: str, evidence: list[str]) -> Finding:
    owners = [name_of(lr) for lr in lrs if any(
        res in (item.get(bound if bound in ("max", "min") else "max") or {})
        for item in _lr_items(lr, kind))]
    word = "at most" if bound.startswith("max") else "at least"
    lr_name = owners[0] if owners else "(LimitRange)"
    return Finding(
        "LIMITRANGE_VIOLATION",
        f"LimitRange {lr_name} in {ctx.namespace} allows {word} {enforced} {res} per {kind}; "
        "the pod is outside it and is refused.",
        (ctx.target_ref, ObjectRef("LimitRange", lr_name, ctx.namespace)), tuple(evidence),
        Fix(f"Ask for {word} {enforced} {res} per {kind.lower()}, or change the LimitRange.",
            (kubectl("edit", "limitrange", lr_name, namespace=ctx.namespace),)
            if owners else ()),
    )


def _injected_by_annotation(pod: Obj) -> dict[str, list[str]]:
    """container -> GPU resources LimitRanger set, from the pod's kubernetes.io/limit-ranger."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(LIMIT_RANGER_ANNOTATION, "")
    text = text.split(":", 1)[1] if text.startswith("LimitRanger plugin set") else text
    out: dict[str, list[str]] = {}
    for part in text.split(";"):
        m = LIMIT_RANGER_SET_RE.search(part.strip())
        if not m:
            continue
        for r in (x.strip() for x in m["resources"].split(",")):
            if is_gpu_resource(r) and r not in out.setdefault(m["container"], []):
                out[m["container"]].append(r)
    return {c: rs for c, rs in out.items() if rs}


def check_limitrange_default_gpu(ctx: PendingContext, lrs: list[Obj]) -> list[Finding]:
    defaults: dict[str, tuple[str, str, str]] = {}  # resource -> (limitrange, field, value)
    for lr in lrs:
        for item in _lr_items(lr, "Container"):
            for fld in ("default", "defaultRequest"):
                for r, v in (item.get(fld) or {}).items():
                    if is_gpu_resource(r) and _q(v):
                        defaults.setdefault(r, (name_of(lr), fld, str(v)))
    if not defaults:
        return []
    injected: dict[str, list[str]] = {}
    if ctx.pod_exists:
        injected = _injected_by_annotation(ctx.pod)
    else:
        for c in containers(ctx.pod):
            req, lim = _resources(c)
            rs = [r for r in defaults if r not in req and r not in lim]
            if rs:
                injected[str(c.get("name", "?"))] = rs
    injected = {c: [r for r in rs if r in defaults] for c, rs in injected.items()}
    injected = {c: rs for c, rs in injected.items() if rs}
    if not injected:
        return []
    names = sorted(injected)
    evidence = [f"LimitRange {lr}: {fld} {r}: {v}" for r, (lr, fld, v) in sorted(defaults.items())]
    evidence += [f"container {c} asks no GPU; gets {', '.join(f'{r}={defaults[r][2]}' for r in rs)}"
                 for c, rs in sorted(injected.items())]
    ann = ((ctx.pod.get("metadata") or {}).get("annotations") or {}).get(LIMIT_RANGER_ANNOTATION)
    if ann:
        evidence.append(f"{LIMIT_RANGER_ANNOTATION}: {ann}")
    lr_name = next(iter(defaults.values()))[0]
    res = sorted({r for rs in injected.values() for r in rs})
    return [Finding(
        "LIMITRANGE_DEFAULT_GPU",
        f"LimitRange {lr_name} gives a default {', '.join(res)} to containers that ask for no "
        f"GPU: {', '.join(names)}; the pod now needs more GPUs than it meant to"
        + (" (or is invalid)." if not ctx.pod_exists else "."),
        (ctx.target_ref, ObjectRef("LimitRange", lr_name, ctx.namespace)), tuple(evidence),
        Fix("Remove the GPU defaults (and the max/min they were derived from) from the "
            f"LimitRange, or set {res[0]}: 0 explicitly in {', '.join(names)} (the patch).",
            (kubectl("edit", "limitrange", lr_name, namespace=ctx.namespace),),
            ctx.pod_patch({"containers": [{"name": c, "resources": {"limits": {res[0]: 0}}}
                                          for c in names]})),
    )]


def _one_value(q: Obj, res: str, kinds: Mapping[str, str], namespace: str) -> Fix:
    """The quota's requests. entry at its smallest value, the other entries removed."""
    least = min(kinds.values(), key=lambda v: _q(v) or 0.0)
    hard: dict[str, str | None] = {
        (res if k == "bare" else f"{k}.{res}"): None for k in kinds if k != "requests"}
    hard[f"requests.{res}"] = least
    return Fix("Use one value, on requests. (GPUs cannot be overcommitted).",
               (merge_patch("resourcequota", name_of(q), {"spec": {"hard": hard}},
                            namespace=ns_of(q) or namespace),))


def _count_slice(ctx: PendingContext, quota: str, key: str, amount: str) -> Fix:
    """The quota counts the slice the pod asks, at what is in use plus what it asks."""
    return Fix(f"Add the slice to the quota ({amount}: what is in use and what the pod asks), "
               "or a lower limit that fits the namespace's share.",
               (merge_patch("resourcequota", quota, {"spec": {"hard": {key: amount}}},
                            namespace=ctx.namespace),))


CHECKS = (check_quota_exceeded, check_quota_not_ready, check_requests_limits_unequal,
          check_sharing_miscount)
LIMITRANGE_CHECKS = (check_limitrange_violation, check_limitrange_default_gpu)


@pending_check("quota", label="quota: ResourceQuota and LimitRange for GPU resources")
def check(ctx: PendingContext, before: Sequence[Finding] = ()) -> list[Finding]:
    """Every quota/LimitRange finding for the target pod (or controller template)."""
    quotas = ctx.reader.list("ResourceQuota", ctx.namespace)
    lrs = ctx.reader.list("LimitRange", ctx.namespace)
    out: list[Finding] = []
    for qc in CHECKS:
        out.extend(qc(ctx, quotas))
    for lc in LIMITRANGE_CHECKS:
        out.extend(lc(ctx, lrs))
    return out
