"""GPU workloads on the node: their own CUDA/NVML errors (termination messages, logs) prove
what the driver or runtime gives containers, when the plugin itself runs fine.

"CUDA driver version is insufficient" is read against the node's driver and runtime
(``handlers/chain/cuda_context.py``): too old a driver, or no driver injected at all.
"""

from __future__ import annotations

from handlers.chain import cuda_context
from handlers.chain.facts import UPSTREAM, NodeFacts, sourced
from handlers.chain.fixtext import (
    CUDA_COMPAT,
    Where,
    managed,
    policy_name,
    policy_patch,
    restart_pod,
    unknown,
    why,
)
from handlers.chain.outcome import Draft, Outcome
from handlers.chain.pods import pod_state
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.kube.commands import node_shell
from handlers.model import Fix, Patch

_MAX_WORKLOAD_LOGS = 2
_PROVEN = ("CUDA_DRIVER_MISMATCH", "NVML_INIT_FAILED")


@stage("workloads", after=("health",), check="GPU workload errors (CUDA/NVML)")
def workloads(n: NodeFacts, before: Before) -> Outcome:
    out: list[Draft] = []
    read = 0
    reread = False
    for pod in n.ctx.inv.failing_gpu_workloads.get(n.name, [])[:20]:
        st = pod_state(pod, n.ctx.now)
        found = [x for m in st.messages() for x in sourced(m, "status message")]
        if not found and read < _MAX_WORKLOAD_LOGS and st.log_containers():
            read += 1
            found, _ = n.logs(st)
        found = [(c, ln) for c, ln in found if c in UPSTREAM]
        kept, readings = cuda_context.apply(n, st, found)
        out += readings
        # A CUDA error re-read as the runtime is still a failing workload.
        reread = reread or len(kept) < len(found)
        out += n.log_drafts(st, kept)[0]
    return Outcome(tuple(out), passed=not reread and not before.has(*_PROVEN)
                   and all(d.code not in _PROVEN for d in out))


@words("CUDA_DRIVER_MISMATCH")
def _cuda(w: Where) -> Words:
    return Words(f"A container needs a newer CUDA than the driver on {w.node} supports"
                 + (f" (driver {w.driver}, CUDA {w.cuda})." if w.driver else "."),
                 _cuda_fix(w))


@words("NVML_INIT_FAILED")
def _nvml(w: Where) -> Words:
    return Words(
        f"NVML cannot be initialised in GPU containers on {w.node}.",
        Fix("Run the container with the NVIDIA runtime (runtimeClassName: nvidia, or nvidia "
            "as the default runtime) so that libnvidia-ml.so.1 is injected, and check the "
            "host driver. 'Failed to initialize NVML: Unknown Error' after `systemctl "
            "daemon-reload`: restart the pod and switch the toolkit to CDI or "
            "SystemdCgroup = true.",
            (node_shell(w.node, "nvidia-smi"), *restart_pod(w)),
            docs=("https://github.com/NVIDIA/nvidia-container-toolkit/issues/251",)))


def _cuda_fix(w: Where) -> Fix:
    """Options that work here: the image, a node with a newer driver that exists, the
    driver upgrade through whoever manages the driver."""
    now = f" {w.driver}" if w.driver else ""
    out = [f"Use an image built for CUDA <= {w.cuda} (the newest the node's driver{now} "
           "supports)." if w.cuda else "Use an image built for the CUDA the node's driver "
           "supports."]
    newer = w.setup.newer if w.setup else None
    patch = None
    if newer is not None:
        if w.owner is not None and not w.daemonset:  # a workload's, not the plugin's
            patch = Patch(w.owner.kind, w.owner.name, f"{w.owner.path}.nodeSelector",
                          {"nvidia.com/cuda.driver.major": newer.major}, w.owner.namespace)
        out.append(f"Or keep the pod on nodes with a newer driver, as {newer.node} has "
                   f"({newer.driver}" + (f", CUDA {newer.cuda}" if newer.cuda else "")
                   + ("): the patch." if patch else
                      f"): nodeSelector nvidia.com/cuda.driver.major={newer.major}."))
    target = newer.driver if newer is not None else ""
    to = f" to {target}" if target else " to a branch that supports the image's CUDA"
    commands: tuple[str, ...] = ()
    if unknown(w, "driver"):
        out.append(f"Or upgrade the driver on {w.node}{to} ({why(w, 'driver')}): through the "
                   f"ClusterPolicy {policy_name(w, 'driver')} if the GPU operator installs "
                   "it, on the host if it is installed there.")
        commands = (policy_patch(w, "driver", target),) if target else ()
    elif managed(w, "driver"):
        out.append(f"Or upgrade the driver{to} through the GPU operator, ClusterPolicy "
                   f"{policy_name(w, 'driver')}.")
        commands = (policy_patch(w, "driver", target),) if target else ()
    else:
        out.append(f"Or upgrade the host driver on {w.node}{to} ({why(w, 'driver')}).")
    return Fix(" ".join(out), commands, patch, (CUDA_COMPAT,))
