"""GPU hardware faults among Xid lines: these need a drain and a repair, not a restart.

Restarting the device plugin re-reads device health, but a GPU that fell off the bus or has
uncorrectable memory errors is still broken afterwards, so no restart is offered for them.
Which Xids are hardware is the Xid table's word (``handlers/knowledge/xid.yaml``, from
NVIDIA's catalogue); a failed row remapping is named by the memory-error guides
(https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/).
"""

from __future__ import annotations

import re

from handlers.knowledge.xid import xid_info
from handlers.kube.commands import drain, kubectl, node_shell
from handlers.model import Fix

# "XidCriticalError: Xid=79 on Device=..." (device plugin), "NVRM: Xid (PCI:0000:10:1c): 79, ..."
_XID_RE = re.compile(r"\bXid(?:=|\s*\([^)]*\)\s*:\s*|\s+)(\d+)")
_ROW_REMAP_FAILED_RE = re.compile(r"(?i)row remap\w*\s+fail|remapping failure")


def hardware_faults(lines: list[str]) -> list[str]:
    """'Xid 79 (GPU fallen off the bus)' per hardware fault the lines show, in order."""
    out: list[str] = []
    for ln in lines:
        for m in _XID_RE.finditer(ln):
            xid = int(m[1])
            info = xid_info(xid)
            if info is not None and info.hardware:
                out.append(f"Xid {xid} ({info.name})")
        if _ROW_REMAP_FAILED_RE.search(ln):
            out.append("row remapping failure")
    return list(dict.fromkeys(out))


def repair_fix(node: str, faults: list[str]) -> Fix:
    return Fix(
        f"GPU hardware fault on {node}: {', '.join(faults)}. Restarting the device plugin "
        "will not bring the GPU back: drain the node and repair it. Then reset the GPU "
        "(nvidia-smi -r) or reboot the node; if the fault returns, replace the GPU (open a "
        "hardware ticket with the nvidia-bug-report.sh output).",
        (kubectl("cordon", node), drain(node),
         node_shell(node, "nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT; "
                          "dmesg | grep -i xid")),
        docs=("https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/",))
