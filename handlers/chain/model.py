"""What the discovery chain returns: per node, its findings, the checks that passed and its
doctor table row; for the cluster, every finding and the checks that ran."""

from __future__ import annotations

from dataclasses import dataclass, field

from handlers.model import Finding


@dataclass
class NodeChain:
    node: str
    findings: list[Finding]  # problems (and info notes); passed checks are named in `passed`
    passed: list[str]  # names of checks that passed on this node
    # One doctor table row: node, product, gpus "cap/alloc", labels, driver, toolkit,
    # plugin, runtime, mig, sharing, verdict.
    row: dict[str, str]
    ran: list[str] = field(default_factory=list)  # checks that applied here (passed or not)


@dataclass
class ChainReport:
    nodes: list[NodeChain]
    findings: list[Finding]  # cluster-level problems + every node's problems
    checks: list[str]  # names of checks that ran
    # What could not be checked and why ("RuntimeClass: not checked: ...").
    unchecked: list[str] = field(default_factory=list)


# Checks of the plugin's and operator's DaemonSets, made once for the cluster (chain/core.py);
# each node's own checks are its stages' (handlers/chain/stages).
CHECK_RUNTIMECLASS = "RuntimeClass"
CHECK_POD_SECURITY = "Pod Security admission"
CHECK_PRIVILEGES = "device-plugin privileges and mounts"
DAEMONSET_CHECKS = (CHECK_RUNTIMECLASS, CHECK_POD_SECURITY, CHECK_PRIVILEGES)
