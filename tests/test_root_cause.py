"""Root cause: findings linked into a causal chain, the deepest proven cause first; one
finding for one fault on several nodes."""

from __future__ import annotations

import json
from pathlib import Path

from bot.snapshot import load_snapshot
from handlers import doctor, why_pending
from handlers.finish import finish
from handlers.grouping import group_by_node, pools_of
from handlers.model import Diagnosis, Finding, Fix, ObjectRef, Severity
from handlers.rootcause import link
from handlers.target import parse_target
from handlers.view import Reader
from tests.findings import finding_at

ROOT = Path(__file__).parents[1]
CRIT, WARN, INFO = Severity.CRITICAL, Severity.WARNING, Severity.INFO


def _f(code: str, sev: Severity, *nodes: str, summary: str = "") -> Finding:
    return finding_at(code, sev, summary or f"{code} on {', '.join(nodes)}",
                      tuple(ObjectRef("Node", n) for n in nodes), ("proof",), Fix("fix it"))


def test_the_deepest_cause_on_the_same_node_leads_with_its_symptoms_under_it() -> None:
    found, root = link([
        _f("GPU_NOT_ADVERTISED", CRIT, "a"), _f("DEVICE_PLUGIN_CRASHLOOP", CRIT, "a"),
        _f("CUDA_DRIVER_MISMATCH", WARN, "a"), _f("NODE_NOT_READY", CRIT, "b")])
    assert root is not None and root.code == "CUDA_DRIVER_MISMATCH" and root.finding == 0
    assert [f.code for f in found] == ["CUDA_DRIVER_MISMATCH", "DEVICE_PLUGIN_CRASHLOOP",
                                       "GPU_NOT_ADVERTISED", "NODE_NOT_READY"]
    by = {f.code: f for f in found}
    assert by["DEVICE_PLUGIN_CRASHLOOP"].caused_by == ("CUDA_DRIVER_MISMATCH",)
    assert set(by["GPU_NOT_ADVERTISED"].caused_by) == {"DEVICE_PLUGIN_CRASHLOOP",
                                                        "CUDA_DRIVER_MISMATCH"}
    assert by["NODE_NOT_READY"].caused_by == ()
    # A cause is as grave as what it blocks.
    assert found[0].severity == CRIT
    assert root.symptoms == ("DEVICE_PLUGIN_CRASHLOOP", "GPU_NOT_ADVERTISED")


def test_a_cause_on_another_node_explains_nothing_here() -> None:
    found, root = link([_f("DEVICE_PLUGIN_CRASHLOOP", CRIT, "a"),
                        _f("CUDA_DRIVER_MISMATCH", CRIT, "b")])
    assert all(f.caused_by == () for f in found)
    assert root is not None and root.code == "DEVICE_PLUGIN_CRASHLOOP"


def test_no_root_cause_when_nothing_blocks() -> None:
    found, root = link([_f("WRONG_GPU_TYPE", INFO, "a")])
    assert root is None and found[0].caused_by == ()
    d = Diagnosis("doctor", "cluster")
    d.add(_f("WRONG_GPU_TYPE", INFO, "a"))
    assert finish(d).to_json()["root_cause"] is None


def test_json_names_the_root_cause_and_every_findings_causes() -> None:
    reader = Reader(load_snapshot(ROOT / "examples" / "plugin-crashloop-cuda-mismatch"))
    out = json.loads(json.dumps(why_pending.run(reader, parse_target("ml-team/train-0")).to_json()))
    rc = out["root_cause"]
    assert set(rc) == {"code", "summary", "finding"}
    assert rc["code"] == "CUDA_DRIVER_MISMATCH"
    assert out["findings"][rc["finding"]]["code"] == rc["code"]
    caused = {f["code"]: f["caused_by"] for f in out["findings"]}
    assert caused["DEVICE_PLUGIN_CRASHLOOP"] == ["CUDA_DRIVER_MISMATCH"]
    assert "CUDA_DRIVER_MISMATCH" in caused["GPU_NOT_ADVERTISED"]


# -- grouping -------------------------------------------------------------------------------


def _node(name: str, pool: str | None) -> dict[str, object]:
    labels = {"eks.amazonaws.com/nodegroup": pool} if pool else {}
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}}


def group_by_node_of(findings: list[Finding], nodes: dict[str, dict[str, object]]
                     ) -> list[Finding]:
    return group_by_node(findings, pools_of(findings, nodes))


def _plugin(node: str) -> Finding:
    return Finding("DEVICE_PLUGIN_CRASHLOOP", f"The device plugin on {node} keeps crashing.",
                   (ObjectRef("Node", node), ObjectRef("Pod", f"plugin-{node}", "gpu-operator")),
                   (f"pod gpu-operator/plugin-{node}: CrashLoopBackOff", "restartCount: 9"),
                   Fix("Restart it.", (f"kubectl -n gpu-operator delete pod plugin-{node}",)))


def test_one_fault_on_three_nodes_is_one_finding_naming_them_and_their_pool() -> None:
    nodes = {n: _node(n, "a100-80") for n in ("gpu-1", "gpu-2", "gpu-3")}
    out = group_by_node_of([_plugin(n) for n in nodes], nodes)
    assert len(out) == 1
    f = out[0]
    assert "3 nodes of pool a100-80 (gpu-1, gpu-2, gpu-3)" in f.summary
    assert {o.name for o in f.objects if o.kind == "Node"} == set(nodes)
    # Per-node evidence kept; a line every node shares is said once.
    assert {f"pod gpu-operator/plugin-{n}: CrashLoopBackOff" for n in nodes} <= set(f.evidence)
    assert f.evidence.count("restartCount: 9") == 1
    # One fix, with each node's own command to run.
    assert f.fix.commands == tuple(f"kubectl -n gpu-operator delete pod plugin-{n}" for n in nodes)


def test_the_same_symptom_with_different_causes_stays_apart() -> None:
    nodes = {n: _node(n, None) for n in ("gpu-1", "gpu-2")}
    other = _f("DRIVER_NOT_READY", CRIT, "gpu-2", summary="driver on gpu-2")
    out = group_by_node_of([_plugin("gpu-1"), _plugin("gpu-2"), other], nodes)
    assert [f.code for f in out].count("DEVICE_PLUGIN_CRASHLOOP") == 2


def test_doctor_groups_a_rollout_that_broke_three_nodes() -> None:
    snap = ROOT / "tests" / "scenarios" / "plugin-rollout-bad-tag" / "cluster.yaml"
    d = doctor.run(Reader(load_snapshot(snap)), None)
    pulls = [f for f in d.findings if f.code == "DEVICE_PLUGIN_IMAGE_PULL"]
    assert len(pulls) == 1
    assert len([o for o in pulls[0].objects if o.kind == "Node"]) == 3
    assert "pool gpu-a10g" in pulls[0].summary


def test_why_pending_is_critical_only_about_nodes_the_pod_could_use() -> None:
    """Honest severity: a chain finding that blocks the pod is about a node it passes the
    targeting filters of (selector, affinity, taints); other nodes' faults are not its."""
    from handlers.codes import CODES, Section
    from tests.scenarios import load_scenarios
    from tests.test_scenarios import run_scenario

    targeting = ("NodeName:", "NodeAffinity:", "TaintToleration:", "VolumeNodeAffinity:")
    checked = 0
    for s in load_scenarios():
        if s.command != "why-pending":
            continue
        d = run_scenario(s)
        if not d.nodes:
            continue
        usable = {v.node for v in d.nodes if not any(r.startswith(targeting)
                                                     for r in v.reasons)}
        for f in d.findings:
            if f.severity == CRIT and CODES[f.code].section == Section.CHAIN:
                nodes = {o.name for o in f.objects if o.kind == "Node"}
                assert not nodes or nodes & usable, (s.name, f.code, nodes, usable)
                checked += 1
    assert checked >= 3


def test_why_pending_has_one_critical_finding_per_independent_cause() -> None:
    from tests.scenarios import load_scenarios
    from tests.test_scenarios import run_scenario

    by_name = {s.name: s for s in load_scenarios()}

    def criticals(name: str) -> list[str]:
        return [f.code for f in run_scenario(by_name[name]).findings if f.severity == CRIT]

    # One cause, its symptoms under it as warnings.
    assert criticals("example_plugin-crashloop-why-pending") == ["CUDA_DRIVER_MISMATCH"]
    # Two causes on two sets of nodes (cordoned, tainted) each block the pod; the third
    # node being full is a symptom: the cordoned node has the GPUs it needs.
    assert sorted(criticals("several-causes-new-scheduler")) == [
        "NODE_UNSCHEDULABLE", "TAINT_NOT_TOLERATED"]
