"""The watch cache's lean objects (``bot/live/lean.py``) give the findings of the full ones,
on every scenario, and share what replicas have in common."""

from __future__ import annotations

import builtins
import copy
import sys
from collections import defaultdict
from datetime import datetime
from typing import Any

import orjson
import pytest

from bot.live.lean import Leaner
from bot.snapshot import load_snapshot
from handlers.view import ClusterView, Obj
from tests.scenarios import Scenario, load_scenarios
from tests.test_scenarios import run_on

SCENARIOS = load_scenarios()


class LeanView:
    """A snapshot whose every object is a lean copy, as the watch cache would keep it (one
    copy per object, so identity-keyed memos behave as they do on the cache)."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.leaners: dict[str, Leaner] = defaultdict(Leaner)
        self.copies: dict[int, tuple[Obj, Obj]] = {}

    def _lean(self, obj: Obj) -> Obj:
        kept = self.copies.get(id(obj))
        if kept is None:
            kind = str(obj.get("kind") or "")
            kept = self.copies[id(obj)] = (obj, self.leaners[kind].lean(kind, copy.deepcopy(obj)))
        return kept[1]

    @property
    def source(self) -> str:
        return self.view.source

    def list(self, kind: str, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> builtins.list[Obj]:
        return [self._lean(o) for o in self.view.list(
            kind, namespace, label_selector=label_selector, field_selector=field_selector)]

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        obj = self.view.get(kind, name, namespace)
        return None if obj is None else self._lean(obj)

    def events(self, kind: str, name: str, namespace: str | None = None) -> builtins.list[Obj]:
        return [self._lean(e) for e in self.view.events(kind, name, namespace)]

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        return self.view.logs(namespace, pod, container)

    def now(self) -> datetime:
        return self.view.now()

    def __getattr__(self, name: str) -> Any:  # kinds, and what else a SnapshotView offers
        if name == "pods_on":
            raise AttributeError(name)  # answered through list(), leaned
        return getattr(self.view, name)


@pytest.mark.parametrize("s", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_lean_objects_give_the_findings_of_full_ones(s: Scenario) -> None:
    full = run_on(s, load_snapshot(s.snapshot))
    lean = run_on(s, LeanView(load_snapshot(s.snapshot)))
    assert [f.to_json() for f in lean.findings] == [f.to_json() for f in full.findings]
    assert [n.to_json() for n in lean.nodes] == [n.to_json() for n in full.nodes]
    assert lean.unchecked == full.unchecked


def _pod(name: str, node: str) -> Obj:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}",
                     "generateName": "train-", "labels": {"app": "train"},
                     "managedFields": [{"manager": "kubelet"}],
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"nodeName": node, "dnsPolicy": "ClusterFirst",
                 "containers": [{"name": "c", "image": "cuda:12.4",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                 "livenessProbe": {"exec": {"command": ["true"]}}}],
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1",
                   "containerStatuses": [{"name": "c", "containerID": "containerd://x",
                                          "state": {"running": {}}}]},
    }


def test_replicas_share_their_equal_parts_and_unread_fields_are_dropped() -> None:
    leaner = Leaner()
    # Built at run time: equal strings that are not yet one object.
    a, b = (leaner.lean("Pod", _pod(n, "".join(("gpu-", "1")))) for n in ("a", "b"))
    assert a["spec"]["containers"] is b["spec"]["containers"]
    assert a["spec"]["tolerations"] is b["spec"]["tolerations"]
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    # Short strings are one object however many pods carry them.
    assert a["spec"]["nodeName"] is b["spec"]["nodeName"]
    assert a["metadata"]["name"] == "a" and a["metadata"]["uid"] == "uid-a"
    for gone in ("managedFields", "generateName"):
        assert gone not in a["metadata"]
    assert a["metadata"]["annotations"] == {}
    assert "livenessProbe" not in a["spec"]["containers"][0]
    assert "dnsPolicy" not in a["spec"] and "podIP" not in a["status"]
    assert "containerID" not in a["status"]["containerStatuses"][0]
    assert a["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}


def test_unequal_subtrees_are_never_swapped_even_when_their_hashes_collide() -> None:
    leaner = Leaner()
    other = {"limits": {"nvidia.com/gpu": "8"}}
    leaner.table[hash(orjson.dumps(other))] = {"limits": {"nvidia.com/gpu": "1"}}
    assert leaner.share(other) is other


def test_a_changed_object_takes_the_equal_subtrees_of_its_cached_version() -> None:
    leaner = Leaner()
    was = leaner.lean("Pod", _pod("a", "gpu-1"))
    leaner.table.clear()  # only the previous version can supply them now
    restarted = _pod("a", "gpu-1")
    restarted["status"]["containerStatuses"][0]["restartCount"] = 1
    restarted["spec"]["tolerations"] = [{"operator": "Exists"}]
    now = leaner.lean("Pod", restarted, was)
    assert now["spec"]["containers"] is was["spec"]["containers"]
    assert now["metadata"]["labels"] is was["metadata"]["labels"]
    # What changed is the new object's own.
    assert now["spec"]["tolerations"] == [{"operator": "Exists"}] != was["spec"]["tolerations"]
    assert now["status"]["containerStatuses"][0]["restartCount"] == 1


def test_sweep_forgets_subtrees_that_no_kept_object_uses() -> None:
    leaner = Leaner()
    pods = [leaner.lean("Pod", _pod(str(i), f"gpu-{i}")) for i in range(3)]
    before = len(leaner.table)
    assert leaner.sweep() == 0
    shared = pods[0]["spec"]["containers"]
    del pods
    assert sys.getrefcount(shared) == 3  # `shared`, the table, getrefcount's argument
    del shared
    assert leaner.sweep() == before
    assert leaner.table == {}
