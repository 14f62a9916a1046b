"""Driver: the operator's driver pods on the node load the NVIDIA kernel driver.

A driver pod that cannot pull its image is OPERATOR_IMAGE_PULL; one that fails is
DRIVER_NOT_READY with its log's known lines (or its tail), and any other cause those lines
prove. A host-installed driver has no pod here: the later stages' own lines speak for it.

A driver pod that stands down for a driver already on the host is idle by design, not
failing: k8s-driver-manager says so in its log and (from v0.4.1) labels the node
``nvidia.com/gpu.deploy.driver=pre-installed``, after which the DaemonSet no longer wants a
pod there (NVIDIA/gpu-operator#381). Whether the host driver works is for the validator and
the plugin to show: their own lines and waits still say DRIVER_NOT_READY when it does not
(NVIDIA/gpu-operator#398).

GPUs that vfio-pci holds for VM passthrough have no NVIDIA driver, by the node's
configuration (the GPU operator's ``nvidia.com/gpu.workload.config=vm-passthrough``, or the
kernel's "already bound to vfio-pci" in a driver log). A node that only serves VMs needs no
driver: nothing is said. One where a container GPU component needs the driver (a device
plugin that is not the VM one, the operator's driver or toolkit) gets DRIVER_NOT_READY with
the passthrough as its evidence and a fix that chooses between VMs and containers.
"""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.fixcontext import DEPLOY_DRIVER_LABEL
from handlers.chain.fixtext import Where, logs_cmd, managed, why
from handlers.chain.hook_context import vm_plugin
from handlers.chain.outcome import Draft, Outcome
from handlers.chain.pods import IMAGE_PULL, PodState
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.gpu import GPU_RESOURCE, name_of
from handlers.knowledge.logs import active
from handlers.kube.commands import kubectl, node_shell, pods_on_node
from handlers.model import Fix

CODE = "DRIVER_NOT_READY"
# knowledge/logs.yaml entries read here beyond the codes their lines prove.
STANDS_DOWN = "driver-manager-host-driver"
BOUND_TO_VFIO = "nvrm-gpu-bound-vfio"
# The GPU operator's per-node workload configuration (container, vm-passthrough, vm-vgpu):
# https://github.com/NVIDIA/gpu-operator/blob/main/controllers/state_manager.go
WORKLOAD_LABEL = "nvidia.com/gpu.workload.config"
VM_PASSTHROUGH = "vm-passthrough"


@stage("driver", after=("hardware",), check="driver")
def driver(n: NodeFacts, before: Before) -> Outcome:
    out: list[Draft] = []
    vm = passthrough(n)
    for st in n.comp.get("driver", []):
        if not st.failing or stands_down(n, st):
            continue
        if st.kind == IMAGE_PULL:
            out.append(n.image_pull(st, "OPERATOR_IMAGE_PULL"))
            continue
        found, tail = n.logs(st)
        ev = st.state_evidence() + n.log_evidence(st, found, CODE)
        if not any(c == CODE for c, _ in found):
            ev += tail
        vfio = [ln for c, ln in found if n.entry_matches(ln, BOUND_TO_VFIO)]
        out.append(_passthrough(n, [*vm, *ev], st) if vm or vfio else n.draft(CODE, ev, st=st))
        out += n.log_drafts(st, found, skip=(CODE,))[0]
    if vm and not any(d.code == CODE for d in out):
        needing = _needing_driver(n)
        if needing:
            out.append(_passthrough(n, [*vm, *needing], None))
    return Outcome(tuple(out), passed=not any(
        d.code in (CODE, "OPERATOR_IMAGE_PULL") for d in out))


def stands_down(n: NodeFacts, st: PodState) -> bool:
    """The driver pod steps aside for a driver on the host: the node is labelled
    pre-installed (the DaemonSet no longer selects it), or the driver manager says so."""
    if n.lab.get(DEPLOY_DRIVER_LABEL) == "pre-installed":
        return True
    entry = next((e for e in active().entries if e.id == STANDS_DOWN), None)
    if entry is None:
        return False
    return any(entry.pattern.search(n.ctx.reader.logs(st.namespace, st.name, c) or "")
               for c in st.log_containers())


def passthrough(n: NodeFacts) -> list[str]:
    """Why the node's GPUs are vfio-pci's (VM passthrough), as evidence; [] when not."""
    v = n.lab.get(WORKLOAD_LABEL)
    if v is not None and v != VM_PASSTHROUGH:
        return []
    if v is None:
        policy = next((p for p in n.ctx.inv.cluster_policies
                       if ((p.get("spec") or {}).get("sandboxWorkloads") or {}).get("enabled")
                       is True), None)
        sandbox = ((policy or {}).get("spec") or {}).get("sandboxWorkloads") or {}
        if sandbox.get("defaultWorkload") != VM_PASSTHROUGH:
            return []
        ev = [f"clusterpolicy {name_of(policy or {})}: sandboxWorkloads.defaultWorkload="
              f"{VM_PASSTHROUGH} and node {n.name} has no {WORKLOAD_LABEL} label"]
    else:
        ev = [f"node {n.name}: {WORKLOAD_LABEL}={v}: the GPU operator binds its GPUs to "
              "vfio-pci for VMs and loads no NVIDIA driver there"]
    vm_devices = [f"node {n.name} capacity {k}: {q:g} (GPUs handed to VMs)"
                  for k, q in sorted(n.cap.items())
                  if q > 0 and not k.startswith((GPU_RESOURCE, "nvidia.com/mig-"))]
    return ev + vm_devices


def _needing_driver(n: NodeFacts) -> list[str]:
    """Container GPU components failing on the node: they need the NVIDIA driver there."""
    out: list[str] = []
    for st in n.plugins:
        if vm_plugin(st.pod) is None and (st.failing or n.hard_errors(st)):
            out += [f"device plugin {ln.removeprefix('pod ')}" for ln in st.state_evidence()[:2]]
    for comp in ("driver", "toolkit"):
        for st in n.comp.get(comp, []):
            if st.failing:
                out += [f"{comp} {ln.removeprefix('pod ')}" for ln in st.state_evidence()[:2]]
    return out


def _passthrough(n: NodeFacts, evidence: list[str], st: PodState | None) -> Draft:
    """DRIVER_NOT_READY where vfio-pci holds the GPUs: VMs or containers, the node's
    owner chooses."""
    node = n.name
    objs = (n.ref,) + ((st.ref,) if st is not None else ())
    return Draft(
        CODE,
        f"No NVIDIA driver serves the GPUs of {node}: vfio-pci holds them for VM "
        "passthrough, and container GPU components there need the driver.",
        Fix(f"Decide what {node} is for. VMs: keep container GPU components off it (their "
            f"DaemonSets' node affinity: key {WORKLOAD_LABEL}, operator NotIn, values "
            f"[{VM_PASSTHROUGH}]). Containers: label it so; the GPU operator then unbinds "
            "vfio-pci and deploys the driver. Without the operator: remove vfio-pci.ids from "
            "the kernel command line (or driverctl unset-override the GPUs' PCI addresses), "
            "reboot, and load nvidia; the last command shows who holds the GPUs.",
            (kubectl("label", "node", node, f"{WORKLOAD_LABEL}=container", "--overwrite"),
             node_shell(node, 'lspci -nnk -d 10de:; lsmod | grep -E "nvidia|vfio"'))),
        objs, tuple(evidence))


@words(CODE)
def _not_ready(w: Where) -> Words:
    n, ns = w.node, w.namespace
    if managed(w, "driver"):
        how = Fix("GPU operator: a kernel update needs a driver image built for the new "
                  "kernel; deleting the node's driver pod rebuilds it.",
                  (kubectl("delete", "pod", "-l", "app=nvidia-driver-daemonset",
                           "--field-selector", pods_on_node(n), namespace=ns),))
    else:
        how = Fix(f"The driver is installed on the host ({why(w, 'driver')}): reinstall it for "
                  "the running kernel (modprobe nvidia) or reboot the node.")
    look = Fix("Its log and the node's kernel say why the driver did not load.", (
        *logs_cmd(w), node_shell(n, 'lsmod | grep nvidia; dmesg | grep -iE "nvrm|nvidia" | '
                                 'tail -20')))
    return Words(f"The NVIDIA driver is not loaded or not ready on {n}.", look.then(how))
