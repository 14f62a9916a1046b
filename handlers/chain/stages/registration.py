"""Kubelet registration: the node advertises its GPUs (capacity ``nvidia.com/gpu``, or DRA
devices in ResourceSlices), all of them.

A node that advertises none: GPU_NOT_ADVERTISED, naming the causes the earlier stages
found; with a Ready plugin and no cause, the plugin's own log, else the kubelet never
registered it. A node that advertises fewer GPUs than it has (the GPU ledger's count from its
labels, ``handlers/ledger.py``): a GPU the plugin could not enumerate, unless the node's
health agent reports it gone (GPU_MISSING).
"""

from __future__ import annotations

from handlers.chain.facts import NodeFacts, sourced
from handlers.chain.fixtext import Where
from handlers.chain.outcome import Draft, Outcome
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.gpu import GPU_RESOURCE, dra_component, gpu_meant_by
from handlers.ledger import physical_said
from handlers.logpatterns import last_lines

CODE = "GPU_NOT_ADVERTISED"
REGISTRATION = "KUBELET_REGISTRATION_FAILED"


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
    if not causes and n.plugin_ok:
        st = next(s for s in n.plugins if s.ready)
        container = n.plugin_container(st) or ""
        text = n.ctx.reader.logs(st.namespace, st.name, container or None)
        out, causes = n.log_drafts(st, sourced(text, "log"))
        if not causes:
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
    ev += before.stuck
    if n.plugin_only:
        ev.append("the node carries no GPU labels: if it has no GPU, keep the "
                  "device-plugin DaemonSet off it with a nodeSelector")
    out.append(n.draft(CODE, ev))
    return Outcome(tuple(out))


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
        CODE, f"{n.name} advertises {cap:g} of its {said.gpus} GPUs.",
        f"kubectl debug node/{n.name} -it --image=ubuntu -- chroot /host sh -c "
        "'nvidia-smi -L; lspci -nn | grep -i 10de; dmesg | grep -i xid'\n"
        "A GPU listed by lspci but missing from nvidia-smi (Xid 79, fallen off the bus) "
        "needs a node reboot or a hardware replacement: kubectl drain "
        f"{n.name} --ignore-daemonsets --delete-emptydir-data",
        (n.ref,),
        (f"node {n.name} capacity nvidia.com/gpu: {cap:g} < {said.evidence}",
         "the device plugin enumerates fewer GPUs than the node has (a GPU fell off "
         "the bus or failed to initialise)"),
        conditions=frozenset({"partial"})),)


@words(CODE)
def _not_advertised(w: Where) -> Words:
    return Words(
        f"{w.node} does not advertise its GPUs (nvidia.com/gpu).",
        "Fix the cause in the chain (the other findings on this node), then check: "
        f"kubectl get node {w.node} -o jsonpath='{{.status.capacity.nvidia\\.com/gpu}}'")


@words(REGISTRATION)
def _not_registered(w: Where) -> Words:
    return Words(
        f"The device plugin on {w.node} runs, but the kubelet has not registered it.",
        f"kubectl -n {w.namespace} delete pod {w.pod}   # the plugin registers again when it "
        f"starts\nOn {w.node}: ls -l /var/lib/kubelet/device-plugins/   # kubelet.sock must "
        "exist\njournalctl -u kubelet | grep -i 'device plugin'\n"
        "A kubelet with a non-default --root-dir (k0s, microk8s) needs that directory "
        "mounted at /var/lib/kubelet/device-plugins in the plugin pod.")
