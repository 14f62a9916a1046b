"""GPU pods that were placed on a node but do not run as they should.

The kubelet refused them at admission (``handlers/kube/admission.py``: the Topology
Manager's ``TopologyAffinityError``, ``UnexpectedAdmissionError`` with "Allocate failed due to
...", ``SMTAlignmentError``, ``OutOf<resource>``; from the pod's status or the kubelet's
event), they are stuck in ContainerCreating / Init with Warning events (sandbox,
container-hook, StartError, ContainerCannotRun, RunContainerError), or they started and
failed because of the GPU stack (CUDA/NVML errors in their log or termination message).
Each is diagnosed like a pending pod: its own evidence first (events, status, logs: hard
errors count at once, no age threshold), then its node's discovery chain. Of a refused pod's
node chain only what can explain a refusal is kept (the causes of DEVICE_ADMISSION_FAILED in
the card graph): the refusal itself shows the kubelet's device manager at work, so a claim
that the node has no plugin (from a snapshot that holds no DaemonSets) is no cause of it.
"""

from __future__ import annotations

from functools import cache

from handlers import topology
from handlers.cards import catalogue
from handlers.chain import check_chain
from handlers.chain.fixtext import Where, restart_plugin
from handlers.chain.inventory import admission_failed
from handlers.chain.pods import CRASHLOOP, CREATE_ERROR, CREATING, IMAGE_PULL, pod_state
from handlers.chain.words import say
from handlers.gpu import is_device_plugin_pod, requests_gpu
from handlers.kube.admission import CPU, DEVICE, MEMORY, Refusal, refusal
from handlers.kube.commands import kubectl
from handlers.kube.commands import line as shell_line
from handlers.logpatterns import classify_log
from handlers.model import Finding, Fix, ObjectRef
from handlers.pending import hooks
from handlers.pending.context import PendingContext

_TROUBLE = (CRASHLOOP, CREATE_ERROR, IMAGE_PULL)
_MAX_EVIDENCE = 4
_OWN = frozenset({"workload-evidence"})
_NO_GPU_SYMPTOMS = frozenset({"CUDA_DRIVER_MISMATCH", "NVML_INIT_FAILED"})
# What chain/cuda_context makes of a pod's insufficient-driver line, versions read.
_CUDA_READINGS = frozenset({"CUDA_DRIVER_MISMATCH", "CONTAINER_RUNTIME_NOT_CONFIGURED",
                            "NVML_INIT_FAILED"})
REFUSED = "DEVICE_ADMISSION_FAILED"
TOPOLOGY_CODE = "MULTI_GPU_TOPOLOGY"
_MANAGER = {CPU: "CPU manager", MEMORY: "memory manager"}


@cache
def _refusal_causes() -> frozenset[str]:
    """Every code the card graph allows as a cause of a kubelet refusal, however deep."""
    graph = catalogue().causes_of
    seen: set[str] = set()
    todo = [REFUSED]
    while todo:
        for c in graph.get(todo.pop(), ()):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return frozenset(seen)


def trouble(ctx: PendingContext) -> str | None:
    """Why a pod that is not Pending does not run as it should, or None when it does (it
    runs, or it succeeded)."""
    pod = ctx.pod
    st = pod.get("status") or {}
    phase = st.get("phase")
    if phase == "Succeeded":
        return None
    if admission_failed(pod):
        return f"kubelet rejected it: {st.get('reason')}: {st.get('message', '')}".strip()
    state = pod_state(pod, ctx.reader.now())
    issues = [i for i in state.issues if i.kind in _TROUBLE]
    if issues:
        return issues[0].describe()
    if phase == "Failed":
        return f"status.phase Failed: {st.get('reason') or ''} {st.get('message') or ''}".strip()
    return None


def check(ctx: PendingContext) -> list[Finding]:
    """Scheduled, not running as it should: admission, events, own logs, the node's chain."""
    pod = ctx.pod
    node_name = str((pod.get("spec") or {}).get("nodeName") or "")
    ref = ObjectRef("Pod", ctx.pod_name, ctx.namespace)
    node_ref = ObjectRef("Node", node_name)
    out: list[Finding] = []
    nested: list[tuple[str, str]] = []
    refused = refusal(pod, ctx.events) if node_name else None
    if refused is not None:
        nested = [(c, line) for c, line in classify_log(refused.message) if c != REFUSED]
        out += _refusal_findings(ctx, refused, ref, node_ref, node_name)
    found = list(nested)
    for e in ctx.events:
        found += [(c, f"event {e.get('reason')}: {line}")
                  for c, line in classify_log(str(e.get("message", "")))]
    own = _own_log_lines(ctx)
    if not requests_gpu(pod):
        # A container that asked no GPU gets no driver: its CUDA/NVML errors prove
        # GPU_NOT_REQUESTED (spec.check_gpu_not_requested), not a driver or runtime fault.
        own = [(c, line) for c, line in own if c not in _NO_GPU_SYMPTOMS]
    found += own
    if node_name:  # a hook that ran on a node without GPUs: the runtime, not the driver
        found, misplaced = hooks.misplaced(ctx, ctx.reader.get("Node", node_name), found)
        out += misplaced
    by_code: dict[str, list[str]] = {}
    for code, line in found:
        if code == REFUSED and refused is not None:
            continue
        by_code.setdefault(code, [])
        if line not in by_code[code]:
            by_code[code].append(line)
    # Fix texts name the node's GPU components (its device plugin), not this pod; a patch
    # to the pod's spec goes to what makes it.
    where = _plugin_where(ctx, node_name)
    for code, lines in by_code.items():
        # The chain's words for the cause, about this pod and its node.
        said = say(code, where)
        out.append(Finding(
            code, f"The pod's own events, status or log show it: {said.summary}",
            (ref, node_ref) if node_name else (ref,), tuple(lines[:_MAX_EVIDENCE]),
            said.fix or Fix("The node's discovery chain says more.",
                            (shell_line("gpubot", "doctor", node_name),)) if node_name else
            said.fix or Fix(commands=(kubectl("describe", "pod", ctx.pod_name,
                                              namespace=ctx.namespace),)),
            conditions=_OWN))
    # A pod that asked no GPU is not served by the node's GPU chain: its problem is its own.
    node = ctx.reader.get("Node", node_name) if node_name and requests_gpu(pod) else None
    if node is not None:
        chain = check_chain(ctx.reader, [node])
        # The chain reads this pod's "driver insufficient" lines against the node's driver
        # and runtime (chain/cuda_context): its reading replaces the bare line's.
        if any(f.code in _CUDA_READINGS and ref in f.objects for f in chain.findings):
            out = [f for f in out if f.code != "CUDA_DRIVER_MISMATCH"]
        # The pod's own evidence already stands for a code the chain repeats node-wide.
        seen = {f.code for f in out}
        causes = _refusal_causes() if refused is not None else None
        out += [f for f in chain.findings if f.severity.is_problem and f.code not in seen
                and (causes is None or f.code in causes)]
    return out


def _refusal_findings(ctx: PendingContext, refused: Refusal, ref: ObjectRef,
                      node_ref: ObjectRef, node_name: str) -> list[Finding]:
    """DEVICE_ADMISSION_FAILED in the words of the part of the kubelet that refused, and
    MULTI_GPU_TOPOLOGY when the Topology Manager needed the pod's GPUs on one NUMA node."""
    node = ctx.reader.get("Node", node_name)
    if refused.topology and node is not None:
        told = topology.explain(ctx.reader, ctx.pod, node, refused)
        ctx.reader.unchecked.extend(u for u in told.not_checked
                                    if u not in ctx.reader.unchecked)
        out = [Finding(REFUSED, told.summary, (ref, node_ref), tuple(told.evidence), told.fix,
                       conditions=_OWN)]
        if told.gpus_must_align:
            out.append(Finding(TOPOLOGY_CODE, told.gpu_summary, (ref, node_ref),
                               tuple(told.gpu_evidence), told.gpu_fix,
                               conditions=frozenset({"numa-refused"})))
        return out
    if refused.part in _MANAGER:
        manager = _MANAGER[refused.part]
        return [Finding(
            REFUSED, f"The kubelet's {manager} on {node_name} refused the pod.", (ref, node_ref),
            (refused.evidence(),),
            Fix(f"The {manager} cannot give the pod what its Guaranteed containers ask on "
                f"{node_name}: ask for less (whole CPUs: a multiple of the CPUs per core), or "
                "run it on a node with more free. The kubelet's configz shows its policies.",
                (kubectl("get", "--raw", f"/api/v1/nodes/{node_name}/proxy/configz"),)),
            conditions=_OWN)]
    actions = (("restart-device-plugin", node_name),) if refused.part == DEVICE else ()
    return [Finding(
        REFUSED, f"Kubelet on {node_name} rejected the pod's GPU allocation.", (ref, node_ref),
        (refused.evidence(),),
        Fix("Delete the pod so that its controller recreates it; if it repeats, restart the "
            f"device plugin on {node_name}.",
            (kubectl("delete", "pod", ctx.pod_name, namespace=ctx.namespace),
             *restart_plugin(_plugin_where(ctx, node_name)))), actions, conditions=_OWN)]


def _plugin_where(ctx: PendingContext, node: str | None) -> Where:
    """The node and the device-plugin pod on it (by name and by its stable labels), with
    the target's spec owner."""
    plugin = next((p for p in ctx.reader.pods_on([node]).get(node, ())
                   if is_device_plugin_pod(p)), None) if node else None
    if plugin is None:
        return Where(node or "", pod="", owner=ctx.spec_owner)
    meta = plugin.get("metadata") or {}
    lab = meta.get("labels") or {}
    keys = [k for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app", "name")
            if lab.get(k)][:2]
    return Where(str(node), str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                 plugin_selector=",".join(f"{k}={lab[k]}" for k in keys),
                 plugin_namespace=str(meta.get("namespace") or ""), owner=ctx.spec_owner)


def _own_log_lines(ctx: PendingContext) -> list[tuple[str, str]]:
    """Known error lines in the pod's termination messages and logs."""
    out: list[tuple[str, str]] = []
    st = ctx.pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in st.get(key) or []:
            for state in (cs.get("state") or {}, cs.get("lastState") or {}):
                msg = str((state.get("terminated") or {}).get("message") or "")
                out += [(c, f"container {cs.get('name')} termination message: {line}")
                        for c, line in classify_log(msg)]
    if any(((cs.get("state") or {}).get("waiting") or {}).get("reason") == CREATING
           for cs in st.get("containerStatuses") or []):
        return out  # never started: no log to read
    text = ctx.reader.logs(ctx.namespace, ctx.pod_name)
    out += [(c, f"log: {line}") for c, line in classify_log(text)]
    return out
