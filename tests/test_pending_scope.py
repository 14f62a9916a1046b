"""why-pending reads only the GPU nodes' pods on a large cluster, and that never hides an
existing pod's required anti-affinity (symmetric, kube-scheduler's InterPodAffinity filter):
the scheduler naming the filter, or a pod that would fit, makes it read every pod."""

from __future__ import annotations

import builtins
import copy
from typing import Any

import pytest

from bot.snapshot import load_snapshot
from handlers import why_pending
from handlers.pending.context import PendingContext
from handlers.target import parse_target
from handlers.view import Obj, Reader
from tests.pending_ctx import SCENARIOS

SCENARIO = SCENARIOS / "existing-pod-zone-anti-affinity-scoped-read" / "cluster.yaml"
TARGET = "dynamo/nemotron3-ultra-decode-0"
FRONTEND = "nemotron3-ultra-frontend-7c9d8b6f5-qx2lm"


class RecordingView:
    """A snapshot view that records pod lists and has no bulk ``pods_on`` (a cold read)."""

    def __init__(self, objects: list[Obj]) -> None:
        self.objects = objects
        # (namespace, label selector, field selector) of each Pod list
        self.pod_lists: list[tuple[str | None, str | None, str | None]] = []

    @property
    def source(self) -> str:
        return "test"

    def list(self, kind: str, namespace: str | None = None, *,
             label_selector: str | None = None,
             field_selector: str | None = None) -> builtins.list[Obj]:
        assert label_selector is None or kind != "Pod" or field_selector is None
        if kind == "Pod":
            self.pod_lists.append((namespace, label_selector, field_selector))
        out = [o for o in self.objects if o["kind"] == kind
               and (namespace is None or o["metadata"].get("namespace") == namespace)]
        if field_selector and field_selector.startswith("spec.nodeName="):
            node = field_selector.removeprefix("spec.nodeName=")
            out = [o for o in out if o.get("spec", {}).get("nodeName") == node]
        elif field_selector:  # status.phase!=... : every pod here is active
            out = [o for o in out if o.get("status", {}).get("phase") not in
                   ("Succeeded", "Failed")]
        if label_selector:
            want = dict(kv.split("=", 1) for kv in label_selector.split(",") if "=" in kv)
            out = [o for o in out if all(
                o["metadata"].get("labels", {}).get(k) == v for k, v in want.items())]
        return out

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        return next((o for o in self.objects if o["kind"] == kind
                     and o["metadata"]["name"] == name
                     and o["metadata"].get("namespace") == namespace), None)

    def events(self, kind: str, name: str, namespace: str | None = None) -> builtins.list[Obj]:
        return [o for o in self.objects if o["kind"] == "Event"
                and o["involvedObject"]["name"] == name]

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        return None

    def now(self) -> Any:
        return load_snapshot(SCENARIO).now()

    @property
    def whole_cluster_pod_lists(self) -> int:
        """Lists of every pod of every namespace (no label or node selector)."""
        return sum(1 for ns, labels, fields in self.pod_lists if ns is None and not labels
                   and not (fields or "").startswith("spec.nodeName="))


def _objects(*, events: bool = True, condition: bool = True,
             frontend_anti_affinity: bool = True, gpus: str = "1") -> list[Obj]:
    view = load_snapshot(SCENARIO)
    objs = [copy.deepcopy(o) for kind in ("Node", "Pod", "Event") for o in view.list(kind)]
    for o in objs:
        name = o["metadata"]["name"]
        if name == "nemotron3-ultra-decode-0" and o["kind"] == "Pod":
            res = o["spec"]["containers"][0]["resources"]
            res["requests"]["nvidia.com/gpu"] = res["limits"]["nvidia.com/gpu"] = gpus
            if not condition:
                o["status"].pop("conditions")
        if name == FRONTEND and not frontend_anti_affinity:
            o["spec"].pop("affinity")
    return [o for o in objs if events or o["kind"] != "Event"]


def _context(objs: list[Obj]) -> tuple[PendingContext, RecordingView]:
    view = RecordingView(objs)
    reader = Reader(view)
    pod = reader.get("Pod", "nemotron3-ultra-decode-0", "dynamo")
    assert pod is not None
    ctx = PendingContext(reader, pod, True, "dynamo")
    ctx.events = reader.events("Pod", "nemotron3-ultra-decode-0", "dynamo")
    return ctx, view


# kube-scheduler's words for the InterPodAffinity filter, by release: 1.5-1.9 predicate
# names, pkg/scheduler/algorithm/predicates/error.go (1.10-1.18), and
# pkg/scheduler/framework/plugins/interpodaffinity/filtering.go (1.19+).
@pytest.mark.parametrize("message", [
    "0/8 nodes are available: 2 node(s) didn't satisfy existing pods anti-affinity rules, "
    "6 Insufficient nvidia.com/gpu.",
    "0/8 nodes are available: 2 node(s) didn't match pod affinity/anti-affinity, 2 node(s) "
    "didn't satisfy existing pods anti-affinity rules, 6 Insufficient nvidia.com/gpu.",
    "0/8 nodes are available: 2 node(s) didn't match pod anti-affinity rules, 6 Insufficient "
    "nvidia.com/gpu. preemption: 0/8 nodes are available: 8 No preemption victims found for "
    "incoming pod.",
    "0/8 nodes are available: 2 node(s) didn't match pod affinity rules, 6 Insufficient "
    "nvidia.com/gpu.",
    "0/8 nodes are available: 2 MatchInterPodAffinity, 6 PodFitsResources.",
])
def test_scheduler_naming_inter_pod_affinity_reads_every_pod(message: str) -> None:
    objs = _objects(condition=False)
    for o in objs:
        if o["kind"] == "Event":
            o["message"] = message
    ctx, view = _context(objs)
    assert ctx.scheduler_named_pod_affinity
    assert ctx.pod_scope is None
    ctx.pods_by_node  # noqa: B018 - the read itself is under test
    assert view.whole_cluster_pod_lists == 1


def test_gpu_shortage_alone_keeps_the_scoped_read() -> None:
    objs = _objects(condition=False, frontend_anti_affinity=False, gpus="2")
    for o in objs:
        if o["kind"] == "Event":
            o["message"] = ("0/8 nodes are available: 2 Insufficient nvidia.com/gpu, 6 "
                            "Insufficient nvidia.com/gpu.")
    ctx, view = _context(objs)
    assert not ctx.scheduler_named_pod_affinity
    assert ctx.pod_scope is not None and len(ctx.pod_scope) == 2
    ctx.node_fits  # noqa: B018
    assert view.whole_cluster_pod_lists == 0


def test_without_any_scheduler_word_a_fit_is_checked_against_every_pod() -> None:
    """No event, no condition: the scoped read says the pod fits on both GPU nodes, so
    placement reads every pod before saying so, and finds the frontend's zone rule."""
    view = RecordingView(_objects(events=False, condition=False))
    diag = why_pending.run(Reader(view), parse_target(TARGET))
    assert diag.codes[0] == "POD_AFFINITY_MISMATCH"
    assert "ALL_CLEAR" not in diag.codes
    mismatch = next(f for f in diag.findings if f.code == "POD_AFFINITY_MISMATCH")
    assert any(FRONTEND in e and "topology.kubernetes.io/zone=us-east-2a" in e
               for e in mismatch.evidence)
    assert view.whole_cluster_pod_lists == 1
    assert not any("their pods were not read" in u for u in diag.unchecked)


def test_answer_equals_a_full_read_with_and_without_events() -> None:
    for events in (True, False):
        objs = _objects(events=events, condition=events)
        scoped = why_pending.run(Reader(RecordingView(objs)), parse_target(TARGET))
        ctx, _ = _context(objs)
        ctx.read_every_pod()
        assert ctx.pod_scope is None
        full = [f.node for f in ctx.node_fits if not f.fits]
        assert scoped.codes == ["POD_AFFINITY_MISMATCH"]
        assert [v.node for v in scoped.nodes if not v.fits] == sorted(
            full, key=lambda n: (n not in ctx.gpu_like, n))


def test_scoped_answer_that_fits_nowhere_says_what_it_did_not_read() -> None:
    """Two GPUs on one-GPU nodes: no fit, no affinity words; the scope stays, and the
    diagnosis lists the CPU nodes' pods as not read."""
    objs = _objects(events=False, condition=False, gpus="2")
    view = RecordingView(objs)
    diag = why_pending.run(Reader(view), parse_target(TARGET))
    assert "REQUEST_EXCEEDS_NODE_SIZE" in diag.codes
    assert view.whole_cluster_pod_lists == 0
    note = [u for u in diag.unchecked if "their pods were not read" in u]
    assert note and "6 nodes without GPUs" in note[0]
