"""Regression tests, each from the smallest input of a failure class issue 14 found: bad
fields are skipped and named, parsing is bounded, special files are refused; the CLI
answers in one line and exits 1 only when nothing usable remains."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.snapshot import load_snapshot
from handlers.kube.shape import MAX_TEXT, misfit
from handlers.view import Reader

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}}}


def pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c"}], **spec}}


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def snapshot(tmp_path: Path, *objs: Any, name: str = "s.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [NODE, *objs]}))
    return path


@pytest.mark.parametrize(("obj", "field"), [
    (pod(containers="abc"), "spec.containers: not a list (a string)"),
    (pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "1.5x"}}}]),
     "spec.containers[0].resources.requests.cpu: not a quantity ('1.5x')"),
    (pod(containers=[{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1e400"}}}]),
     "resources.limits.nvidia.com/gpu: quantity out of range ('1e400')"),
    (pod(containers=[{"name": "c", "resources": {"limits": {"memory": "9Ei" + "0" * 30}}}]),
     "not a quantity"),
    (pod(tolerations=[{"key": 1}]), "spec.tolerations[0].key: not a string (a number)"),
    (pod(priority=10**30), "spec.priority: not a whole number"),
    (pod(priority=2**63 + 1), "spec.priority: number out of range"),
    ({**pod(), "metadata": {"name": "p", "namespace": ["x"]}},
     "metadata.namespace: not a string (a list)"),
    ({**pod(), "metadata": {"name": "p", "labels": {"a": None}}}, "metadata.labels.a"),
])
def test_an_object_that_does_not_fit_is_skipped_and_named(tmp_path: Path, obj: dict[str, Any],
                                                          field: str) -> None:
    view = load_snapshot(snapshot(tmp_path, obj))
    assert view.list("Pod") == []
    [problem] = [p for p in view.problems if "Pod" in str(p)]
    assert "s.json" in str(problem) and "item 2" in str(problem) and field in str(problem)
    code, _out, err = run("why-pending", "p", "--snapshot", str(tmp_path / "s.json"))
    assert code == 1 and err.count("\n") == 1 and "not found" in err


def test_nulls_are_unset_fields(tmp_path: Path) -> None:
    obj = {**pod(), "status": None, "spec": {"containers": [{"name": "c", "env": None}],
                                             "nodeSelector": None}}
    view = load_snapshot(snapshot(tmp_path, obj))
    [p] = view.list("Pod")
    assert "status" not in p and "nodeSelector" not in p["spec"]
    assert run("why-pending", "p", "--snapshot", str(tmp_path / "s.json"))[0] == 0


def test_nothing_usable_is_exit_1_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(pod(containers="abc")))
    code, out, err = run("nodes", "--snapshot", str(path))
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "spec.containers: not a list" in err


def test_long_messages_are_cut(tmp_path: Path) -> None:
    event = {"apiVersion": "v1", "kind": "Event",
             "metadata": {"name": "e", "namespace": "default"},
             "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
             "reason": "FailedScheduling", "message": "0/1 nodes " + "x" * 100_000}
    view = load_snapshot(snapshot(tmp_path, pod(), event))
    [ev] = view.events("Pod", "p", "default")
    assert len(ev["message"]) < MAX_TEXT + 10


def test_long_log_lines_are_cut(tmp_path: Path) -> None:
    logs = tmp_path / "default" / "p"
    logs.mkdir(parents=True)
    (logs / "logs.txt").write_text("ok\n" + "y" * 1_000_000 + "\nend\n")
    (tmp_path / "default" / "pods.json").write_text(json.dumps({"items": [pod()]}))
    (tmp_path / "nodes.json").write_text(json.dumps({"items": [NODE]}))
    text = Reader(load_snapshot(tmp_path)).logs("default", "p")
    assert text is not None and "end" in text
    assert max(len(line) for line in text.splitlines()) < MAX_TEXT + 10


# -- bounded parsing -----------------------------------------------------------------------------


def test_json_nested_deeper_than_the_parsers_go(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"kind": "List", "items": [' + json.dumps(NODE) + ","
                    + "[" * 100_000 + "]" * 100_000 + "]}")
    code, out, _err = run("nodes", "--snapshot", str(path))
    assert code == 0 and "nested too deep" in out
    assert [n["metadata"]["name"] for n in load_snapshot(path).list("Node")] == ["n1"]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_a_4301_digit_integer(tmp_path: Path, fmt: str) -> None:
    big = "1" * 4301
    path = tmp_path / f"big.{fmt}"
    if fmt == "json":
        path.write_text('{"kind": "List", "items": [' + json.dumps(NODE)
                        + ', {"kind": "Pod", "x": ' + big + "}]}")
    else:
        path.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n"
                        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nx: {big}\n")
    code, out, _err = run("nodes", "--snapshot", str(path))
    assert code == 0 and "a number too long to read" in out
    assert [n["metadata"]["name"] for n in load_snapshot(path).list("Node")] == ["n1"]


def test_a_yaml_anchor_bomb_is_refused_quickly(tmp_path: Path) -> None:
    lines = ["apiVersion: v1", "kind: Node", "metadata: {name: n1}", "spec:",
             "  a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert len(path.read_bytes()) < 1000
    started = time.monotonic()
    code, _out, err = run("nodes", "--snapshot", str(path))
    assert time.monotonic() - started < 5
    assert code == 1 and "anchor bomb" in err


def test_yaml_anchors_within_the_budget_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "anchors.yaml"
    path.write_text("kind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: "
                    "{name: n1, labels: &l {a: b}}}\n- {apiVersion: v1, kind: Node, metadata: "
                    "{name: n2, labels: *l}}\n")
    assert {n["metadata"]["name"] for n in load_snapshot(path).list("Node")} == {"n1", "n2"}


def test_a_truncated_yaml_list_keeps_its_complete_items(tmp_path: Path) -> None:
    items = "".join(f"- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n{i}\n"
                    for i in range(3))
    text = "apiVersion: v1\nitems:\n" + items + "- apiVersion: v1\n  kind: Node\n  metadata:\n"
    text += '    name: "n3'  # cut in the middle of the fourth item
    path = tmp_path / "cut.yaml"
    path.write_text(text)
    view = load_snapshot(path)
    assert [n["metadata"]["name"] for n in view.list("Node")] == ["n0", "n1", "n2"]
    assert any("kept the 3 complete list items" in str(p) for p in view.problems)


def test_a_broken_yaml_item_costs_only_itself(tmp_path: Path) -> None:
    text = ("apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: a}\n"
            "- apiVersion: v1\n  kind: Node\n  metadata: {name: [b}\n"
            "- apiVersion: v1\n  kind: Node\n  metadata: {name: c}\nkind: List\n")
    path = tmp_path / "mid.yaml"
    path.write_text(text)
    assert [n["metadata"]["name"] for n in load_snapshot(path).list("Node")] == ["a", "c"]


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    code, _, err = run("nodes", "--snapshot", str(fifo))
    assert time.monotonic() - started < 5
    assert code == 1 and "not a regular file (a FIFO)" in err


@pytest.mark.parametrize("path", ["/dev/zero", "/proc/self/status", "/sys/kernel"])
def test_devices_proc_and_sys_are_refused(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist here")
    code, _, err = run("nodes", "--snapshot", path)
    assert code == 1 and "(the running system), not a snapshot" in err
    assert err.count("\n") == 1


def test_a_fifo_inside_a_snapshot_directory_is_skipped(tmp_path: Path) -> None:
    snapshot(tmp_path, pod())
    os.mkfifo(tmp_path / "pods.json.fifo")
    assert run("nodes", "--snapshot", str(tmp_path))[0] == 0


def test_shape_check_is_fast_for_a_fitting_pod() -> None:
    obj = pod(tolerations=[{"key": "k", "operator": "Exists"}] * 5)
    started = time.perf_counter()
    for _ in range(2000):
        assert misfit(obj) is None
    assert time.perf_counter() - started < 2.0
