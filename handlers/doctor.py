"""doctor [NODE]: the GPU discovery chain on every GPU node (or one), as a table and findings.

Each GPU node gets one row (product, GPUs capacity/allocatable, labels, driver, toolkit,
plugin, runtime, MIG, sharing, verdict) and its problems as findings; causes shared by
all nodes (a DaemonSet's RuntimeClass, Pod Security, the sharing ConfigMap) are reported
once. Nothing wrong: ALL_CLEAR with the checks that ran as evidence.
"""

from __future__ import annotations

from handlers.chain import check_chain
from handlers.chain.facts import node_ready
from handlers.errors import TargetNotFound, close_names
from handlers.finish import finish
from handlers.fixes import not_ready_fix
from handlers.grouping import pools_of
from handlers.model import Diagnosis, Finding, ObjectRef
from handlers.runtime import checks as runtime
from handlers.view import Reader, names


def run(reader: Reader, node: str | None = None) -> Diagnosis:
    diag = Diagnosis("doctor", node or "cluster")
    scope = None
    if node:
        obj = reader.get("Node", node)
        if obj is None:
            if not reader.readable("Node"):
                diag.unchecked = list(reader.unchecked)
                diag.can_clear = False
                return finish(diag)
            raise TargetNotFound(f'node "{node}" not found',
                                 close_names(node, names(reader.list("Node"))))
        scope = [obj]
    report = check_chain(reader, scope)
    by_name = {n.get("metadata", {}).get("name"): n for n in reader.list("Node")}
    if scope:
        by_name[node] = scope[0]
    for chain in report.nodes:
        obj = by_name.get(chain.node)
        if chain.row.get("verdict") == "NotReady" and obj is not None:
            _, why = node_ready(obj)
            diag.add(Finding(
                "NODE_NOT_READY", f"GPU node {chain.node} is NotReady: its GPUs cannot be used.",
                objects=(ObjectRef("Node", chain.node),), evidence=(why.strip(),),
                fix=not_ready_fix(chain.node)))
    for f in report.findings:
        diag.add(f)
    for check in report.checks:
        diag.check(check)
    diag.unchecked = list(dict.fromkeys(reader.unchecked + report.unchecked))
    diag.withheld = list(reader.withheld)
    runtime.enrich(reader, diag, nodes=[c.node for c in report.nodes])
    diag.details["rows"] = [c.row for c in report.nodes]
    diag.details["passed"] = {c.node: c.passed for c in report.nodes}
    if not report.nodes:
        diag.can_clear = False
        diag.details["note"] = ("no GPU nodes found: no node advertises nvidia.com/gpu, "
                                "carries GPU labels or runs a device-plugin pod")
    elif scope and report.nodes[0].row.get("verdict") == "not a GPU node":
        diag.can_clear = False  # nothing in the chain applies to it
        diag.details["note"] = (f"{node} is not a GPU node: it advertises no nvidia.com/gpu, "
                                "carries no GPU labels and runs no device-plugin pod")
    diag.node_pools = pools_of(diag.findings, by_name)
    return finish(diag)
