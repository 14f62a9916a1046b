"""fits_if: the smallest single changes after which the scheduler's filters pass, each
re-checked with the change applied. Per kind, the scenarios assert what comes out
(`fits_if:` in scenario.yaml); here: the shape, the verification and the 'closest' text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.snapshot import load_snapshot
from handlers import pending_all, why_pending
from handlers.cards import CHANGES as KINDS
from handlers.knowledge.parallelism import _check as check_example
from handlers.knowledge.parallelism import parallelism, signals
from handlers.model import Diagnosis
from handlers.target import parse_target
from handlers.view import Reader
from tests.test_fix_rules import _copy, _each

ROOT = Path(__file__).parents[1]
CORDONED = ROOT / "tests" / "scenarios" / "cordoned-gpu-nodes"


def _why(path: Path, target: str, ns: str | None = None) -> Diagnosis:
    return why_pending.run(Reader(load_snapshot(path)), parse_target(target, ns))


def _cordoned_target() -> tuple[str, str | None]:
    import yaml
    sc = yaml.safe_load((CORDONED / "scenario.yaml").read_text())
    return sc["target"], sc.get("namespace")


def _snapshot_of(scenario: Path) -> Path:
    import yaml
    sc = yaml.safe_load((scenario / "scenario.yaml").read_text())
    return (scenario / sc.get("snapshot", "cluster.yaml")).resolve()


def test_shape_and_order() -> None:
    target, ns = _cordoned_target()
    d = _why(_snapshot_of(CORDONED), target, ns)
    assert d.fits_if, d.details.get("fits_if_closest")
    out = d.to_json()["fits_if"]
    for c in out:
        assert set(c) == {"change", "summary", "nodes", "objects", "commands"}
        assert c["change"] in KINDS and c["summary"]
    assert out[0]["change"] == "uncordon"
    assert out[0]["commands"] == [f"kubectl uncordon {out[0]['nodes'][0]}"]
    assert out[0]["objects"] == [{"kind": "Node", "name": out[0]["nodes"][0],
                                  "namespace": None}]


def test_a_change_that_the_filters_still_reject_is_not_offered(tmp_path: Path) -> None:
    """Cordoned and tainted: uncordoning alone, or tolerating alone, does not let it fit."""
    def taint(node: dict[str, Any]) -> None:
        if node["spec"].get("unschedulable"):
            node["spec"].setdefault("taints", []).append(
                {"key": "maintenance", "value": "driver-upgrade", "effect": "NoSchedule"})
    target, ns = _cordoned_target()
    src = _snapshot_of(CORDONED)
    d = _why(_copy(src, tmp_path, _each("Node", taint)), target, ns)
    assert d.fits_if == []
    assert "still leaves" in d.details["fits_if_closest"]


def test_fits_if_leaves_the_warm_caches_alone() -> None:
    """What-if copies carry no uid: a second run sees the same remembered NodeInfo."""
    from handlers.scheduler import nodeinfo
    target, ns = _cordoned_target()
    reader = Reader(load_snapshot(_snapshot_of(CORDONED)))
    why_pending.run(reader, parse_target(target, ns))
    kept = nodeinfo._NODES.of(reader.memos)
    assert kept
    before = dict(kept)
    why_pending.run(reader, parse_target(target, ns))
    assert all(kept.get(k) is v for k, v in before.items())


def test_pending_rows_carry_fits_if() -> None:
    snap = ROOT / "examples" / "cordoned-gpu-nodes"
    d = pending_all.run(Reader(load_snapshot(snap)), None)
    rows = d.details["rows"]
    assert rows and all("fits_if" in r for r in rows)
    assert any(r["fits_if"] and r["fits_if"][0]["change"] == "uncordon" for r in rows)


# -- the workload's parallelism: fewer GPUs after freeing them, below it only as a last resort

SCENARIOS = ROOT / "tests" / "scenarios"
TORCHRUN = SCENARIOS / "torchrun-4gpu-fragmented-free-first"
TORCHRUN_POD = ("research/llama3-8b-sft-x7k2p", None)


def _trainer_command(command: list[str]) -> Callable[[dict[str, Any]], None]:
    def edit(pod: dict[str, Any]) -> None:
        for c in pod["spec"]["containers"]:
            if c["name"] == "trainer":
                c["command"] = command
    return edit


def _kinds(d: Diagnosis) -> list[str]:
    return [c.change for c in d.fits_if]


def test_signals_and_their_examples_load() -> None:
    sigs = signals()
    assert len({s.id for s in sigs}) == len(sigs)
    assert all(s.source.startswith("https://") for s in sigs)


def test_an_example_that_reads_otherwise_is_refused() -> None:
    with pytest.raises(ValueError, match="reads 4, expected 2"):
        check_example(signals(), {"command": "torchrun --nproc_per_node=4 x.py", "gpus": 2}, "t")


@pytest.mark.parametrize(("container", "controller", "gpus"), [
    ({"command": ["torchrun", "--nproc_per_node=4", "train.py"]}, None, 4),
    ({"command": ["sh", "-c", "python -m torch.distributed.run --nproc-per-node 2 t.py"]}, None, 2),
    ({"command": ["torchrun", "--nproc_per_node=gpu", "t.py"]}, None, None),
    ({"command": ["torchrun", "--nproc_per_node=$NGPU", "t.py"]}, None, 8),
    ({"env": [{"name": "PET_NPROC_PER_NODE", "value": "2"}]}, None, 2),
    ({"env": [{"name": "PET_NPROC_PER_NODE", "valueFrom": {"fieldRef": {}}}]}, None, 8),
    ({"image": "vllm/vllm-openai:v0.6.3", "args": ["--tensor-parallel-size", "2", "-pp", "2"]},
     None, 4),
    ({"args": ["--tensor-parallel-size", "2"]}, None, 8),  # no vLLM in sight: not its flag
    ({"env": [{"name": "NCCL_IB_HCA", "value": "mlx5"}]}, None, 8),
    ({}, {"kind": "PyTorchJob", "spec": {"nprocPerNode": "4"}}, 4),
    ({}, None, 8),
])
def test_what_the_workload_needs(container: dict[str, Any], controller: dict[str, Any] | None,
                                 gpus: int | None) -> None:
    got = parallelism({"name": "main", **container}, 8, "nvidia.com/gpu", controller)
    assert got.gpus == gpus
    assert "main" in got.evidence or controller is not None


def test_fewer_gpus_than_torchrun_starts_only_when_nothing_else_fits(tmp_path: Path) -> None:
    """exceeds-node-size: 16 GPUs asked, 8 per node. The only option left says its cost."""
    def torchrun(pod: dict[str, Any]) -> None:
        if pod["metadata"]["name"].startswith("pretrain-70b"):
            pod["spec"]["containers"][0]["command"] = ["torchrun", "--nproc_per_node=16", "p.py"]

    snap = _copy(_snapshot_of(SCENARIOS / "exceeds-node-size"), tmp_path, _each("Pod", torchrun))
    d = _why(snap, "job/pretrain-70b", "research")
    assert _kinds(d) == ["change-request"]
    summary = d.fits_if[0].summary
    assert "only because nothing else fits" in summary
    assert "torchrun --nproc_per_node=16" in summary
    assert "set --nproc_per_node to 8 as well" in summary


def test_fewer_gpus_are_ranked_after_freeing_them_when_torchrun_uses_fewer(
        tmp_path: Path) -> None:
    snap = _copy(TORCHRUN / "cluster", tmp_path, _each("Pod", _trainer_command(
        ["torchrun", "--nproc_per_node=1", "sft.py"])))
    d = _why(snap, *TORCHRUN_POD)
    assert _kinds(d) == ["free-gpus", "change-request", "add-nodes"]
    assert "uses 1 of the 4 it asks" in d.fits_if[1].summary


def test_a_launcher_that_takes_what_it_gets_may_get_fewer_after_freeing(tmp_path: Path) -> None:
    snap = _copy(TORCHRUN / "cluster", tmp_path, _each("Pod", _trainer_command(
        ["torchrun", "--nproc_per_node=gpu", "sft.py"])))
    d = _why(snap, *TORCHRUN_POD)
    assert _kinds(d) == ["free-gpus", "change-request", "add-nodes"]
    assert "runs on 1 GPU instead" in d.fits_if[1].summary


def test_no_fewer_gpus_for_the_torchrun_pod_that_fits_after_freeing() -> None:
    d = _why(TORCHRUN / "cluster", *TORCHRUN_POD)
    assert "change-request" not in _kinds(d)
    assert d.fits_if[0].nodes == ["dgx-a100-01"]


# -- repairing the GPU stack

K3S = SCENARIOS / "k3s-plugin-not-registered-only-gpu-node"


def test_a_repair_that_leaves_the_node_too_small_is_not_offered(tmp_path: Path) -> None:
    def one_gpu(node: dict[str, Any]) -> None:
        if node["metadata"]["name"] == "demeter-w1":
            node["metadata"]["labels"]["nvidia.com/gpu.count"] = "1"

    def two(pod: dict[str, Any]) -> None:
        if pod["metadata"]["name"] == "gpu-operator-test":
            pod["spec"]["containers"][0]["resources"] = {
                "limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}

    snap = _copy(K3S / "cluster", tmp_path, lambda items: _each("Pod", two)(
        _each("Node", one_gpu)(items)))
    d = _why(snap, "default/gpu-operator-test")
    assert "fix-gpu-stack" not in _kinds(d)
    assert "gives it 1 nvidia.com/gpu" in d.details["fits_if_closest"]


def test_a_mig_config_naming_another_profile_is_no_repair(tmp_path: Path) -> None:
    snap = _copy(SCENARIOS / "mig-profile-config-failed" / "cluster.yaml", tmp_path, _each(
        "Node", lambda n: n["metadata"]["labels"].update({"nvidia.com/mig.config": "all-1g.5gb"})))
    d = _why(snap, "research/mig-train-0")
    assert _kinds(d) == ["change-request"]


def test_a_node_whose_plugin_cannot_load_nvml_is_repaired_first(tmp_path: Path) -> None:
    """doctor_device_plugin_nvml with a 4-GPU pod: gpu-l4-0 is full, gpu-l4-1's plugin
    crash-loops on NVML (4 L4s by GFD)."""
    def gpu_pod(name: str, node: str | None) -> dict[str, Any]:
        four = {"limits": {"nvidia.com/gpu": "4"}}
        spec: dict[str, Any] = {"containers": [{"name": "main", "image": "vllm/vllm-openai",
                                                "resources": four}]}
        if node:
            spec["nodeName"] = node
        return {"kind": "Pod", "apiVersion": "v1", "spec": spec,
                "metadata": {"name": name, "namespace": "ml"},
                "status": {"phase": "Running" if node else "Pending"}}

    def pending(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*items, gpu_pod("serve-0", "gpu-l4-0"), gpu_pod("serve-1", None)]

    snap = _copy(SCENARIOS / "doctor_device_plugin_nvml" / "snapshot", tmp_path, pending)
    d = _why(snap, "ml/serve-1")
    assert _kinds(d) == ["fix-gpu-stack", "free-gpus", "add-nodes"]
    assert d.fits_if[0].nodes == ["gpu-l4-1"]
    assert "advertises its 4 GPUs" in d.fits_if[0].summary


# -- priority in the words of freeing GPUs

def test_freeing_gpus_says_when_the_holders_outrank_the_pod() -> None:
    d = _why(SCENARIOS / "priority-gap-inference-holds-gpus" / "cluster",
             "default/triton-inference-server-5b6c7f889c-f54c6")
    assert "they outrank the pod (priority 100000 > 0)" in d.fits_if[0].summary


def test_freeing_gpus_says_the_scheduler_would_do_it_but_for_never() -> None:
    d = _why(SCENARIOS / "low-priority-never-preempt" / "cluster", "batch/nightly-embeddings-5qj8d")
    assert d.fits_if[0].change == "free-gpus"
    assert "preemptionPolicy were PreemptLowerPriority, not Never" in d.fits_if[0].summary
