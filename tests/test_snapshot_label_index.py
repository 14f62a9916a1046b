"""A label selector over every object of a kind reads them through a label index: the
same objects, in the same order, as testing each object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.snapshot import load_snapshot
from handlers.kube.selectors import match_labels

LABELS: list[dict[str, str] | None] = [
    {"app": "a", "tier": "gpu"}, {"app": "b"}, None, {"app": "a"}, {"tier": "gpu"},
    {"app": "c", "tier": "cpu"}, {}, {"app": "b", "tier": "gpu"},
]


def _pod(i: int, labels: dict[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"p{(i * 7) % 23}", "namespace": ("x", "y", "z")[i % 3]}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c"}], "nodeName": f"n{i % 2}"}}


@pytest.mark.parametrize("selector", [
    "app=a", "app==b", "app in (a,c)", "app in (zz)", "app=a,tier=gpu", "tier=gpu,app in (b,c)",
    "app!=a", "app notin (a,b)", "tier", "!tier", "app=a,!tier", "tier,app in (a,b)",
])
def test_same_objects_in_the_same_order(tmp_path: Path, selector: str) -> None:
    pods = [_pod(i, LABELS[i % len(LABELS)]) for i in range(40)]
    (tmp_path / "pods.json").write_text(json.dumps({"kind": "PodList", "items": pods}))
    view = load_snapshot(tmp_path / "pods.json")
    every = view.list("Pod")
    want = [p for p in every if match_labels(selector, p["metadata"].get("labels"))]
    assert view.list("Pod", label_selector=selector) == want
    assert view.list("Pod", label_selector=selector) == want  # the index, once built
    for ns in ("x", "y"):
        assert view.list("Pod", ns, label_selector=selector) == [
            p for p in want if p["metadata"]["namespace"] == ns]
    on_n1 = view.list("Pod", label_selector=selector, field_selector="spec.nodeName=n1")
    assert on_n1 == [p for p in want if p["spec"]["nodeName"] == "n1"]
