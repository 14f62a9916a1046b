"""The plugin's runtime hints are dropped when a twin node shows the runtime setup works."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import yaml

from bot.snapshot import load_snapshot
from handlers import doctor
from handlers.view import Reader

SCEN = Path(__file__).parent / "scenarios" / "doctor_device_plugin_nvml" / "snapshot"


def _with_ready_toolkit(tmp: Path) -> Path:
    doc = yaml.safe_load((SCEN / "cluster.yaml").read_text())
    plugin = next(o for o in doc["items"] if o["kind"] == "Pod"
                  and o["spec"].get("nodeName") == "gpu-l4-1"
                  and "device-plugin" in o["metadata"]["name"])
    toolkit = copy.deepcopy(plugin)
    toolkit["metadata"].update(name="nvidia-container-toolkit-daemonset-x1",
                               namespace="gpu-operator", uid="8a1d3c52-0f5e-4e4b-9d38-6c1f7d2e9a10",
                               labels={"app": "nvidia-container-toolkit-daemonset"})
    toolkit["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                               "name": "nvidia-container-toolkit-daemonset",
                                               "uid": "c3", "controller": True}]
    toolkit["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                         "containerStatuses": [{"name": "toolkit", "ready": True,
                                                "restartCount": 0,
                                                "state": {"running": {}}}]}
    doc["items"].append(toolkit)
    (tmp / "cluster.yaml").write_text(yaml.safe_dump(doc))
    shutil.copy(SCEN / "logs.txt", tmp / "logs.txt")
    return tmp


def test_twin_node_and_ready_toolkit_clear_the_runtime(tmp_path: Path) -> None:
    diag = doctor.run(Reader(load_snapshot(_with_ready_toolkit(tmp_path))), None)
    codes = [f.code for f in diag.findings]
    assert "CONTAINER_RUNTIME_NOT_CONFIGURED" not in codes
    assert "NVML_INIT_FAILED" in codes
    crash = next(f for f in diag.findings if f.code == "DEVICE_PLUGIN_CRASHLOOP")
    assert any("run Ready on gpu-l4-0" in e and "not the cause" in e for e in crash.evidence)


def test_without_the_toolkit_a_twin_proves_nothing() -> None:
    diag = doctor.run(Reader(load_snapshot(SCEN)), None)
    assert "CONTAINER_RUNTIME_NOT_CONFIGURED" in [f.code for f in diag.findings]
