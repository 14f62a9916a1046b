"""On a cluster where GPU nodes are few, why-pending reads only the GPU nodes' pods (one
field-selected list per node, fetched together) and still finds what a full read finds."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from bot.live import open_live_view
from bot.snapshot import load_snapshot
from handlers import why_pending
from handlers.target import parse_target
from handlers.view import Reader
from tests.fake_kube import FakeKube

SCENARIO = Path(__file__).parent / "scenarios" / "insufficient-gpu-held" / "cluster.yaml"
CPU_NODE = "ip-10-0-3-44.ec2.internal"


def _grown(tmp: Path, extra_cpu_nodes: int = 12) -> Path:
    """The scenario plus CPU nodes with a pod each, so GPU nodes are under a quarter."""
    view = load_snapshot(SCENARIO)
    objs = [o for kind in ("Node", "Pod", "Event", "PriorityClass", "ResourceQuota",
                           "LimitRange", "RuntimeClass", "ConfigMap") if kind in view.kinds
            for o in view.list(kind)]
    cpu = next(o for o in objs if o["kind"] == "Node" and o["metadata"]["name"] == CPU_NODE)
    for i in range(extra_cpu_nodes):
        node = copy.deepcopy(cpu)
        node["metadata"]["name"] = f"cpu-{i}"
        node["metadata"].get("labels", {})["kubernetes.io/hostname"] = f"cpu-{i}"
        objs.append(node)
        objs.append({"kind": "Pod", "apiVersion": "v1",
                     "metadata": {"name": f"web-{i}", "namespace": "web", "uid": f"w{i}"},
                     "spec": {"nodeName": f"cpu-{i}", "containers": [
                         {"name": "c", "image": "nginx",
                          "resources": {"requests": {"cpu": "1"}}}]},
                     "status": {"phase": "Running"}})
    path = tmp / "grown.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": objs}))
    return path


def test_gpu_pod_reads_only_gpu_nodes_pods(tmp_path: Path) -> None:
    snap = _grown(tmp_path)
    expected = why_pending.run(Reader(load_snapshot(snap)), parse_target("ml-team/train-0"))
    with FakeKube(snap) as fk:
        view = open_live_view(str(fk.write_kubeconfig(tmp_path / "kc")), timeout=5)
        got = why_pending.run(Reader(view), parse_target("ml-team/train-0"))
        pod_lists = [parse_qs(urlsplit(r.path).query) for r in fk.requests
                     if urlsplit(r.path).path == "/api/v1/pods"]
    assert "INSUFFICIENT_GPU" in got.codes
    assert got.codes == expected.codes
    assert [n.to_json() for n in got.nodes if n.node.startswith("ip-10-0-2")] == [
        n.to_json() for n in expected.nodes if n.node.startswith("ip-10-0-2")]
    # No pod list of the whole cluster; the CPU nodes' pods were never read.
    unscoped = [q for q in pod_lists if "labelSelector" not in q
                and not q.get("fieldSelector", [""])[0].startswith("spec.nodeName=")]
    assert unscoped == []
    read_nodes = {q["fieldSelector"][0].removeprefix("spec.nodeName=") for q in pod_lists
                  if q.get("fieldSelector", [""])[0].startswith("spec.nodeName=")}
    assert read_nodes == {"ip-10-0-21-14.ec2.internal", "ip-10-0-22-9.ec2.internal",
                          "ip-10-0-23-201.ec2.internal"}


def test_doctor_reads_only_gpu_nodes_pods_and_the_operator_namespace(tmp_path: Path) -> None:
    snap = _grown(tmp_path)
    from handlers import doctor

    expected = doctor.run(Reader(load_snapshot(snap)))
    with FakeKube(snap) as fk:
        view = open_live_view(str(fk.write_kubeconfig(tmp_path / "kc")), timeout=5)
        got = doctor.run(Reader(view))
        paths = [urlsplit(r.path) for r in fk.requests]
    assert got.codes == expected.codes
    assert got.details["rows"] == expected.details["rows"]
    all_pods = [p for p in paths if p.path == "/api/v1/pods" and "labelSelector" not in
                parse_qs(p.query) and not parse_qs(p.query).get("fieldSelector", [""])[0]
                .startswith("spec.nodeName=")]
    assert all_pods == []


def test_required_pod_anti_affinity_reads_pods_off_the_gpu_nodes(tmp_path: Path) -> None:
    """A zone-wide anti-affinity term counts pods on CPU nodes too: reading only the GPU
    nodes' pods would miss them and answer INSUFFICIENT_GPU."""
    doc = json.loads(_grown(tmp_path).read_text())
    for o in doc["items"]:
        meta = o["metadata"]
        if o["kind"] == "Pod" and meta["name"].startswith("web-"):
            meta["labels"] = {"app": "web"}
        if o["kind"] == "Pod" and meta["name"] == "train-0":
            o["spec"]["affinity"] = {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "namespaces": ["web"],
                    "topologyKey": "topology.kubernetes.io/zone"}]}}
    snap = tmp_path / "anti.json"
    snap.write_text(json.dumps(doc))
    expected = why_pending.run(Reader(load_snapshot(snap)), parse_target("ml-team/train-0"))
    with FakeKube(snap) as fk:
        view = open_live_view(str(fk.write_kubeconfig(tmp_path / "kc")), timeout=5)
        got = why_pending.run(Reader(view), parse_target("ml-team/train-0"))
    assert "POD_AFFINITY_MISMATCH" in expected.codes
    assert "INSUFFICIENT_GPU" not in expected.codes
    assert got.codes == expected.codes
