"""Fixes more than one handler gives: a NotReady node, a used-up ResourceQuota, an Xid."""

from __future__ import annotations

from handlers.knowledge.xid import XidInfo
from handlers.kube.commands import drain, kubectl, merge_patch, node_shell, pods_on_node
from handlers.model import Fix

XID_CATALOG = "https://docs.nvidia.com/deploy/xid-errors/index.html"


def not_ready_fix(node: str, gone: bool = False) -> Fix:
    """Why the kubelet stopped reporting; ``gone``: the machine may be gone for good."""
    return Fix(
        "The node's conditions and its kubelet's log say why it is NotReady."
        + (" If the machine is gone for good, delete the Node: its Terminating pods are then "
           "removed and their controllers recreate them elsewhere." if gone else ""),
        (kubectl("describe", "node", node),
         node_shell(node, "journalctl -u kubelet -n 100 --no-pager; "
                          "systemctl status containerd --no-pager"),
         *((kubectl("delete", "node", node, note="only if the machine is gone"),)
           if gone else ())))


def raise_quota(namespace: str, quota: str, key: str, to: str, free: str) -> Fix:
    """Free the quota (``free`` says how) or raise ``key`` of it to ``to``."""
    return Fix(f"Free quota ({free}), or raise it.", (
        kubectl("get", "pods", "-o", "wide", namespace=namespace),
        merge_patch("resourcequota", quota, {"spec": {"hard": {key: to}}}, namespace=namespace,
                    note="or: raise it")))


def xid_fix(node: str, x: int, info: XidInfo | None) -> Fix:
    docs = (XID_CATALOG,)
    if info is None:
        return Fix(f"Look Xid {x} up in NVIDIA's catalog and check the node's GPUs.",
                   (node_shell(node, "dmesg | grep -i xid; nvidia-smi -q | "
                                     "grep -iA3 -e retired -e remapp"),), docs=docs)
    if info.action == "repair":
        return Fix(f"Xid {x} ({info.name}) needs hardware service: drain the node and open a "
                   "case with the hardware vendor or cloud provider (replace the GPU or the "
                   "instance). Restarting the device plugin does not help.",
                   (kubectl("cordon", node), drain(node)), docs=docs)
    if info.action == "drain":
        return Fix("Drain the node, reboot it (cloud: replace the instance) and uncordon it. "
                   f"If Xid {x} returns after the reboot, the GPU needs repair. Restarting the "
                   "device plugin does not help.",
                   (drain(node), kubectl("uncordon", node, note="after the reboot")),
                   docs=docs)
    if info.action == "reset":
        return Fix("Drain the node, reset its GPUs (or reboot it), then uncordon it. A GPU "
                   f"whose Xid {x} keeps returning needs repair."
                   + (" Restarting the device plugin does not help." if info.hardware else ""),
                   (drain(node), node_shell(node, "nvidia-smi -r"), kubectl("uncordon", node)),
                   docs=docs)
    return Fix(f"Xid {x} ({info.name}) comes from the application that used the GPU: read the "
               f"logs of the GPU pods on {node} around that time and fix or restart that "
               "workload; the GPU stays usable.",
               (kubectl("get", "pods", "-A", "-o", "wide", "--field-selector",
                        pods_on_node(node)),), docs=docs)
