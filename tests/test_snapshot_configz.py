"""A snapshot carries a node's kubelet configuration as its /configz answer, named after the
node (README, Snapshots): the loader keeps it for ``handlers/kubeletconfig.py``."""

from __future__ import annotations

import json
from pathlib import Path

from bot.slack.pool import Deadline
from bot.slack.reads import GuardedView
from bot.snapshot import load_snapshot

NODE = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "gpu-1.example"}}
CONFIGZ = {"kubeletconfig": {"topologyManagerPolicy": "single-numa-node",
                             "cpuManagerPolicy": "static"}}


def _bundle(tmp_path: Path) -> Path:
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "List", "items": [NODE]}))
    return tmp_path


def test_configz_dir_names_the_node(tmp_path: Path) -> None:
    (_bundle(tmp_path) / "configz").mkdir()
    (tmp_path / "configz" / "gpu-1.example.json").write_text(json.dumps(CONFIGZ))
    view = load_snapshot(tmp_path)
    got = view.kubelet_configz("gpu-1.example")
    assert got is not None and got[0] == CONFIGZ["kubeletconfig"]
    assert got[1].endswith("configz/gpu-1.example.json")
    assert view.kubelet_configz("gpu-2") is None
    assert view.problems == []


def test_the_docs_recipe_with_kind_and_its_file_name(tmp_path: Path) -> None:
    # kubectl proxy + jq '.kubeletconfig|.kind="KubeletConfiguration"|.apiVersion=...'
    doc = {**CONFIGZ["kubeletconfig"], "kind": "KubeletConfiguration",
           "apiVersion": "kubelet.config.k8s.io/v1beta1"}
    (_bundle(tmp_path) / "kubelet_configz_gpu-1.example").write_text(json.dumps(doc))
    got = load_snapshot(tmp_path).kubelet_configz("gpu-1.example")
    assert got is not None and got[0] == CONFIGZ["kubeletconfig"]


def test_a_configz_that_names_no_node_is_a_problem_not_a_guess(tmp_path: Path) -> None:
    (_bundle(tmp_path) / "kubelet.json").write_text(json.dumps(CONFIGZ))
    view = load_snapshot(tmp_path)
    assert view.kubelet_configz("gpu-1.example") is None
    assert [p.path.endswith("kubelet.json") for p in view.problems] == [True]
    assert "configz/<node>.json" in view.problems[0].message


def test_the_bots_guarded_view_passes_the_configz_on(tmp_path: Path) -> None:
    (_bundle(tmp_path) / "configz").mkdir()
    (tmp_path / "configz" / "gpu-1.example.json").write_text(json.dumps(CONFIGZ))
    deadline = Deadline(10.0)
    deadline.start()
    got = GuardedView(load_snapshot(tmp_path), deadline).kubelet_configz("gpu-1.example")
    assert got is not None and got[0] == CONFIGZ["kubeletconfig"]
