"""NVIDIA Xid errors as data (``xid.yaml``): name, meaning, action and whether it is hardware.

``xid_info(79)`` answers what Xid 79 means and what to do; ``xids_in(text)`` finds the Xid
numbers in kernel lines such as ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen
off the bus.``, as node-problem-detector conditions and Node events carry them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal, cast

from handlers.knowledge import load_yaml

Action = Literal["app-fix", "reset", "drain", "repair"]
ACTIONS: frozenset[str] = frozenset({"app-fix", "reset", "drain", "repair"})

_DATA = Path(__file__).with_name("xid.yaml")
# "NVRM: Xid (PCI:0000:3b:00): 79, ..." and the pre-2015 "NVRM: Xid (0000:03:00): 13, ..."
_NVRM_XID = re.compile(r"NVRM: Xid \([^)]*\): (\d+)")


@dataclass(frozen=True)
class XidInfo:
    xid: int
    name: str
    meaning: str
    action: Action
    hardware: bool
    source: str


def _parse(entry: object, where: str) -> XidInfo:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: not a mapping")
    xid, action = entry.get("xid"), entry.get("action")
    if not isinstance(xid, int) or isinstance(xid, bool):
        raise ValueError(f"{where}: xid must be an integer")
    if action not in ACTIONS:
        raise ValueError(f"{where} (Xid {xid}): action must be one of {sorted(ACTIONS)}")
    fields = {k: entry.get(k) for k in ("name", "meaning", "source")}
    for key, value in fields.items():
        if not isinstance(value, str) or not value:
            raise ValueError(f"{where} (Xid {xid}): {key} must be a non-empty string")
    if not isinstance(entry.get("hardware"), bool):
        raise ValueError(f"{where} (Xid {xid}): hardware must be true or false")
    return XidInfo(xid, str(fields["name"]), str(fields["meaning"]), cast(Action, action),
                   bool(entry["hardware"]), str(fields["source"]))


@cache
def table() -> dict[int, XidInfo]:
    """Every Xid in ``xid.yaml``, by number."""
    doc = load_yaml(_DATA)
    out: dict[int, XidInfo] = {}
    for i, entry in enumerate(doc["xids"]):
        info = _parse(entry, f"xid.yaml entry {i}")
        if info.xid in out:
            raise ValueError(f"xid.yaml entry {i}: Xid {info.xid} listed twice")
        out[info.xid] = info
    return out


def xid_info(code: int) -> XidInfo | None:
    """What Xid ``code`` means and what to do about it; None for an Xid the table lacks."""
    return table().get(code)


def xids_in(text: str) -> list[int]:
    """The Xid numbers in ``NVRM: Xid (...): N`` lines of ``text``, first occurrence order."""
    seen: dict[int, None] = {}
    for m in _NVRM_XID.finditer(text):
        seen.setdefault(int(m.group(1)), None)
    return list(seen)


def severity_conditions(info: XidInfo | None) -> frozenset[str]:
    """What an Xid says about a GPU_XID_ERRORS finding's severity (its card): hardware or a
    drain/repair needs a repair; an application's own fault leaves the GPU usable."""
    if info is None:
        return frozenset()
    if info.hardware or info.action in ("drain", "repair"):
        return frozenset({"needs-repair"})
    return frozenset({"app-fault"}) if info.action == "app-fix" else frozenset()
