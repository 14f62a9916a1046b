"""Kubelet registration: the node advertises its GPUs (capacity ``nvidia.com/gpu``, or DRA
devices in ResourceSlices), all of them.

A node that advertises none: GPU_NOT_ADVERTISED, naming the causes the earlier stages
found; with a Ready plugin and no cause, the plugin's own log, else the kubelet never
registered it. A Ready plugin that says it found no devices never asked the kubelet to
register anything: that is the node's missing GPUs in the plugin's own words (it looks only
when it starts, so a restart once the GPUs are up brings them back:
NVIDIA/k8s-device-plugin#414), not a registration failure. A node that advertises fewer GPUs
than it has (the GPU ledger's count from its labels, ``handlers/ledger.py``): a GPU the plugin
could not enumerate, unless the node's health agent reports it gone (GPU_MISSING).
"""

from __future__ import annotations

from handlers.chain.facts import NodeFacts, sourced
from handlers.chain.fixtext import Where, restart_pod
from handlers.chain.outcome import Draft, Outcome
from handlers.chain.pods import PodState
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.gpu import GPU_RESOURCE, dra_component, gpu_meant_by
from handlers.knowledge.logs import active
from handlers.kube.commands import drain, kubectl, node_shell
from handlers.ledger import physical_said
from handlers.logpatterns import last_lines
from handlers.model import Fix
from handlers.words import counted

CODE = "GPU_NOT_ADVERTISED"
REGISTRATION = "KUBELET_REGISTRATION_FAILED"
# knowledge/logs.yaml: the plugin found no GPU at start and waits.
NO_DEVICES = "plugin-no-devices"


@stage("registration", after=("waiting", "health-agents"), check="kubelet registration")
def registration(n: NodeFacts, before: Before) -> Outcome:
    cap = n.cap.get(GPU_RESOURCE)
    if n.advertised:
        # A GPU the node's health agent reports gone is its GPU_MISSING, with a cordon.
        return Outcome(() if before.has("GPU_MISSING") else _partial(n, cap), passed=True)
    out: list[Draft] = []
    causes = [c for c in before.problems() if c != CODE]
    causes += [i.code for st in n.plugins
               for i in n.ctx.ds_issues.get(n.plugin_ds_key(st), [])]
    ready = next((s for s in n.plugins if s.ready), None)
    container = (n.plugin_container(ready) or "") if ready else ""
    text = n.ctx.reader.logs(ready.namespace, ready.name, container or None) if ready else None
    idle = _found_nothing(text)
    if not causes and ready is not None:
        st = ready
        out, causes = n.log_drafts(st, sourced(text, "log"))
        if not causes and not idle:
            if dra_component(st.pod) == "kubelet-plugin":
                ev = [f"pod {st.label} (DRA kubelet plugin) is Running and Ready",
                      f"ResourceSlices with GPU devices for node {n.name}: none",
                      *[f"pod {st.label} log: {ln}" for ln in last_lines(text, 3)]]
                actions: list[tuple[str, str]] = []
            else:
                ready_since = next((c.get("lastTransitionTime") for c in
                                    (st.pod.get("status") or {}).get("conditions") or []
                                    if c.get("type") == "Ready"), None)
                ev = [f"pod {st.label} is Running and Ready"
                      + (f" since {ready_since}" if ready_since else ""),
                      f"node {n.name} capacity nvidia.com/gpu: "
                      + ("absent" if cap is None else f"{cap:g}")]
                ev += [f"pod {st.label} log: {ln}" for ln in last_lines(text, 3)]
                actions = [("restart-device-plugin", n.name)]
            out.append(n.draft(REGISTRATION, ev, st=st, actions=actions,
                               where=n.where_for(st, container)))
            causes = [REGISTRATION]
    ev = [f"node {n.name} capacity nvidia.com/gpu: "
          + ("absent" if cap is None else f"{cap:g}"), *gpu_meant_by(n.node)]
    if causes:
        ev.append("cause: " + ", ".join(dict.fromkeys(causes)))
    if ready is not None:
        ev += [f"pod {ready.label} log: {ln}" for ln in idle]
    ev += before.stuck
    if n.plugin_only:
        ev.append("the node carries no GPU labels: if it has no GPU, keep the "
                  "device-plugin DaemonSet off it with a nodeSelector")
    if ready is not None and idle and not causes:
        out.append(_found_no_devices(n, ready, container, ev))
    else:
        out.append(n.draft(CODE, ev))
    return Outcome(tuple(out))


def _found_nothing(text: str | None) -> list[str]:
    """The plugin's own "found no devices, waiting" lines (knowledge/logs.yaml)."""
    entry = next((e for e in active().entries if e.id == NO_DEVICES), None)
    if entry is None or not text or not entry.pattern.search(text):
        return []
    return [ln.rstrip() for ln in text.splitlines() if entry.pattern.search(ln)][-1:]


def _found_no_devices(n: NodeFacts, st: PodState, container: str, ev: list[str]) -> Draft:
    """A Ready plugin that found no GPU when it started: it registered nothing and waits."""
    w = n.where_for(st, container)
    return Draft(
        CODE,
        f"The device plugin on {n.name} found no GPU when it started and waits without "
        f"registering any: {n.name} advertises none.",
        Fix("Restart the plugin: it looks for GPUs only when it starts (after a reboot or a "
            "driver upgrade it can start before the GPUs are up). Still none: see whether "
            "the driver lists any; none listed means the driver is the fault, to fix first.",
            (*restart_pod(w), node_shell(n.name, "nvidia-smi -L"))),
        (n.ref, st.ref), (*ev, *_restarts(st)))


def _restarts(st: PodState) -> list[str]:
    """When the plugin's containers last stopped (a node reboot shows as one)."""
    out = []
    for c in (st.pod.get("status") or {}).get("containerStatuses") or []:
        term = (c.get("lastState") or {}).get("terminated") or {}
        if c.get("restartCount") and term:
            out.append(f"pod {st.label}: container {c.get('name')} restarted "
                       f"{c.get('restartCount')}x, last stopped {term.get('finishedAt')} "
                       f"({term.get('reason') or 'Terminated'}, exit code "
                       f"{term.get('exitCode', '?')})")
    return out


def _partial(n: NodeFacts, cap: float | None) -> tuple[Draft, ...]:
    """Fewer GPUs advertised than the node has: one the plugin could not enumerate."""
    said = physical_said(n.node)
    mig_on = (n.lab.get("nvidia.com/mig.strategy") in ("single", "mixed")
              and n.lab.get("nvidia.com/mig.config", "all-disabled") != "all-disabled")
    shared = (n.lab.get("nvidia.com/gpu.replicas", "1") not in ("1", "") or mig_on
              or any(k.endswith(".shared") or "/mig-" in k for k in n.cap))
    if said is None or cap is None or shared or cap >= said.gpus:
        return ()
    return (Draft(
        CODE, f"{n.name} advertises {cap:g} of its {counted(said.gpus, 'GPU')}.",
        Fix("A GPU listed by lspci but missing from nvidia-smi (Xid 79, fallen off the bus) "
            "needs a node reboot or a hardware replacement: drain the node first.",
            (node_shell(n.name, "nvidia-smi -L; lspci -nn | grep -i 10de; dmesg | grep -i xid"),
             drain(n.name))),
        (n.ref,),
        (f"node {n.name} capacity nvidia.com/gpu: {cap:g} < {said.evidence}",
         "the device plugin enumerates fewer GPUs than the node has (a GPU fell off "
         "the bus or failed to initialise)"),
        conditions=frozenset({"partial"})),)


@words(CODE)
def _not_advertised(w: Where) -> Words:
    return Words(
        f"{w.node} does not advertise its GPUs (nvidia.com/gpu).",
        Fix("Fix the cause in the chain (the other findings on this node), then check what "
            "the node advertises.",
            (kubectl("get", "node", w.node, "-o",
                     "jsonpath={.status.capacity.nvidia\\.com/gpu}"),)))


@words(REGISTRATION)
def _not_registered(w: Where) -> Words:
    return Words(
        f"The device plugin on {w.node} runs, but the kubelet has not registered it.",
        Fix("Restart the plugin: it registers again when it starts. kubelet.sock must exist "
            "in the kubelet's device-plugin directory, and the kubelet's log says why it "
            "refused. A kubelet with a non-default --root-dir (k0s, microk8s) needs that "
            "directory mounted at /var/lib/kubelet/device-plugins in the plugin pod.",
            (*restart_pod(w),
             node_shell(w.node, "ls -l /var/lib/kubelet/device-plugins/; "
                                "journalctl -u kubelet | grep -i 'device plugin' | tail -20"))))
