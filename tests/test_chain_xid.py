"""Xids read from the API: node conditions and events of the shapes real agents write."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.snapshot import load_snapshot
from handlers import doctor
from handlers.chain.stages.xid import _is_problem, xids_of
from handlers.model import Diagnosis
from handlers.view import Reader

SCEN = Path(__file__).parent / "scenarios"


@pytest.mark.parametrize("reason,message,want", [
    # node-problem-detector kernel-monitor rule: the matched kernel line
    ("GPUXid", "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM "
     "Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter", [13]),
    # AKS node-problem-detector plugin (Azure/AgentBaker check_xid_error.sh)
    ("XIDErrorIsPresent", "XID error-codes found: 48, 56. FaultCode: NHC2001", [48, 56]),
    # EKS node monitoring agent reasons
    ("NvidiaXID79Error", "", [79]),
    ("NvidiaXID43Warning", "", [43]),
    ("XIDErrorIsNotPresent", "XID error status is good", []),
    # cut at 80 characters by NPD: the last, shortened number is not an Xid
    ("XIDErrorIsPresent", "XID error-codes found: 48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 7",
     [48, 56, 57, 58, 62, 63, 64, 65, 68, 69]),
    # EKS: the newest issue is the reason; earlier Xids stay in the joined message
    ("NvidiaDeviceCountMismatch", "detected XID-79 on the instance, review kernel logs for "
     "additional information.; expected 8 GPUs for this instance type but only 7 were "
     "detected", [79]),
    # EKS Warning-level Xid: an event whose message names the issue
    ("AcceleratedHardwareReady", "NvidiaXID13Warning: detected unknown XID-13 on the "
     "instance, review kernel logs for additional information.", [13]),
    # GKE device plugin: JSON reason on the condition, and its event
    ('{"48":true,"79":true}', "6e43a052-e544-467b-a972-63d7cd2ce80a", [48, 79]),
    ("XIDError", "Caught XID error, XID=79", [79]),
    ("KernelOops", "kernel: BUG: unable to handle kernel NULL pointer dereference", []),
])
def test_xids_of(reason: str, message: str, want: list[int]) -> None:
    assert xids_of(reason, message) == want


@pytest.mark.parametrize("cond,problem", [
    ({"type": "XIDError", "status": "True"}, True),
    ({"type": "XIDError", "status": "False"}, False),
    ({"type": "AcceleratedHardwareReady", "status": "False"}, True),
    ({"type": "AcceleratedHardwareReady", "status": "True"}, False),
    ({"type": "XidCriticalError", "status": "True"}, True),
    ({"type": "Ready", "status": "False"}, False),
])
def test_problem_conditions(cond: dict[str, str], problem: bool) -> None:
    assert _is_problem(cond) is problem


def _doctor_with(tmp: Path, conditions: list[dict[str, Any]],
                 events: list[dict[str, Any]]) -> Diagnosis:
    src = SCEN / "doctor_npd_xid_condition_aks" / "snapshot"
    doc = yaml.safe_load((src / "cluster.yaml").read_text())
    for o in doc["items"]:
        if o["kind"] == "Node" and o["metadata"]["name"] == "gpu-a100-1":
            o["status"]["conditions"] = [c for c in o["status"]["conditions"]
                                         if c["type"] != "XIDError"] + conditions
    doc["items"] += events
    (tmp / "cluster.yaml").write_text(yaml.safe_dump(doc))
    shutil.copy(src / "logs.txt", tmp / "logs.txt")
    return doctor.run(Reader(load_snapshot(tmp)), "gpu-a100-1")


# A kernel-monitor event as NPD reports it: the matched kernel line is the message.
# The line: https://github.com/leptonai/gpud (components/accelerator/nvidia/error/xid/README.md)
XID13 = ("NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp "
         "Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter")
EVENT = {"apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": "GPUXid",
         "message": XID13, "metadata": {"name": "gpu-a100-1.xid13", "namespace": "default"},
         "involvedObject": {"kind": "Node", "name": "gpu-a100-1"},
         "firstTimestamp": "2024-06-12T10:20:00Z", "lastTimestamp": "2024-06-12T10:20:00Z"}
AKS79 = {"type": "XIDError", "status": "True", "reason": "XIDErrorIsPresent",
         "message": "XID error-codes found: 79. FaultCode: NHC2001"}


def test_condition_and_event_together_name_the_worst_xid(tmp_path: Path) -> None:
    diag = _doctor_with(tmp_path, [AKS79], [EVENT])
    f = next(f for f in diag.findings if f.code == "GPU_XID_ERRORS")
    assert str(f.severity) == "critical"
    assert f.summary.startswith("Xid 79, 13 on gpu-a100-1; the worst, Xid 79")
    assert any(XID13 in e for e in f.evidence)
    assert any(e.startswith("Xid 13 (Graphics Engine Exception)") for e in f.evidence)
    assert "restart" not in f.fix.summary.split("Restarting the device plugin does not help")[0]


def test_events_alone_are_read_only_on_a_node_with_a_gpu_symptom(tmp_path: Path) -> None:
    # No condition, all GPUs advertised: the node shows no symptom, its events are not read.
    diag = _doctor_with(tmp_path, [], [EVENT])
    assert "GPU_XID_ERRORS" not in [f.code for f in diag.findings]


def test_gke_xid_critical_condition_is_read_with_its_json_reason(tmp_path: Path) -> None:
    gke = {"type": "XidCriticalError", "status": "True", "reason": '{"48":true,"79":true}',
           "message": "6e43a052-e544-467b-a972-63d7cd2ce80a"}
    diag = _doctor_with(tmp_path, [gke], [])
    f = next(f for f in diag.findings if f.code == "GPU_XID_ERRORS")
    assert f.summary.startswith("Xid 48, 79 on gpu-a100-1")
    assert str(f.severity) == "critical"
