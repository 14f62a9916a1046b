"""GPU hardware faults among Xid lines: these need a drain and a repair, not a restart.

Restarting the device plugin re-reads device health, but a GPU that fell off the bus or has
uncorrectable memory errors is still broken afterwards, so no restart is offered for them.
Xids from NVIDIA's catalogue (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)
and the memory-error guides (https://docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html,
https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/):
"""

from __future__ import annotations

import re

HARDWARE_XIDS = {
    48: "double-bit ECC error",
    64: "page retirement / row remapping failure",
    79: "GPU fallen off the bus",
    95: "uncontained ECC error",
}
# "XidCriticalError: Xid=79 on Device=..." (device plugin), "NVRM: Xid (PCI:0000:10:1c): 79, ..."
_XID_RE = re.compile(r"\bXid(?:=|\s*\([^)]*\)\s*:\s*|\s+)(\d+)")
_ROW_REMAP_FAILED_RE = re.compile(r"(?i)row remap\w*\s+fail|remapping failure")


def hardware_faults(lines: list[str]) -> list[str]:
    """'Xid 79 (GPU fallen off the bus)' per hardware fault the lines show, in order."""
    out: list[str] = []
    for ln in lines:
        for m in _XID_RE.finditer(ln):
            xid = int(m[1])
            if xid in HARDWARE_XIDS:
                out.append(f"Xid {xid} ({HARDWARE_XIDS[xid]})")
        if _ROW_REMAP_FAILED_RE.search(ln):
            out.append("row remapping failure")
    return list(dict.fromkeys(out))


def repair_fix(node: str, faults: list[str]) -> str:
    return (f"GPU hardware fault on {node}: {', '.join(faults)}. Restarting the device plugin "
            "will not bring the GPU back: drain the node and repair it.\n"
            f"kubectl cordon {node}\n"
            f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data\n"
            f"kubectl debug node/{node} -it --image=ubuntu -- chroot /host sh -c "
            "'nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT; dmesg | grep -i xid'\n"
            "Then reset the GPU (nvidia-smi -r) or reboot the node; if the fault returns, "
            "replace the GPU (open a hardware ticket with the nvidia-bug-report.sh output).")
