"""Kubelet refusals after binding (issue 23, item 2): which part of the kubelet refused, the
kubelet's policies where the data holds them, the node's NUMA layout, and the findings
why-pending and doctor make of them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.snapshot import load_snapshot
from handlers import kubeletconfig, numa
from handlers.chain.inventory import admission_failed, build_inventory
from handlers.kube.admission import CPU, DEVICE, MEMORY, RESOURCE, TOPOLOGY, refusal
from handlers.model import Diagnosis, ObjectRef
from handlers.pending import started
from handlers.pending.context import PendingContext
from handlers.registry import COMMANDS
from handlers.severity import Severity
from handlers.target import Target
from handlers.view import Obj, Reader
from handlers.why_pending import run as why_pending
from tests.pending_ctx import pod_context, reader_for

SCENARIOS = Path(__file__).parent / "scenarios"
BUNDLE = Path(__file__).parent / "data" / "configz-bundle"
BUNDLE_NODE = "ip-10-8-77-14.us-east-2.compute.internal"
S1 = "topology-single-numa-kubeadm-configmap"
S2 = "topology-refused-no-kubelet-config"
S3 = "topology-nrt-zones-show-free-numa-node"


def _pod(reason: str | None = None, message: str = "", phase: str = "Failed") -> Obj:
    st: dict[str, Any] = {"phase": phase, "message": message}
    if reason:
        st["reason"] = reason
    return {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "n", "containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
            "status": st}


# -- the refusal --------------------------------------------------------------------------


@pytest.mark.parametrize(("reason", "message", "part"), [
    # 1.24+: type TopologyAffinityError; rejectPod prefixes "Pod was rejected: ".
    ("TopologyAffinityError",
     "Pod was rejected: Resources cannot be allocated with Topology locality", TOPOLOGY),
    # 1.16-1.18 (kubernetes#83775, #83695): spaces in the reason, "Locality".
    ("Topology Affinity Error", "Pod Resources cannot be allocated with Topology Locality",
     TOPOLOGY),
    ("SMTAlignmentError", "Pod was rejected: SMT Alignment Error: requested 3 cpus not multiple "
     "cpus per core = 2", CPU),
    ("UnexpectedAdmissionError", "Pod was rejected: Allocate failed due to [memorymanager] "
     "failed to get the default NUMA affinity, no NUMA nodes with enough memory is available, "
     "which is unexpected", MEMORY),
    ("UnexpectedAdmissionError", "Pod was rejected: Allocate failed due to not enough cpus "
     "available to satisfy request: requested=100, available=94, which is unexpected", CPU),
    # kubernetes#96519 (1.20): "Pod " prefix.
    ("UnexpectedAdmissionError", "Pod Allocate failed due to requested number of devices "
     "unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected", DEVICE),
    ("OutOfnvidia.com/gpu", "Pod Node didn't have enough resource: nvidia.com/gpu, requested: 1, "
     "used: 0, capacity: 0", RESOURCE),
])
def test_the_part_of_the_kubelet_that_refused(reason: str, message: str, part: str) -> None:
    r = refusal(_pod(reason, message))
    assert r is not None and r.part == part and r.source == "status"
    assert not r.message.startswith("Pod ")
    assert admission_failed(_pod(reason, message))


def test_a_kubelet_event_is_a_refusal_when_the_status_says_nothing_yet() -> None:
    pod = _pod(phase="Pending")
    events = [{"type": "Normal", "reason": "Scheduled", "message": "Successfully assigned"},
              {"type": "Warning", "reason": "TopologyAffinityError",
               "message": "Resources cannot be allocated with Topology locality"}]
    r = refusal(pod, events)
    assert r is not None and r.topology and r.source == "event"
    assert refusal(pod, events[:1]) is None
    assert refusal(_pod("Evicted", "The node was low on resource: memory.")) is None


def test_a_refused_pod_that_asked_no_gpu_is_not_the_chains(tmp_path: Path) -> None:
    items = yaml.safe_load((SCENARIOS / S1 / "cluster.yaml").read_text())["items"]
    refused = next(o for o in items if o["metadata"]["name"] == "runner-t4-4-2pfzt-workflow")
    cpu_only = copy.deepcopy(refused)
    cpu_only["metadata"].update(name="cpu-only", uid="p-cpu-only")
    cpu_only["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "4"}}
    cpu_only["status"].update(reason="OutOfcpu", message="Pod was rejected: Node didn't have "
                              "enough resource: cpu, requested: 4000, used: 94000, capacity: 94000")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"kind": "List", "items": [*items, cpu_only]}))
    inv = build_inventory(Reader(load_snapshot(tmp_path / "c.yaml")), ["gpu-metal-a"])
    assert [p["metadata"]["name"] for p in inv.admission_failed["gpu-metal-a"]] == [
        "runner-t4-4-2pfzt-workflow"]


# -- the kubelet's configuration ----------------------------------------------------------


def test_kubeadms_configmap_is_the_clusters_default_policy() -> None:
    reader = reader_for(S1)
    node = reader.get("Node", "gpu-metal-a")
    assert node is not None
    got = kubeletconfig.read(reader, node)
    assert got.config is not None and not got.config.per_node and got.not_checked == []
    assert (got.config.topology_policy, got.config.topology_scope, got.config.cpu_policy,
            got.config.memory_policy) == ("single-numa-node", "pod", "static", "None")
    assert got.config.refuses


def test_a_node_configz_in_a_bundle_is_the_nodes_own_policy() -> None:
    reader = Reader(load_snapshot(BUNDLE))
    node = reader.get("Node", BUNDLE_NODE)
    assert node is not None
    got = kubeletconfig.read(reader, node)
    assert got.config is not None and got.config.per_node
    assert got.config.topology_policy == "single-numa-node"
    assert got.config.topology_scope == "pod"


def test_kubelets_before_1_24_read_the_versioned_configmap() -> None:
    reader = reader_for(S1)
    node = copy.deepcopy(reader.get("Node", "gpu-metal-a"))
    assert node is not None
    node["status"]["nodeInfo"]["kubeletVersion"] = "v1.23.17"
    view = load_snapshot(SCENARIOS / S1 / "cluster.yaml")
    cm = copy.deepcopy(view.get("ConfigMap", "kubelet-config", "kube-system"))
    assert cm is not None
    cm["metadata"]["name"] = "kubelet-config-1.23"

    class Versioned:
        def __getattr__(self, name: str) -> Any:
            return getattr(view, name)

        def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
            if kind == "ConfigMap" and namespace == "kube-system":
                return cm if name == "kubelet-config-1.23" else None
            return view.get(kind, name, namespace)

    got = kubeletconfig.read(Reader(Versioned()), node)  # type: ignore[arg-type]
    assert got.config is not None and "kubelet-config-1.23" in got.config.source
    node["status"]["nodeInfo"]["kubeletVersion"] = "v1.30.2"  # 1.24+: never the old name
    assert kubeletconfig.read(Reader(Versioned()), node).config is None  # type: ignore[arg-type]


def test_no_kubelet_config_in_the_data_is_said_as_not_checked() -> None:
    reader = reader_for(S2)
    node = reader.get("Node", "ip-10-8-98-255.us-east-2.compute.internal")
    assert node is not None
    got = kubeletconfig.read(reader, node)
    assert got.config is None
    assert len(got.not_checked) == 1 and "proxy/configz" in got.not_checked[0]


# -- the NUMA layout ----------------------------------------------------------------------


def test_the_machine_types_layout_and_the_worst_spread_of_gpus_in_use() -> None:
    p5 = {"metadata": {"labels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}
    lay = numa.layout(p5)
    assert lay is not None and (lay.numa_nodes, lay.gpus_per_numa_node) == (2, 4)
    assert [lay.most_free_surely(u) for u in range(9)] == [4, 4, 3, 3, 2, 2, 1, 1, 0]
    assert numa.layout({"metadata": {"labels": {
        "node.kubernetes.io/instance-type": "g5.xlarge"}}}) is None


def test_node_resource_topology_shows_each_numa_nodes_free_gpus_and_the_policy() -> None:
    reader = reader_for(S3)
    name = "ip-10-8-101-9.us-east-2.compute.internal"
    node, nrt = reader.get("Node", name), numa.topologies(reader).get(name)
    assert node is not None and nrt is not None
    lay = numa.layout(node, nrt)
    assert lay is not None and lay.free == (4, 1)
    assert lay.most_free_surely(3) == 4
    by_type = numa.layout(node)  # the machine type alone allows a worse spread of the 3
    assert by_type is not None and by_type.most_free_surely(3) == 3
    got = kubeletconfig.read(reader, node).config
    assert got is not None and got.per_node
    assert (got.topology_policy, got.topology_scope) == ("single-numa-node", "pod")
    assert got.fields == ("topologyManagerPolicy", "topologyManagerScope")


def test_zones_listing_no_gpu_leave_the_machine_type_to_say_it() -> None:
    # pytorch/ci-infra#778: on g4dn.metal the topology-updater published CPU zones only.
    cpu_only = {"metadata": {"name": "n"}, "topologyPolicies": ["SingleNUMANodeContainerLevel"],
                "zones": [{"name": "node-0", "type": "Node", "resources": [
                    {"name": "cpu", "capacity": "48", "allocatable": "47", "available": "40"}]}]}
    node = {"metadata": {"name": "n", "labels": {
        "node.kubernetes.io/instance-type": "g4dn.metal"}}}
    lay = numa.layout(node, cpu_only)
    assert lay is not None and lay.free is None and lay.gpus_per_numa_node == 4


# -- what why-pending and doctor say --------------------------------------------------------


def _why(scenario: str, target: str) -> tuple[Diagnosis, Reader]:
    reader = reader_for(scenario)
    namespace, name = target.split("/")
    return why_pending(reader, Target("Pod", name, namespace)), reader


def _why_bundle() -> Diagnosis:
    return why_pending(Reader(load_snapshot(BUNDLE)),
                       Target("Pod", "ph-w-h100-8-placeholder-0", "arc-runners"))


def test_node_resource_topology_names_the_node_the_machine_type_could_not() -> None:
    diag, _ = _why(S3, "arc-runners/l-x86iamx-88-900-h100-4-e5-workflow")
    root = diag.findings[0]
    assert root.code == "DEVICE_ADMISSION_FAILED"
    assert "ip-10-8-101-9.us-east-2.compute.internal" in root.fix.summary
    assert not any("kubelet's topologyManagerPolicy" in u for u in diag.unchecked)


def test_a_topology_refusal_names_the_node_with_a_free_numa_node_and_offers_no_restart() -> None:
    diag, _ = _why(S1, "ci/runner-t4-4-2pfzt-workflow")
    root = diag.findings[0]
    assert root.code == "DEVICE_ADMISSION_FAILED" and root.severity == Severity.CRITICAL
    assert root.actions == ()
    assert ObjectRef("Node", "gpu-metal-a") in root.objects
    assert root.fix.summary.startswith("Run it where one NUMA node has 4")
    assert "gpu-metal-b" in root.fix.summary
    assert any("topologyManagerPolicy: single-numa-node" in e for e in root.evidence)
    topo = next(f for f in diag.findings if f.code == "MULTI_GPU_TOPOLOGY")
    assert topo.severity == Severity.WARNING and topo.conditions == {"numa-refused"}


def test_without_kubelet_config_the_refusal_still_leads_and_the_policy_is_not_checked() -> None:
    diag, _ = _why(S2, "arc-runners/mt-l-x86iamx-88-900-h100-4-2pfzt-workflow")
    assert diag.root_cause is not None and diag.root_cause.code == "DEVICE_ADMISSION_FAILED"
    assert not {"DEVICE_PLUGIN_MISSING", "KUBELET_REGISTRATION_FAILED"} & set(diag.codes)
    assert any("topologyManagerPolicy" in u and "not checked" in u for u in diag.unchecked)


def test_a_node_configz_decides_the_policy_and_eight_gpus_never_fit_one_numa_node() -> None:
    diag = _why_bundle()
    root = diag.findings[0]
    assert root.code == "DEVICE_ADMISSION_FAILED"
    assert any(e.startswith(f"configz of node {BUNDLE_NODE}") for e in root.evidence)
    topo = next(f for f in diag.findings if f.code == "MULTI_GPU_TOPOLOGY")
    assert "at most 4 nvidia.com/gpu" in topo.fix.summary
    assert not any("kubelet's topologyManagerPolicy" in u for u in diag.unchecked)


def test_exclusive_cpus_beyond_one_numa_node_are_the_cause_not_the_gpus() -> None:
    reader = Reader(load_snapshot(BUNDLE))
    pod = copy.deepcopy(reader.get("Pod", "ph-w-h100-8-placeholder-0", "arc-runners"))
    assert pod is not None
    res = pod["spec"]["containers"][0]["resources"]
    res["limits"]["nvidia.com/gpu"] = res["requests"]["nvidia.com/gpu"] = "2"  # 176 CPUs stay
    ctx = PendingContext(reader, pod, True, "arc-runners")
    ctx.events = reader.events("Pod", "ph-w-h100-8-placeholder-0", "arc-runners")
    found = started.check(ctx)
    assert [f.code for f in found] == ["DEVICE_ADMISSION_FAILED"]
    assert found[0].fix.summary.startswith("Ask for at most 96 CPUs")


def test_a_refused_pods_node_chain_keeps_only_what_can_cause_a_refusal() -> None:
    causes = started._refusal_causes()
    assert {"GPU_UNHEALTHY", "DEVICE_PLUGIN_CRASHLOOP", "NVML_INIT_FAILED"} <= causes
    assert not {"DEVICE_PLUGIN_MISSING", "NFD_LABELS_MISSING"} & causes
    ctx = pod_context("admission-devices-unavailable-no-daemonsets", "gpu-devicemanager-3842",
                      "nvidia-gpu-13237348-f464-496a-9e10-7d2bd90a5aad")
    assert [f.code for f in started.check(ctx)] == ["DEVICE_ADMISSION_FAILED"]


def test_doctor_says_a_topology_refusal_in_its_words_without_a_plugin_restart() -> None:
    spec = COMMANDS["doctor"]
    assert spec.run is not None
    reader = reader_for(S1)
    diag = spec.run(reader, spec.bind({"node": "gpu-metal-a"}))
    f = next(f for f in diag.findings if f.code == "DEVICE_ADMISSION_FAILED")
    assert f.actions == ()
    assert ObjectRef("Pod", "runner-t4-4-2pfzt-workflow", "ci") in f.objects
    assert "gpu-metal-b" in f.fix.summary
