"""A dump's ReplicaSet and Deployment lists are read when a diagnosis first asks for those
kinds: loading leaves them, what they hold is the same, their problems are said when they
are read, and the snapshot's "now" does not depend on whether they were."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from bot.snapshot import load_snapshot
from handlers.view import names


def _rs(name: str, created: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ml", "creationTimestamp": created},
            "spec": {"replicas": 1}, "status": {"replicas": 1}}


def _pod(name: str, created: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ml", "creationTimestamp": created},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running"}}


def _dump(root: Path, rs_text: str | None = None) -> Path:
    ns = root / "ml"
    ns.mkdir(parents=True)
    (ns / "pods.json").write_text(json.dumps(
        {"kind": "PodList", "apiVersion": "v1", "items": [_pod("p", "2024-05-01T10:00:00Z")]},
        indent=4))
    (ns / "replicasets.json").write_text(rs_text if rs_text is not None else json.dumps(
        {"kind": "ReplicaSetList", "apiVersion": "apps/v1",
         "items": [_rs("a", "2024-05-02T10:00:00Z"), _rs("b", "2024-04-01T10:00:00Z")]},
        indent=4))
    return root


def test_replicasets_are_read_on_first_ask(tmp_path: Path) -> None:
    view = load_snapshot(_dump(tmp_path))
    rs_file = str(tmp_path / "ml" / "replicasets.json")
    assert "ReplicaSet" in view.kinds and rs_file not in view.files
    assert "ReplicaSet" not in view._raw
    assert names(view.list("ReplicaSet", "ml")) == ["a", "b"]
    assert view.get("ReplicaSet", "b", "ml") is not None
    assert rs_file in view.files and view.problems == []


def test_now_is_the_same_whether_or_not_they_were_read(tmp_path: Path) -> None:
    first = load_snapshot(_dump(tmp_path / "one"))
    assert str(first.now()) == "2024-05-01 10:00:00+00:00"  # the RS's 05-02 does not count
    second = load_snapshot(_dump(tmp_path / "two"))
    second.list("ReplicaSet")
    assert second.now() == first.now()


def test_a_broken_list_is_said_when_read(tmp_path: Path) -> None:
    text = json.dumps({"kind": "ReplicaSetList", "apiVersion": "apps/v1",
                       "items": [_rs("a", "2024-05-02T10:00:00Z")]}, indent=4)
    view = load_snapshot(_dump(tmp_path, text[: len(text) // 2]))
    assert view.problems == []
    view.list("ReplicaSet")
    assert [p.path for p in view.problems] == [str(tmp_path / "ml" / "replicasets.json")]


def test_a_file_named_replicasets_holding_pods_is_read_at_once(tmp_path: Path) -> None:
    pods = json.dumps({"kind": "PodList", "apiVersion": "v1",
                       "items": [_pod("q", "2024-05-01T09:00:00Z")]}, indent=4)
    view = load_snapshot(_dump(tmp_path, pods))
    assert sorted(names(view.list("Pod", "ml"))) == ["p", "q"]


def test_threads_asking_at_once_all_see_every_object(tmp_path: Path) -> None:
    view = load_snapshot(_dump(tmp_path))
    seen: list[list[str]] = []
    barrier = threading.Barrier(4)

    def ask() -> None:
        barrier.wait()
        seen.append(names(view.list("ReplicaSet")))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [["a", "b"]] * 4
