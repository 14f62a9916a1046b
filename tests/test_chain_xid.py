"""Xids read from the API: node conditions and events of the shapes real agents write."""

import pytest

from handlers.chain.xid import _is_problem, xids_of


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
    ("KernelOops", "kernel: BUG: unable to handle kernel NULL pointer dereference", []),
])
def test_xids_of(reason: str, message: str, want: list[int]) -> None:
    assert xids_of(reason, message) == want


@pytest.mark.parametrize("cond,problem", [
    ({"type": "XIDError", "status": "True"}, True),
    ({"type": "XIDError", "status": "False"}, False),
    ({"type": "AcceleratedHardwareReady", "status": "False"}, True),
    ({"type": "AcceleratedHardwareReady", "status": "True"}, False),
    ({"type": "Ready", "status": "False"}, False),
])
def test_problem_conditions(cond: dict[str, str], problem: bool) -> None:
    assert _is_problem(cond) is problem
