"""The GPU ledger of a node (handlers/ledger.py): where its physical count comes from, which
source wins when they disagree, and how many GPUs it has lost."""

from __future__ import annotations

from typing import Any

import pytest

from handlers import ledger
from handlers.dra import Device
from handlers.knowledge.gpu_counts import _parse, counts, instance_type_gpus
from handlers.pending.placement import _physical
from handlers.scheduler.filters import NodeFit


def node(labels: dict[str, str] | None = None, cap: dict[str, str] | None = None,
         alloc: dict[str, str] | None = None,
         conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    cap = cap or {}
    return {"kind": "Node", "metadata": {"name": "gpu-1", "labels": labels or {}},
            "status": {"capacity": {"cpu": "96", **cap},
                       "allocatable": {"cpu": "94", **(cap if alloc is None else alloc)},
                       "conditions": conditions or []}}


GFD8 = {"nvidia.com/gpu.count": "8"}
GPU = "nvidia.com/gpu"


@pytest.mark.parametrize(("labels", "source", "gpus"), [
    (GFD8, "gfd", 8),
    ({"karpenter.k8s.aws/instance-gpu-count": "4"}, "karpenter", 4),
    ({"cloud.google.com/gke-accelerator": "nvidia-l4",
      "cloud.google.com/gke-accelerator-count": "2"}, "gke", 2),
    ({"node.kubernetes.io/instance-type": "p4d.24xlarge"}, "instance-type", 8),
    ({"beta.kubernetes.io/instance-type": "g5.12xlarge"}, "instance-type", 4),
    ({"node.kubernetes.io/instance-type": "standard_nd96isr_h100_v5"}, "instance-type", 8),
    ({"node.kubernetes.io/instance-type": "a3-highgpu-8g"}, "instance-type", 8),
    ({"node.kubernetes.io/instance-type": "g2-standard-24"}, "instance-type", 2),
    ({"feature.node.kubernetes.io/pci-10de.present": "true"}, "nfd", 1),
])
def test_each_source_counts_a_node_that_advertises_nothing(
        labels: dict[str, str], source: str, gpus: int) -> None:
    led = ledger.of(node(labels))
    assert (led.source, led.physical, led.lost) == (source, gpus, gpus)
    assert led.at_least == (source == "nfd")


def test_a_health_agent_says_what_the_machine_has() -> None:
    aks = {"type": "GPUMissing", "status": "True", "reason": "GPUMissing",
           "message": "Expected to see 8 GPUs but found 7. FaultCode: NHC2009"}
    led = ledger.of(node({"nvidia.com/gpu.count": "7"}, {GPU: "7"}, conditions=[aks]))
    assert (led.physical, led.source, led.lost, led.unhealthy) == (8, "health-agent", 1, 0)
    assert any("GFD counts 7" in n for n in led.notes)


def test_tpu_accelerator_count_is_no_gpu_count() -> None:
    tpu = {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
           "cloud.google.com/gke-accelerator-count": "4"}
    assert ledger.of(node(tpu)).physical == 0


def test_a_gpu_off_the_bus_lowers_gfd_so_the_machine_count_wins() -> None:
    # The driver sees 7: GFD relabels 7 and the plugin advertises 7; p4d.24xlarge has 8.
    n = node({"nvidia.com/gpu.count": "7", "node.kubernetes.io/instance-type": "p4d.24xlarge"},
             {GPU: "7"})
    led = ledger.of(n)
    assert (led.physical, led.source, led.lost, led.unhealthy) == (8, "instance-type", 1, 0)
    assert [c.source for c in led.counts] == ["gfd", "instance-type", "capacity"]
    assert len(led.notes) == 1 and "the machine's count is taken" in led.notes[0]
    assert ledger.physical_said(n) is not None and ledger.physical_count(n) == 8


def test_gfd_above_the_machine_count_is_believed() -> None:
    led = ledger.of(node({**GFD8, "node.kubernetes.io/instance-type": "g5.12xlarge"},
                         {GPU: "8"}))
    assert (led.physical, led.source, led.lost) == (8, "gfd", 0)
    assert "GFD's count is taken" in led.notes[0]


def test_agreeing_sources_name_the_most_trusted() -> None:
    led = ledger.of(node({**GFD8, "node.kubernetes.io/instance-type": "p4d.24xlarge"},
                         {GPU: "8"}))
    assert (led.source, led.lost, led.notes) == ("gfd", 0, ())


def test_unhealthy_and_unadvertised_gpus_are_both_lost() -> None:
    led = ledger.of(node(GFD8, {GPU: "7"}, {GPU: "6"}))
    assert (led.physical, led.lost, led.unhealthy) == (8, 2, 1)


def test_capacity_alone_counts_when_no_label_says() -> None:
    led = ledger.of(node(cap={GPU: "8"}, alloc={GPU: "6"}))
    assert (led.physical, led.source, led.lost, led.unhealthy) == (8, "capacity", 2, 2)


def test_time_slicing_replicas_are_divided_out() -> None:
    sliced = {**GFD8, "nvidia.com/gpu.replicas": "4"}
    assert ledger.of(node(sliced, {GPU: "32"})).lost == 0
    led = ledger.of(node(sliced, {GPU: "32"}, {GPU: "28"}))
    assert (led.physical, led.lost, led.unhealthy) == (8, 1, 1)
    renamed = ledger.of(node(sliced, {"nvidia.com/gpu.shared": "28"}))
    assert (renamed.physical, renamed.lost) == (8, 1)


def test_mig_slices_lose_gpus_only_when_nothing_is_offered() -> None:
    mixed = {**GFD8, "nvidia.com/mig.strategy": "mixed",
             "nvidia.com/mig.config": "all-1g.10gb"}
    assert ledger.of(node(mixed, {"nvidia.com/mig-1g.10gb": "56"})).lost == 0
    assert ledger.of(node(mixed)).lost == 8
    # Under the single strategy GFD counts the slices: the machine's count is the GPUs.
    single = {"nvidia.com/gpu.count": "56", "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
              "node.kubernetes.io/instance-type": "p4d.24xlarge"}
    led = ledger.of(node(single, {GPU: "56"}))
    assert (led.physical, led.source, led.mig, led.lost) == (8, "instance-type", True, 0)


def test_dra_slices_publishing_fewer_gpus_lose_the_rest() -> None:
    n = node({"nvidia.com/gpu.count": "4", "node.kubernetes.io/instance-type": "g6e.12xlarge"})
    assert ledger.of(n, 4).lost == 0
    led = ledger.of(n, 3)
    assert (led.physical, led.dra, led.lost) == (4, 3, 1)


def test_dra_gpus_count_whole_gpus_of_gpu_drivers() -> None:
    devs = [Device("gpu.nvidia.com", "p", "gpu-0", "gpu-1", {"type": "gpu"}),
            Device("gpu.nvidia.com", "p", "gpu-1", "gpu-1", {}),
            Device("gpu.nvidia.com", "p", "gpu-0-mig-1", "gpu-1", {"type": "mig"}),
            Device("gpu.nvidia.com", "p", "gpu-0", None, {"type": "gpu"}),
            Device("net.example.com", "p", "nic-0", "gpu-1", {})]
    assert ledger.dra_gpus(devs) == {"gpu-1": 2}


def test_a_cpu_node_has_nothing_to_lose() -> None:
    led = ledger.of(node({"node.kubernetes.io/instance-type": "m6i.4xlarge"}))
    assert (led.physical, led.source, led.lost, led.counts) == (0, None, 0, ())


def test_the_ledger_is_a_value() -> None:
    n = node(GFD8, {GPU: "8"}, {GPU: "7"})
    assert ledger.of(n) == ledger.of(n)
    assert len({ledger.of(n), ledger.of(n)}) == 1  # hashable: memo and compare freely
    assert ledger.of(n).to_json()["lost"] == 1


def test_placement_sizes_a_node_by_the_ledger() -> None:
    # No GFD label, nothing advertised: the instance type still says how big the node is.
    n = node({"node.kubernetes.io/instance-type": "p5.48xlarge"})
    assert _physical(n, NodeFit("gpu-1"), GPU) == 8
    # "At least one" sizes no node.
    nfd = node({"feature.node.kubernetes.io/pci-10de.present": "true"})
    assert _physical(nfd, NodeFit("gpu-1"), GPU) == 0
    sliced = node({**GFD8, "nvidia.com/gpu.replicas": "4"}, {GPU: "28"})
    assert _physical(sliced, NodeFit("gpu-1", allocatable={GPU: 28.0}), GPU) == 32


def test_every_instance_type_names_its_source() -> None:
    types = counts().instance_types
    assert len(types) > 60
    assert all(t.source.startswith("https://") and t.gpus >= 1 for t in types.values())
    assert instance_type_gpus("P4D.24XLARGE") is not None
    # AMD GPUs and fractions of a GPU are no NVIDIA GPU count.
    for absent in ("g4ad.16xlarge", "Standard_NV6ads_A10_v5", "g6f.large", "m6i.4xlarge"):
        assert instance_type_gpus(absent) is None


@pytest.mark.parametrize(("doc", "says"), [
    ({"instance_types": [{"provider": "AWS", "family": "X", "source": "https://x",
                          "gpus": {"x.1": 0}}]}, "GPU count must be >= 1"),
    ({"instance_types": [{"provider": "AWS", "family": "X", "source": "https://x",
                          "gpus": {"x.1": 1, "X.1": 2}}]}, "listed twice"),
    ({"instance_types": [{"provider": "AWS", "family": "X", "gpus": {"x.1": 1}}]},
     "'source' must be"),
    ({"labels": [{"key": "k", "id": "k", "machine": "yes", "source": "https://x"}]},
     "'machine' must be"),
])
def test_a_malformed_entry_is_refused(doc: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        _parse(doc)
