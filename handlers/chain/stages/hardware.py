"""Hardware: the node has an NVIDIA PCI device (NFD's ``pci-10de`` label) or advertises GPUs.

A node meant to have GPUs (instance type, GPU labels) on which NFD sees no NVIDIA device
has no GPU to drive: every later stage is moot, and the node's missing GPUs are this.
"""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.fixtext import Where
from handlers.chain.outcome import Outcome
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.gpu import gpu_meant_by, nfd_pci_nvidia, nfd_running
from handlers.kube.commands import drain, kubectl, node_shell
from handlers.model import Fix

CHECK = "hardware (NFD pci-10de)"


@stage("hardware", check=CHECK)
def hardware(n: NodeFacts, before: Before) -> Outcome:
    if n.advertised or nfd_pci_nvidia(n.node):
        return Outcome(passed=True)
    if not nfd_running(n.node):
        n.ctx.unchecked.append(f"{CHECK} on {n.name}: not checked (no NFD labels on the node)")
        return Outcome()
    meant = gpu_meant_by(n.node)
    if not meant:
        return Outcome()
    nfd = next(f"{k}={v}" for k, v in n.lab.items()
               if k.startswith("feature.node.kubernetes.io/"))
    found = n.draft("GPU_HARDWARE_NOT_DETECTED", [
        *meant, f"{nfd} (NFD labels the node)",
        "feature.node.kubernetes.io/pci-10de.present: absent (no NVIDIA PCI device)"])
    # No device, no GPUs to advertise: that is the missing GPUs' cause, and all of it.
    said = n.draft("GPU_NOT_ADVERTISED", [f"node {n.name} capacity nvidia.com/gpu: absent",
                                          "cause: GPU_HARDWARE_NOT_DETECTED"])
    return Outcome((found, said), halt=True)


@words("GPU_HARDWARE_NOT_DETECTED")
def _not_detected(w: Where) -> Words:
    n = w.node
    return Words(
        f"{n} is meant to have GPUs but NFD reports no NVIDIA PCI device.",
        Fix("See whether the machine lists an NVIDIA device. None listed: it has no GPU "
            "attached (wrong instance type, PCI passthrough not configured, or a GPU fallen "
            "off the bus): drain and replace the node. Listed: restart the NFD worker on "
            f"{n} so that it labels the node again.",
            (node_shell(n, "lspci -nn | grep -i 10de; dmesg | grep -i xid"), drain(n),
             kubectl("delete", "node", n, note="once drained, to replace it"))))
