"""GPU_XID_ERRORS from the API alone: node conditions and Node events that carry Xids.

The shapes read (the Xid's meaning comes from knowledge/xid.yaml; what each agent writes,
with sources: docs/research/node-conditions.md):
- a kernel line ``NVRM: Xid (PCI:0000:3b:00): 79, ...`` in a condition or event message
  (node-problem-detector kernel-monitor rules report the matched line);
- AKS's node-problem-detector plugin: condition ``XIDError`` (reason ``XIDErrorIsPresent``)
  with the message ``XID error-codes found: 48, 79. FaultCode: NHC2001``
  (Azure/AgentBaker, branch npdshift, node-problem-detector/plugin/check_xid_error.sh). NPD
  cuts the message at 80 characters, so only a number followed by "," or "." is whole;
- the EKS node monitoring agent: reasons ``NvidiaXID79Error`` / ``NvidiaXID43Warning``; its
  condition keeps only the newest issue as the reason and joins every issue's message
  (``detected XID-79 on the instance, ...``) with "; ", and Warning-level Xids are events
  whose message starts with the issue (aws/eks-node-monitoring-agent,
  pkg/manager/node_exporter.go);
- GKE's device plugin: condition ``XidCriticalError`` whose reason is JSON of the Xids seen
  (``{"48":true,"79":true}``), and events ``XIDError`` "Caught XID error, XID=79"
  (GoogleCloudPlatform/container-engine-accelerators, pkg/gpu/nvidia/health_check/
  health_checker.go).

A hardware Xid (knowledge/xid.yaml ``hardware: true``) never suggests restarting the device
plugin: the GPU_UNHEALTHY finding of the same node loses that action and says what helps
(an explicit amendment of the health stage's finding).
Node events are read only for nodes that already show a GPU symptom, so a large cluster
costs no extra request per healthy node.
"""

from __future__ import annotations

import re
from typing import Any

from handlers.chain.facts import NodeFacts
from handlers.chain.outcome import Amendment, Draft, NoRestart, Note, Outcome
from handlers.chain.stage import Before, stage
from handlers.fixes import XID_CATALOG, xid_fix
from handlers.knowledge.xid import XidInfo, severity_conditions, xid_info, xids_in

_AKS = re.compile(r"XID error-codes found: ([\d, ]+[.,]?)")
_WHOLE = re.compile(r"(\d+)(?=[,.])")  # a number the 80-character cut did not shorten
_EKS = re.compile(r"NvidiaXID(\d+)(?:Error|Warning)")
_EKS_MESSAGE = re.compile(r"\bXID-(\d+)\b")
_GKE_EVENT = re.compile(r"Caught XID error, XID=(\d+)")
_GKE_REASON = re.compile(r'"(\d+)"\s*:\s*true')
_PLUGIN = re.compile(r"XidCriticalError: Xid=(\d+)")
_CATALOG = XID_CATALOG
# What an operator does, worst first.
_ACTION_ORDER = ("repair", "drain", "reset", "app-fix")
_MAX_SIGNALS = 6
_TODO = {"app-fix": "fix the application", "reset": "reset the GPU",
         "drain": "drain and reboot the node", "repair": "the GPU needs repair"}


def xids_of(reason: str, message: str) -> list[int]:
    """The Xid numbers a condition or event (reason, message) reports."""
    found = xids_in(message)
    m = _AKS.search(message)
    if m:
        found += [int(x) for x in _WHOLE.findall(m.group(1))]
    found += [int(x) for x in _EKS.findall(reason) + _EKS.findall(message)]
    found += [int(x) for x in _EKS_MESSAGE.findall(message) + _GKE_EVENT.findall(message)]
    found += [int(x) for x in _GKE_REASON.findall(reason)]
    return list(dict.fromkeys(found))


def _is_problem(cond: dict[str, Any]) -> bool:
    """NPD problem conditions are True when the problem is there; *Ready conditions (the
    EKS agent's AcceleratedHardwareReady) are False."""
    ctype, status = str(cond.get("type", "")), cond.get("status")
    if ctype == "Ready":
        return False
    return status == "False" if ctype.endswith("Ready") else status == "True"


def _rank(info: XidInfo | None) -> int:
    return _ACTION_ORDER.index(info.action) if info else len(_ACTION_ORDER)


def _describe(x: int, info: XidInfo | None) -> str:
    if info is None:
        return f"Xid {x}: not in gpubot's Xid table; see NVIDIA's catalog ({_CATALOG})"
    kind = "hardware" if info.hardware else "not hardware"
    return (f"Xid {x} ({info.name}): {info.meaning}; action: {info.action} ({kind}; "
            f"{info.source})")


@stage("xid", after=("health",))
def xid(run: NodeFacts, before: Before) -> Outcome:
    node = run.node
    signals: list[tuple[list[int], str]] = []
    for c in (node.get("status") or {}).get("conditions") or []:
        if not _is_problem(c):
            continue
        xids = xids_of(str(c.get("reason", "")), str(c.get("message", "")))
        if xids:
            signals.append((xids, f"node {run.name} condition {c.get('type')}="
                                  f"{c.get('status')} ({c.get('reason', '')}): "
                                  f"{c.get('message', '')}".rstrip(": ")))
    unhealthy = before.has("GPU_UNHEALTHY")
    symptom = bool(signals) or unhealthy or before.has("GPU_NOT_ADVERTISED") or any(
        run.alloc.get(r, 0.0) < c for r, c in run.cap.items())
    if symptom:
        for e in run.ctx.reader.events("Node", run.name):
            reason, msg = str(e.get("reason", "")), str(e.get("message") or e.get("note") or "")
            xids = xids_of(reason, msg)
            if xids:
                signals.append((xids, f"node {run.name} event {reason}: {msg}".rstrip(": ")))
    plugin_xids = [int(x) for line in before.evidence("GPU_UNHEALTHY")
                   for x in _PLUGIN.findall(line)]
    api_xids = list(dict.fromkeys(x for xs, _ in signals for x in xs))
    infos = {x: xid_info(x) for x in dict.fromkeys(api_xids + plugin_xids)}
    found: list[Draft] = []
    if api_xids:
        worst = min(api_xids, key=lambda x: _rank(infos[x]))
        winfo = infos[worst]
        hardware = any(i is not None and i.hardware for x, i in infos.items() if x in api_xids)
        what = (f"{winfo.name} ({'hardware; ' if winfo.hardware else ''}"
                f"{_TODO[winfo.action]})" if winfo else "not in gpubot's Xid table")
        summary = f"Xid {', '.join(map(str, api_xids))} on {run.name}" + (
            f"; the worst, Xid {worst}: {what}." if len(api_xids) > 1 else f": {what}.")
        evidence = [line for _, line in signals[:_MAX_SIGNALS]]
        evidence += [_describe(x, infos[x]) for x in api_xids]
        found.append(Draft(
            "GPU_XID_ERRORS", summary, xid_fix(run.name, worst, winfo), (run.ref,),
            tuple(evidence),
            conditions=frozenset({"needs-repair"}) if hardware else severity_conditions(winfo)))
    hw = [x for x, i in infos.items() if i is not None and i.hardware]
    amend: list[Amendment] = []
    if unhealthy and hw:
        # A restarted plugin re-checks the GPUs and may list a broken one as healthy again.
        # (chain/faults.py gives the repair fix for hardware Xids in the plugin's own log
        # lines; Xids seen only in the node's events and conditions get theirs here.)
        if any(a[0] == "restart-device-plugin" for a in before.actions("GPU_UNHEALTHY")):
            worst_hw = min(hw, key=lambda x: _rank(infos[x]))
            amend.append(NoRestart("GPU_UNHEALTHY", xid_fix(run.name, worst_hw, infos[worst_hw])))
        amend.append(Note("GPU_UNHEALTHY", tuple(_describe(x, infos[x]) for x in hw)))
    return Outcome(tuple(found), tuple(amend))
