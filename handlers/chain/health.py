"""The chain after registration: advertised count, device health, kubelet admission, and
the GPU workloads' own CUDA/NVML errors on the node."""

from __future__ import annotations

from typing import TYPE_CHECKING

from handlers.chain import cuda_context
from handlers.chain.fixes import Where
from handlers.chain.hardware import hardware_faults, repair_fix
from handlers.chain.model import (
    CHECK_ADMISSION,
    CHECK_HEALTH,
    CHECK_WORKLOADS,
    UPSTREAM,
    sourced,
)
from handlers.chain.pods import pod_state
from handlers.codes import code_rank
from handlers.gpu import expected_gpu_count, name_of, ns_of
from handlers.logpatterns import classify_log
from handlers.model import ObjectRef

if TYPE_CHECKING:
    from handlers.chain.node import NodeRun

_MAX_LOG_EVIDENCE = 4
_MAX_WORKLOAD_LOGS = 2


def partial(run: NodeRun, cap: float | None) -> None:
    expected = expected_gpu_count(run.node)
    mig_on = (run.lab.get("nvidia.com/mig.strategy") in ("single", "mixed")
              and run.lab.get("nvidia.com/mig.config", "all-disabled") != "all-disabled")
    shared = (run.lab.get("nvidia.com/gpu.replicas", "1") not in ("1", "") or mig_on
              or any(k.endswith(".shared") or "/mig-" in k for k in run.cap))
    if expected and cap is not None and not shared and cap < expected:
        summary = f"{run.name} advertises {cap:g} of its {expected} GPUs."
        fix_text = (
            f"kubectl debug node/{run.name} -it --image=ubuntu -- chroot /host sh -c "
            "'nvidia-smi -L; lspci -nn | grep -i 10de; dmesg | grep -i xid'\n"
            "A GPU listed by lspci but missing from nvidia-smi (Xid 79, fallen off the bus) "
            "needs a node reboot or a hardware replacement: kubectl drain "
            f"{run.name} --ignore-daemonsets --delete-emptydir-data")
        run.f.add("GPU_NOT_ADVERTISED", summary, conditions=frozenset({"partial"}),
                  objects=[run.ref], evidence=[
            f"node {run.name} capacity nvidia.com/gpu: {cap:g} < "
            f"nvidia.com/gpu.count={expected}",
            "the device plugin enumerates fewer GPUs than the node has (a GPU fell off "
            "the bus or failed to initialise)"], fix=fix_text)


def health(run: NodeRun) -> None:
    low = [(r, c, run.alloc.get(r, 0.0)) for r, c in run.cap.items()
           if run.alloc.get(r, 0.0) < c]
    if not low:
        if run.advertised:
            run.passed.append(CHECK_HEALTH)
        return
    lines = [f"allocatable {r}: {a:g} < capacity {c:g}" for r, c, a in low]
    if not run.plugin_ok:
        # The kubelet marks a plugin's devices unhealthy when the plugin goes away: the
        # plugin's own problem is the cause.
        problems = sorted(run.f.problems(), key=code_rank)
        if problems:
            run.f.note(problems[0], *lines)
            return
    st = next((s for s in run.plugins if s.ready), run.plugins[0] if run.plugins else None)
    ev = list(lines)
    if st is not None:
        text = run.ctx.reader.logs(st.namespace, st.name, run.plugin_container(st))
        xid = [ln for c, ln in classify_log(text) if c == "GPU_UNHEALTHY"]
        ev += [f"pod {st.label} log: {ln}" for ln in xid[-_MAX_LOG_EVIDENCE:]]
    sev = frozenset({"all-unusable"} if all(a == 0 for _, _, a in low) else ())
    w = run._where(st, run.plugin_container(st) or "") if st else run.where
    faults = hardware_faults(ev)
    if faults:
        # Hardware: drain and repair; a plugin restart is not offered (handlers.chain.hardware).
        run.f.add("GPU_UNHEALTHY", f"GPUs on {run.name} failed in hardware "
                  f"({', '.join(faults)}); the device plugin marked them unhealthy.",
                  objects=[run.ref, *([st.ref] if st else [])], evidence=ev,
                  fix=repair_fix(run.name, faults), conditions=sev)
        return
    run.add("GPU_UNHEALTHY", ev, st=st, conditions=sev, where=w,
             actions=[("restart-device-plugin", run.name)])


def admission(run: NodeRun) -> None:
    pods = run.ctx.inv.admission_failed.get(run.name, [])
    if not pods:
        run.passed.append(CHECK_ADMISSION)
        return
    ev = []
    for p in pods[:5]:
        s = p.get("status") or {}
        ev.append(f"pod {ns_of(p)}/{name_of(p)}: {s.get('reason', '')}: "
                  f"{s.get('message', '')}".strip())
    if len(pods) > 5:
        ev.append(f"... and {len(pods) - 5} more pods")
    first = pods[0]
    w = Where(run.name, ns_of(first), name_of(first))
    run.add("DEVICE_ADMISSION_FAILED", ev, where=w,
             objects=[ObjectRef("Pod", name_of(p), ns_of(p)) for p in pods[:5]],
             actions=[("restart-device-plugin", run.name)])


def workloads(run: NodeRun) -> None:
    read = 0
    reread = False
    for pod in run.ctx.inv.failing_gpu_workloads.get(run.name, [])[:20]:
        st = pod_state(pod, run.ctx.now)
        found = [x for m in st.messages() for x in sourced(m, "status message")]
        if not found and read < _MAX_WORKLOAD_LOGS and st.log_containers():
            read += 1
            found, _ = run.logs(st)
        found = [(c, ln) for c, ln in found if c in UPSTREAM]
        kept = cuda_context.apply(run, st, found)
        # A CUDA error re-read as the runtime is still a failing workload.
        reread = reread or len(kept) < len(found)
        run.log_findings(st, kept)
    if not reread and not run.f.has("CUDA_DRIVER_MISMATCH", "NVML_INIT_FAILED"):
        run.passed.append(CHECK_WORKLOADS)

# -- run -------------------------------------------------------------------------------
