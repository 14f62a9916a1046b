"""Fixes that work on the cluster at hand: one test per rule, each on the cluster with and
without what the rule reads, so that removing the rule fails a test."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bot.snapshot import load_snapshot
from handlers import doctor, why_pending
from handlers.chain.faults import hardware_faults
from handlers.model import Diagnosis, Finding, Fix
from handlers.pending.fitsif import fewest_holders
from handlers.target import parse_target
from handlers.view import Reader

ROOT = Path(__file__).parents[1]
SCENARIOS = ROOT / "tests" / "scenarios"
Edit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def _all(fix: Fix) -> str:
    """Everything a fix says (prose, commands, patch), to tell what it never mentions."""
    return "\n".join([fix.summary, *fix.commands, fix.patch.text if fix.patch else ""])


def _copy(src: Path, tmp: Path, edit: Edit | None = None) -> Path:
    """The snapshot ``src`` (a file or a directory with cluster.yaml) edited in ``tmp``."""
    if src.is_dir():
        dst = tmp / src.name
        shutil.copytree(src, dst)
        f = dst / "cluster.yaml"
    else:
        dst = f = tmp / src.name
        shutil.copy(src, f)
    if edit is not None:
        docs = [d for d in yaml.safe_load_all(f.read_text()) if d]
        items = [i for d in docs for i in (d["items"] if d.get("kind") == "List" else [d])]
        f.write_text(yaml.safe_dump_all(edit(items)))
    return dst


def _doctor(path: Path) -> Diagnosis:
    return doctor.run(Reader(load_snapshot(path)), None)


def _one(d: Diagnosis, code: str) -> Finding:
    hits = [f for f in d.findings if f.code == code]
    assert len(hits) == 1, d.codes
    return hits[0]


def _each(kind: str, fn: Callable[[dict[str, Any]], None]) -> Edit:
    def edit(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i in items:
            if i.get("kind") == kind:
                fn(i)
        return items
    return edit


# -- 1. an operator setting only for a component the operator manages ------------------------

CUDA = SCENARIOS / "doctor_device_plugin_crashloop_cuda" / "snapshot"


def test_driver_upgrade_through_the_clusterpolicy_when_the_operator_manages_it() -> None:
    fix = _all(_one(_doctor(CUDA), "CUDA_DRIVER_MISMATCH").fix)
    assert "kubectl patch clusterpolicy cluster-policy" in fix
    assert "<newer driver>" not in fix


def test_no_clusterpolicy_patch_for_a_driver_installed_on_the_host(tmp_path: Path) -> None:
    def host_driver(node: dict[str, Any]) -> None:
        node["metadata"]["labels"]["nvidia.com/gpu.deploy.driver"] = "pre-installed"
    fix = _all(_one(_doctor(_copy(CUDA, tmp_path, _each("Node", host_driver))),
               "CUDA_DRIVER_MISMATCH").fix)
    assert "clusterpolicy" not in fix.lower()
    assert "nvidia.com/gpu.deploy.driver=pre-installed" in fix


def test_no_clusterpolicy_patch_when_the_operator_disables_the_driver(tmp_path: Path) -> None:
    def disabled(cp: dict[str, Any]) -> None:
        cp["spec"].setdefault("driver", {})["enabled"] = False
    fix = _all(_one(_doctor(_copy(CUDA, tmp_path, _each("ClusterPolicy", disabled))),
               "CUDA_DRIVER_MISMATCH").fix)
    assert "kubectl patch clusterpolicy" not in fix
    assert "spec.driver.enabled=false" in fix


def test_no_operator_setting_for_a_helm_installed_plugin() -> None:
    d = _doctor(SCENARIOS / "plugin-rollout-bad-tag" / "cluster.yaml")
    fix = _all(_one(d, "DEVICE_PLUGIN_IMAGE_PULL").fix)
    assert "kubectl patch clusterpolicy" not in fix
    assert "Point the DaemonSet at a published tag" in fix


# -- 2. versions from the data ----------------------------------------------------------------


def test_the_driver_to_target_is_one_another_node_runs(tmp_path: Path) -> None:
    fix = _all(_one(_doctor(CUDA), "CUDA_DRIVER_MISMATCH").fix)
    # gpu-a100-0 runs 550.54.15: that major is what the selector names, that version the patch.
    assert "nvidia.com/cuda.driver.major=550" in fix and '"version":"550.54.15"' in fix

    def drop_driver_labels(node: dict[str, Any]) -> None:
        if node["metadata"]["name"] != "gpu-a100-1":
            for k in [k for k in node["metadata"]["labels"] if k.startswith("nvidia.com/cuda.")]:
                del node["metadata"]["labels"][k]
    fix = _all(_one(_doctor(_copy(CUDA, tmp_path, _each("Node", drop_driver_labels))),
               "CUDA_DRIVER_MISMATCH").fix)
    assert "nvidia.com/cuda.driver.major" not in fix  # no node shows a newer driver
    assert '"version":"550' not in fix


# -- 3. the least disruptive option, named -----------------------------------------------------


def test_fewest_then_smallest_holders() -> None:
    hs = [("ml/train", 4.0), ("nb/a", 2.0), ("nb/b", 1.0)]
    assert fewest_holders(hs, 2) == [("nb/a", 2.0)]
    assert fewest_holders(hs, 3) == [("ml/train", 4.0)]
    assert fewest_holders(hs, 5) == [("ml/train", 4.0), ("nb/b", 1.0)]
    assert fewest_holders(hs, 8) is None
    assert fewest_holders(hs, 0) == []


def test_fragmentation_fix_names_the_node_and_the_pods_to_move() -> None:
    reader = Reader(load_snapshot(ROOT / "examples" / "gpu-fragmentation"))
    d = why_pending.run(reader, parse_target("ml-team/llm-sft-5f8d7c6b9-wq2vx"))
    fix = _all(_one(d, "GPU_FRAGMENTATION").fix)
    # Each node has a 4-GPU finetune and a 2-GPU notebook; moving the notebook is enough.
    assert "kubectl -n notebooks delete pod kf-notebook-ana-0" in fix
    assert "finetune" not in fix
    assert "kubectl cordon dgx-a100-01" in fix


# -- 4. a recent rollout: what changed, when, and the rollback ---------------------------------

ROLLOUT = SCENARIOS / "plugin-rollout-bad-tag" / "cluster.yaml"


def test_a_recent_rollout_leads_the_fix_with_its_rollback() -> None:
    f = _one(_doctor(ROLLOUT), "DEVICE_PLUGIN_IMAGE_PULL")
    assert f.fix.summary.startswith("Roll back")
    assert f.fix.commands[0] == ("kubectl -n kube-system rollout undo "
                                 "daemonset/nvdp-nvidia-device-plugin --to-revision=4")
    assert any("revision 5" in e and "v0.17.0 -> nvcr.io/nvidia/k8s-device-plugin:v0.17.10"
               in e for e in f.evidence)


def test_without_revisions_in_the_data_the_rollout_is_not_checked(tmp_path: Path) -> None:
    def no_revisions(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [i for i in items if i.get("kind") != "ControllerRevision"]
    d = _doctor(_copy(ROLLOUT, tmp_path, no_revisions))
    assert "rollout undo" not in _all(_one(d, "DEVICE_PLUGIN_IMAGE_PULL").fix)
    assert any(u.startswith("ControllerRevision") for u in d.unchecked)


def test_an_operator_owned_daemonset_is_rolled_back_through_its_clusterpolicy(
        tmp_path: Path) -> None:
    def owned(ds: dict[str, Any]) -> None:
        ds["metadata"]["ownerReferences"] = [{"apiVersion": "nvidia.com/v1",
                                              "kind": "ClusterPolicy", "name": "cluster-policy",
                                              "uid": "cp-1", "controller": True}]
    fix = _all(_one(_doctor(_copy(ROLLOUT, tmp_path, _each("DaemonSet", owned))),
               "DEVICE_PLUGIN_IMAGE_PULL").fix)
    assert "--to-revision" not in fix and "ClusterPolicy cluster-policy" in fix


def test_an_old_rollout_is_not_blamed(tmp_path: Path) -> None:
    def old(cr: dict[str, Any]) -> None:
        cr["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    fix = _all(_one(_doctor(_copy(ROLLOUT, tmp_path, _each("ControllerRevision", old))),
               "DEVICE_PLUGIN_IMAGE_PULL").fix)
    assert "rollout undo" not in fix


# -- 5. GPU hardware faults: drain and repair, never a restart -----------------------------------


def test_hardware_xids_are_told_from_the_others() -> None:
    assert hardware_faults(["XidCriticalError: Xid=79 on Device=GPU-1; marking device as "
                            "unhealthy."]) == ["Xid 79 (GPU has fallen off the bus)"]
    assert hardware_faults(["NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE"]) == [
        "Xid 48 (Double Bit ECC Error)"]
    # NVLink and contained ECC errors need a reset too (the table says hardware).
    assert hardware_faults(["NVRM: Xid (PCI:0000:3b:00): 74, pid=1, NVLink"]) == [
        "Xid 74 (NVLink Error)"]
    assert hardware_faults(["NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception"]) == []
    assert hardware_faults(["Row remapping failed on GPU 0"]) == ["row remapping failure"]


def test_a_gpu_fallen_off_the_bus_gets_drain_and_repair_and_no_restart() -> None:
    f = _one(_doctor(SCENARIOS / "doctor_gpu_unhealthy" / "snapshot"), "GPU_UNHEALTHY")
    assert f.actions == ()
    assert "kubectl drain gpu-a100-1 --ignore-daemonsets --delete-emptydir-data" in f.fix.commands
    assert not [c for c in f.fix.commands if "delete pod" in c]


def test_an_application_xid_still_offers_the_plugin_restart(tmp_path: Path) -> None:
    src = SCENARIOS / "doctor_gpu_unhealthy" / "snapshot"
    dst = _copy(src, tmp_path)
    logs = dst / "logs.txt"
    logs.write_text(logs.read_text().replace("Xid=79", "Xid=13"))
    f = _one(_doctor(dst), "GPU_UNHEALTHY")
    assert f.actions == (("restart-device-plugin", "gpu-a100-1"),)


DEPLOY = SCENARIOS / "deployment-rollout-dropped-toleration" / "cluster.yaml"


def test_a_deployment_rollout_is_rolled_back_when_the_old_template_fits() -> None:
    d = why_pending.run(Reader(load_snapshot(DEPLOY)),
                        parse_target("deployment/segformer", "cv-team"))
    f = _one(d, "TAINT_NOT_TOLERATED")
    assert f.fix.summary.startswith("Roll back")
    assert f.fix.commands[0] == ("kubectl -n cv-team rollout undo deployment/segformer "
                                 "--to-revision=1")
    assert any("tolerations changed" in e for e in f.evidence)


def test_no_rollback_when_the_old_template_would_not_fit_either(tmp_path: Path) -> None:
    def same_old(rs: dict[str, Any]) -> None:
        rs["spec"]["template"]["spec"].pop("tolerations", None)
    path = _copy(DEPLOY, tmp_path, _each("ReplicaSet", same_old))
    d = why_pending.run(Reader(load_snapshot(path)),
                        parse_target("deployment/segformer", "cv-team"))
    assert "rollout undo" not in _all(_one(d, "TAINT_NOT_TOLERATED").fix)
    assert all(c.change != "other" for c in d.fits_if)
