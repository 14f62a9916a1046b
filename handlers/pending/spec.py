"""Pod-spec checks: what is wrong in the pod (or its template) before any node is looked at.

Many of these never reach the scheduler: the API server rejects the pod, so the proof is a
FailedCreate event on the ReplicaSet/Job/StatefulSet, not a pod.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Sequence

from handlers.dra import uses_claims
from handlers.gpu import (
    GPU_RESOURCE,
    MIG_CONFIG_STATE_LABEL,
    MIG_NOT_APPLIED,
    MIG_RESOURCE_RE,
    MIG_STRATEGY_LABEL,
    VOLCANO_GPU_RESOURCES,
    is_gpu_resource,
    labels,
    name_of,
)
from handlers.kube.commands import kubectl
from handlers.kube.quantity import QuantityError, is_whole, parse_quantity
from handlers.model import Finding, Fix, ObjectRef, Patch
from handlers.pending.checks import pending_check
from handlers.pending.context import PendingContext
from handlers.scheduler.filters import SHARE_PARAMETERS
from handlers.view import Obj

# Images that only make sense with a GPU: CUDA bases and GPU builds of ML frameworks.
CUDA_IMAGE_RE = re.compile(
    r"(nvidia/cuda|nvcr\.io/|pytorch/pytorch:.*cuda|tensorflow:.*-gpu|-gpu[:@]|cuda\d|"
    r"/cuda:|vllm/|tritonserver)",
    re.IGNORECASE,
)
NO_CUDA_DEVICE_RE = re.compile(
    r"(no CUDA-capable device is detected|CUDA driver initialization failed|"
    r"Found no NVIDIA driver on your system|torch\.cuda\.is_available\(\) (is )?False|"
    # Without a GPU request the container gets no driver libraries, and CUDA says so in
    # these words (NVIDIA/gpu-operator#389).
    r"CUDA driver version is insufficient for CUDA runtime version)",
    re.IGNORECASE,
)
# API-server validation errors for extended resources (FailedCreate / kubectl apply).
LIMIT_REQUIRED_RE = re.compile(r"Limit must be set for non overcommitable resources")
MUST_EQUAL_RE = re.compile(r"must be equal to (\S+) limit")
NOT_INTEGER_RE = re.compile(r"\[([^\[\]]+)\]: Invalid value: \"?([^\":]+)\"?: must be an integer")
RUNTIMECLASS_RE = re.compile(r'RuntimeClass "([^"]+)" not found')


def containers(pod: Obj) -> Iterator[Obj]:
    spec = pod.get("spec", {})
    yield from spec.get("initContainers") or []
    yield from spec.get("containers") or []



def _failed_create(ctx: PendingContext) -> list[str]:
    return [str(e.get("message", "")) for e in ctx.controller_events
            if e.get("reason") in ("FailedCreate", "FailedCreatePod")]


def _resources(ctx: PendingContext, container: str, res: str, qty: str) -> Patch:
    """The container's requests and limits of ``res``, both ``qty``."""
    q = _quantity(qty)
    return ctx.container_patch(container, {"resources": {"requests": {res: q},
                                                         "limits": {res: q}}})


def _quantity(qty: str) -> int | str:
    """A whole count as a YAML integer (``nvidia.com/gpu: 1``), anything else as written."""
    return int(qty) if qty.isdigit() else qty


def check_gpu_quantities(ctx: PendingContext) -> list[Finding]:
    """GPU_LIMIT_MISSING, GPU_REQUEST_LIMIT_MISMATCH, GPU_FRACTIONAL_REQUEST."""
    out: list[Finding] = []
    ref = ctx.target_ref
    events = _failed_create(ctx)
    for c in containers(ctx.pod):
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        cname = c.get("name", "?")
        for r in sorted(set(req) | set(lim)):
            if not is_gpu_resource(r):
                continue
            rq, lm = req.get(r), lim.get(r)
            for label, q in (("requests", rq), ("limits", lm)):
                if q is not None and not is_whole(q):
                    whole = _round_up(q)
                    out.append(Finding(
                        "GPU_FRACTIONAL_REQUEST",
                        f"Container {cname} asks {r}: {q}; GPUs come in whole units.",
                        (ref,), (f"containers[{cname}].resources.{label}.{r}: {q}",
                                 *[m for m in events if "must be an integer" in m][:1]),
                        Fix("Ask for whole GPUs, or share them with time-slicing or MIG.",
                            patch=_resources(ctx, cname, r, whole)),
                    ))
            if rq is not None and lm is None:
                out.append(Finding(
                    "GPU_LIMIT_MISSING",
                    f"Container {cname} requests {r}: {rq} but sets no limit; the API server "
                    "rejects extended resources without limits.",
                    (ref,), (f"containers[{cname}].resources.requests.{r}: {rq}",
                             f"containers[{cname}].resources.limits.{r}: (not set)",
                             *[m for m in events if LIMIT_REQUIRED_RE.search(m)][:1]),
                    Fix("Set the limit equal to the request.",
                        patch=_resources(ctx, cname, r, str(rq))),
                ))
            elif rq is not None and lm is not None and _neq(rq, lm):
                out.append(Finding(
                    "GPU_REQUEST_LIMIT_MISMATCH",
                    f"Container {cname} requests {rq} {r} but limits it to {lm}; GPU "
                    "requests must equal limits.",
                    (ref,), (f"containers[{cname}].resources.requests.{r}: {rq}",
                             f"containers[{cname}].resources.limits.{r}: {lm}",
                             *[m for m in events if MUST_EQUAL_RE.search(m)][:1]),
                    Fix("Make them equal (or set only the limit).",
                        patch=_resources(ctx, cname, r, str(lm))),
                ))
    if not out:
        out.extend(_quantity_errors_from_events(ctx, ref, events))
    return out


def _quantity_errors_from_events(
    ctx: PendingContext, ref: ObjectRef, events: list[str]
) -> list[Finding]:
    """The template may already be fixed while the events still show the old rejection;
    when the template shows nothing, the events alone are proof of what was rejected."""
    out = []
    for m in events:
        if LIMIT_REQUIRED_RE.search(m):
            out.append(Finding("GPU_LIMIT_MISSING",
                               "The API server rejected the pod: a GPU request without limit.",
                               (ref,), (m,), Fix("Set limits equal to requests for every GPU.")))
        elif MUST_EQUAL_RE.search(m):
            out.append(Finding("GPU_REQUEST_LIMIT_MISMATCH",
                               "The API server rejected the pod: GPU requests differ from "
                               "limits.", (ref,), (m,), Fix("Make GPU requests equal to limits.")))
        elif (nm := NOT_INTEGER_RE.search(m)) and is_gpu_resource(nm.group(1)):
            out.append(Finding("GPU_FRACTIONAL_REQUEST",
                               f"The API server rejected a fractional {nm.group(1)}.",
                               (ref,), (m,), Fix("Ask for whole GPUs.")))
    return out


def _round_up(q: str | int | float) -> str:
    try:
        v = parse_quantity(q)
    except QuantityError:
        return "1"
    return str(max(1, int(-(-v // 1))))


def _neq(a: str | int | float, b: str | int | float) -> bool:
    try:
        return parse_quantity(a) != parse_quantity(b)
    except QuantityError:
        return str(a) != str(b)


def requested_gpu_resources(pod: Obj) -> dict[str, str]:
    """GPU-like resource names the pod's containers ask for, with the quantity as written."""
    out: dict[str, str] = {}
    for c in containers(pod):
        res = c.get("resources") or {}
        for section in ("limits", "requests"):
            for r, q in (res.get(section) or {}).items():
                if is_gpu_resource(r) or _looks_like_gpu(r):
                    out.setdefault(r, str(q))
    return out


def _looks_like_gpu(resource: str) -> bool:
    return "gpu" in resource.lower() or resource.lower().startswith("nvidia")


def _advertised(node: Obj, only: Iterable[str] | None = None) -> set[str]:
    """Resources the node offers: allocatable above zero, or listed in its capacity (of
    ``only``, when given)."""
    status = node.get("status") or {}
    alloc, cap = status.get("allocatable") or {}, status.get("capacity") or {}
    names = alloc.keys() | cap.keys() if only is None else only
    return {r for r in names if r in cap or parse_quantity(alloc.get(r)) > 0}


def check_unknown_resource(ctx: PendingContext) -> list[Finding]:
    """UNKNOWN_GPU_RESOURCE or, for MIG profiles on single-strategy nodes, MIG_STRATEGY_MISMATCH."""
    wanted = {r: q for r, q in requested_gpu_resources(ctx.pod).items()
              if r not in SHARE_PARAMETERS}
    # Usually some node offers each: stop at the first instead of reading every node.
    unknown = {r: q for r, q in wanted.items()
               if not any(r in _advertised(n, (r,)) for n in ctx.nodes)}
    if not ctx.nodes or not unknown:
        return []
    advertised = {r for n in ctx.nodes for r in _advertised(n)}
    out = []
    ref = ctx.target_ref
    for r, q in unknown.items():
        renamed = sorted(a for a in advertised if a.startswith(r + "."))
        if renamed:
            out.append(_renamed(ctx, r, q, renamed))
            continue
        if _explained_by_nodes(ctx, r):
            continue  # placement asks those nodes' chain why they do not offer it
        if MIG_RESOURCE_RE.match(r):
            single = [name_of(n) for n in ctx.nodes
                      if labels(n).get(MIG_STRATEGY_LABEL) == "single"]
            if single:
                out.append(Finding(
                    "MIG_STRATEGY_MISMATCH",
                    f"The pod asks for {r}, but the MIG nodes use the single strategy and "
                    "advertise MIG slices as nvidia.com/gpu.",
                    (ref, *(ObjectRef("Node", n) for n in single[:5])),
                    (f"requested {r}: {q}",
                     *(f"node {n}: {MIG_STRATEGY_LABEL}=single" for n in single[:5])),
                    Fix(f"Request nvidia.com/gpu: {q} with a nodeSelector on "
                        "nvidia.com/gpu.product (the MIG profile), or switch the ClusterPolicy "
                        "to mig.strategy: mixed."),
                ))
                continue
        gpu_names = sorted(a for a in advertised if is_gpu_resource(a))
        close = difflib.get_close_matches(r, gpu_names, n=3, cutoff=0.6)
        out.append(Finding(
            "UNKNOWN_GPU_RESOURCE",
            f"No node offers {r}" + (f"; did you mean {close[0]}?" if close else "."),
            (ref,),
            (f"requested {r}: {q}",
             "GPU resources nodes advertise: " + (", ".join(gpu_names) or "none")),
            Fix(f"Request one of: {', '.join(close or gpu_names) or 'nvidia.com/gpu'}; "
                "the nodes' allocatable resources list what exists.",
                (kubectl("get", "nodes", "-o",
                         "custom-columns=NODE:.metadata.name,ALLOCATABLE:.status.allocatable"),)),
        ))
    return out


def _renamed(ctx: PendingContext, r: str, q: str, renamed: list[str]) -> Finding:
    """The nodes offer the GPUs under another name: time-slicing or MPS with
    ``renameByDefault: true`` advertises ``nvidia.com/gpu`` as ``nvidia.com/gpu.shared``
    (k8s-device-plugin README, "With CUDA Time-Slicing"). No node will ever offer ``r``."""
    holders = [name_of(n) for n in ctx.nodes if renamed[0] in _advertised(n, renamed[:1])]
    evidence = [f"requested {r}: {q}",
                *(f"node {n} advertises {renamed[0]}, not {r}" for n in holders[:5])]
    if len(holders) > 5:
        evidence.append(f"... and {len(holders) - 5} more nodes")
    return Finding(
        "UNKNOWN_GPU_RESOURCE",
        f"No node offers {r}: the GPU nodes advertise them as {renamed[0]}.",
        (ctx.target_ref, *(ObjectRef("Node", n) for n in holders[:5])), tuple(evidence),
        Fix(f"Ask for {renamed[0]}: {q} instead of {r}, the name the nodes give their shared "
            "GPUs (or set renameByDefault: false in the device plugin's sharing config, so that "
            f"the shared GPUs keep the name {r}; pods asking {renamed[0]} then need changing).",
            patch=ctx.swap_resource(r, renamed[0], _quantity(q))))





def _explained_by_nodes(ctx: PendingContext, resource: str) -> bool:
    """No node offers ``resource`` because of a node's own state, not a typo: GPU nodes
    that advertise no nvidia.com/gpu (the chain says why), or MIG nodes whose config is not
    applied yet (failed, pending)."""
    if resource == GPU_RESOURCE:
        return bool(ctx.gpu_like)
    if resource in VOLCANO_GPU_RESOURCES:  # its plugin runs, or GPU nodes wait for one
        return bool(ctx.gpu_like or ctx.plugin_nodes)
    if MIG_RESOURCE_RE.match(resource):
        return any(labels(n).get(MIG_CONFIG_STATE_LABEL) in MIG_NOT_APPLIED
                   for n in ctx.nodes)
    return False


def check_gpu_not_requested(ctx: PendingContext) -> list[Finding]:
    """GPU_NOT_REQUESTED: a CUDA workload (image or log line) that asks for no GPU.
    A pod with DRA claims asks for its devices through them: never this."""
    if requested_gpu_resources(ctx.pod) or uses_claims(ctx.pod):
        return []
    proof: list[str] = []
    for c in containers(ctx.pod):
        img = str(c.get("image", ""))
        if CUDA_IMAGE_RE.search(img):
            proof.append(f"container {c.get('name')} image {img}")
    if ctx.pod_exists:
        text = ctx.reader.logs(ctx.namespace, ctx.pod_name) or ""
        for line in text.splitlines():
            if NO_CUDA_DEVICE_RE.search(line):
                proof.append(f"log: {line.strip()}")
                break
    if not proof:
        return []
    cname = next((c.get("name", "main") for c in ctx.pod.get("spec", {}).get("containers") or []),
                 "main")
    return [Finding(
        "GPU_NOT_REQUESTED",
        "The workload looks like it needs a GPU but requests none, so it lands on any node "
        "and sees no GPU.",
        (ctx.target_ref,), tuple(proof),
        Fix(f"Ask for a GPU in container {cname}.",
            patch=_resources(ctx, str(cname), "nvidia.com/gpu", "1")),
    )]


def check_runtime_class(ctx: PendingContext) -> list[Finding]:
    """RUNTIMECLASS_MISSING: the pod names a RuntimeClass that does not exist."""
    name = ctx.pod.get("spec", {}).get("runtimeClassName")
    proof = [m for m in _failed_create(ctx) if RUNTIMECLASS_RE.search(m)]
    if not name and proof:
        m = RUNTIMECLASS_RE.search(proof[0])
        name = m.group(1) if m else None
    if not name:
        return []
    existing = ctx.reader.list("RuntimeClass")
    if any(name_of(rc) == name for rc in existing):
        return []
    if not ctx.reader.readable("RuntimeClass") and not proof:
        return []  # the reader lists it as not checked
    return [Finding(
        "RUNTIMECLASS_MISSING",
        f"The pod names RuntimeClass {name!r}, which does not exist, so it is never created.",
        (ctx.target_ref, ObjectRef("RuntimeClass", name)),
        (f"spec.runtimeClassName: {name}",
         "RuntimeClasses: " + (", ".join(name_of(rc) for rc in existing) or "none"),
         *proof[:1]),
        Fix("Create it (the patch is the whole object; the GPU operator creates it with its "
            "toolkit enabled).", patch=Patch("RuntimeClass", name, "", {
                "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                "metadata": {"name": name}, "handler": "nvidia"}),
            docs=("https://kubernetes.io/docs/concepts/containers/runtime-class/",)),
    )]


CHECKS = (check_gpu_quantities, check_unknown_resource, check_gpu_not_requested,
          check_runtime_class)


@pending_check("spec", label="pod spec: GPU requests/limits, resource names, RuntimeClass")
def check(ctx: PendingContext, before: Sequence[Finding] = ()) -> list[Finding]:
    out: list[Finding] = []
    for c in CHECKS:
        out.extend(c(ctx))
    return out
