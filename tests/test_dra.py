"""DRA objects in every resource.k8s.io version, and the CEL selectors drivers use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bot.live import open_live_view
from bot.slack.blocks import Renderer, validate
from bot.snapshot import load_snapshot
from handlers import cel, dra, nodes, why_pending
from handlers.dra import Device
from handlers.target import parse_target
from handlers.view import Reader, ViewError
from tests.fake_kube import FakeKube

SCENARIOS = Path(__file__).parent / "scenarios"

A100 = Device("gpu.nvidia.com", "node-1", "gpu-0", "node-1",
              {"type": "gpu", "productName": "NVIDIA A100-SXM4-40GB", "driverVersion": "570.124.6",
               "example.com/rack": "r7"},
              {"memory": 40 * 2**30})


@pytest.mark.parametrize(("expr", "want"), [
    ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
     True),
    ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
     False),
    ('device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"', False),
    ('device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA A100")', True),
    ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
    ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0', False),
    ('device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("550.0.0")) >= 0', True),
    ('device.attributes["example.com"].rack == "r7"', True),
    ('device.attributes["gpu.nvidia.com"].missing == "x"', False),  # CEL: no such key
    ("(device.driver == 'gpu.nvidia.com')", True),
    # Not evaluated: reported as not checked, never guessed.
    ("device.driver == 'gpu.nvidia.com' || device.driver == 'x'", None),
    ('device.attributes["gpu.nvidia.com"].productName in ["a", "b"]', None),
    ("has(device.attributes['gpu.nvidia.com'].uuid)", None),
])
def test_cel(expr: str, want: bool | None) -> None:
    assert cel.evaluate(expr, A100) is want


def test_a_false_part_decides_even_beside_an_unknown_one() -> None:
    expr = "has(device.attributes['x'].y) && device.driver == 'other'"
    assert cel.evaluate(expr, A100) is False
    assert cel.matches([expr, "device.driver == 'gpu.nvidia.com'"], A100) == (False, "")
    assert cel.matches(["size(device.attributes) > 1"], A100) == (
        None, "size(device.attributes) > 1")


def _claim_spec(version: str) -> dict[str, object]:
    body = {"deviceClassName": "gpu.nvidia.com", "count": 2,
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}
    req = {"name": "gpus", **body} if version == "v1beta1" else {"name": "gpus", "exactly": body}
    return {"devices": {"requests": [req]}}


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2", "v1"])
def test_claim_requests_in_every_version(version: str) -> None:
    (req,) = dra.claim_requests(_claim_spec(version))
    assert (req.name, req.device_class, req.count, req.mode) == (
        "gpus", "gpu.nvidia.com", 2, "ExactCount")
    assert req.selectors == ("device.driver == 'gpu.nvidia.com'",)


def test_first_available_alternatives() -> None:
    spec = {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 1},
        {"name": "small", "deviceClassName": "mig.nvidia.com", "count": 2}]}]}}
    (req,) = dra.claim_requests(spec)
    assert [(a.name, a.device_class, a.count) for a in req.alternatives] == [
        ("gpu/big", "gpu.nvidia.com", 1), ("gpu/small", "mig.nvidia.com", 2)]


@pytest.mark.parametrize("basic", [True, False])
def test_slice_devices_v1beta1_and_later(basic: bool) -> None:
    body = {"attributes": {"productName": {"string": "NVIDIA L40S"}, "index": {"int": 0}},
            "capacity": {"memory": {"value": "48Gi"}}}
    device = {"name": "gpu-0", "basic": body} if basic else {"name": "gpu-0", **body}
    sl = {"spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1"},
                   "devices": [device]}}
    (d,) = dra.slice_devices(sl)
    assert (d.node, d.name, d.attributes["productName"], d.attributes["index"]) == (
        "n1", "gpu-0", "NVIDIA L40S", 0)
    assert d.capacity["memory"] == 48 * 2**30


def test_pod_claims_direct_template_and_pre_131_source() -> None:
    pod = {"spec": {"resourceClaims": [
        {"name": "a", "resourceClaimName": "shared"},
        {"name": "b", "resourceClaimTemplateName": "one-gpu"},
        {"name": "c", "source": {"resourceClaimTemplateName": "old"}}]},
        "status": {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b-x1"}]}}
    assert dra.pod_claims(pod) == [dra.PodClaim("a", "shared", None),
                                   dra.PodClaim("b", "p-b-x1", "one-gpu"),
                                   dra.PodClaim("c", None, "old")]


def test_class_driver_and_gpu_class() -> None:
    expr = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    dc = {"spec": {"selectors": [{"cel": {"expression": expr}}]}}
    assert dra.class_driver(dc) == "gpu.nvidia.com"
    assert dra.is_gpu_class(dc, "anything")
    assert not dra.is_gpu_class({"spec": {"selectors": [{"cel": {"expression":
                                 "device.driver == 'dra.net'"}}]}}, "rdma")


def test_nodes_counts_dra_devices_in_snapshot_and_live_alike(tmp_path: Path) -> None:
    snapshot = SCENARIOS / "dra-all-devices-allocated" / "cluster.yaml"
    snap = nodes.run(Reader(load_snapshot(snapshot)))
    with FakeKube(snapshot) as fk:
        view = open_live_view(str(fk.write_kubeconfig(tmp_path / "kubeconfig")), timeout=5)
        live = nodes.run(Reader(view))
        served = [t.version for t in fk.registry.types if t.group == "resource.k8s.io"]
    assert served == ["v1"] * 4  # the version the snapshot's objects carry (Kubernetes 1.34)
    rows = {r["node"]: r["dra"] for r in snap.details["rows"]}
    assert rows == {"gpu-node-1": {"published": 2, "allocated": 2, "free": 0}}
    assert live.details["rows"] == snap.details["rows"]
    assert snap.details["totals"]["dra"] == {"published": 2, "allocated": 2, "free": 0}
    out = Renderer().render(snap, argv=["nodes"], source="snapshot", requester="U0USER1")
    blocks = []
    for m in out.messages:
        validate(m.blocks)
        blocks += [json.dumps(b) for b in m.blocks]
    assert any("DRA GPUs 2/2/0 published/allocated/free" in b for b in blocks)


def test_dra_read_at_the_version_the_cluster_serves(tmp_path: Path) -> None:
    snapshot = SCENARIOS / "dra-no-device-matches-selector" / "cluster.yaml"  # v1beta1
    with FakeKube(snapshot) as fk:
        view = open_live_view(str(fk.write_kubeconfig(tmp_path / "kubeconfig")), timeout=5)
        slices = view.list("ResourceSlice")
        assert {s["apiVersion"] for s in slices} == {"resource.k8s.io/v1beta1"}
        assert len(slices) == 2


def test_dra_not_served_is_not_checked(tmp_path: Path) -> None:
    snapshot = SCENARIOS / "dra-all-devices-allocated" / "cluster.yaml"
    kinds = ["DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"]
    with FakeKube(snapshot, absent_kinds=kinds) as fk:
        view = open_live_view(str(fk.write_kubeconfig(tmp_path / "kubeconfig")), timeout=5)
        with pytest.raises(ViewError, match=r"serves none of resource\.k8s\.io"):
            view.list("ResourceClaim")
        reader = Reader(view)
        d = why_pending.run(reader, parse_target("team-vision/sam2-eval-0"))
    assert "RESOURCE_CLAIM_UNSATISFIED" not in d.codes
    assert "GPU_NOT_REQUESTED" not in d.codes
    assert any("resource.k8s.io" in u for u in d.unchecked)


def test_watch_cache_lists_dra_at_the_served_version(tmp_path: Path) -> None:
    snapshot = SCENARIOS / "dra-no-device-matches-selector" / "cluster.yaml"  # v1beta1 only
    with FakeKube(snapshot) as fk:
        view = open_live_view(str(fk.write_kubeconfig(tmp_path / "kubeconfig")), timeout=5)
        cache = view.watch(("ResourceSlice", "ResourceClaim"), backoff=0.02)
        try:
            assert cache.wait_synced(10)
            assert cache.serves("ResourceSlice", None)
            before = view.stats["requests"]
            slices = view.list("ResourceSlice")
            assert view.stats["requests"] == before  # answered by the cache
            assert {s["apiVersion"] for s in slices} == {"resource.k8s.io/v1beta1"}
            assert len(slices) == 2
        finally:
            cache.stop()
            view.close()


def test_watch_cache_does_not_answer_for_an_unserved_dra_group(tmp_path: Path) -> None:
    snapshot = SCENARIOS / "dra-all-devices-allocated" / "cluster.yaml"
    kinds = ["DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"]
    with FakeKube(snapshot, absent_kinds=kinds) as fk:
        view = open_live_view(str(fk.write_kubeconfig(tmp_path / "kubeconfig")), timeout=5)
        cache = view.watch(("ResourceSlice",), backoff=0.02)
        try:
            assert cache.wait_synced(10)
            assert not cache.serves("ResourceSlice", None)
            with pytest.raises(ViewError):
                view.list("ResourceSlice")
        finally:
            cache.stop()
            view.close()


def test_claim_being_allocated_is_transient(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(
        (SCENARIOS / "dra-all-devices-allocated" / "cluster.yaml").read_text()))
    for o in docs[0]["items"]:
        if o["kind"] == "ResourceClaim":
            o["status"].pop("allocation", None)  # the devices are free again
        if o["kind"] == "Event":
            o["message"] = ("0/2 nodes are available: resource claim "
                            "team-vision/sam2-eval-0-gpu-7zz9k is in the process of being "
                            "allocated.")
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    d = why_pending.run(Reader(load_snapshot(path)), parse_target("team-vision/sam2-eval-0"))
    (f,) = [f for f in d.findings if f.code == "RESOURCE_CLAIM_UNSATISFIED"]
    assert str(f.severity) == "info"
    assert any("is in the process of being allocated" in e for e in f.evidence)
    assert "GPU_NOT_REQUESTED" not in d.codes
