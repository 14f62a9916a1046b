"""Pod requests / node allocatable as kube-scheduler computes them (PodRequests)."""

from __future__ import annotations

import contextvars
from typing import Any

import pytest

from handlers.kube import resources as R
from handlers.kube.resources import (
    clear_cache,
    is_best_effort,
    is_terminated,
    node_allocatable,
    node_requested,
    pod_gpu_request,
    pod_requests,
    same_pod,
)
from tests.diagnosing import Diagnosing

Obj = dict[str, Any]
GI = 2.0**30


def ctr(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
        restart: str | None = None, name: str = "c") -> Obj:
    c: Obj = {"name": name, "resources": {}}
    if requests is not None:
        c["resources"]["requests"] = requests
    if limits is not None:
        c["resources"]["limits"] = limits
    if restart:
        c["restartPolicy"] = restart
    return c


def pod(containers: list[Obj], init: list[Obj] | None = None,
        overhead: dict[str, Any] | None = None, phase: str = "Running",
        uid: str | None = None, **spec: Any) -> Obj:
    p: Obj = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
              "spec": {"containers": containers, **spec}, "status": {"phase": phase}}
    if init is not None:
        p["spec"]["initContainers"] = init
    if overhead is not None:
        p["spec"]["overhead"] = overhead
    if uid:
        p["metadata"]["uid"] = uid
    return p


REQUEST_CASES = [
    ("sum of containers",
     pod([ctr({"cpu": "1", "memory": "1Gi"}), ctr({"cpu": "500m", "memory": "512Mi"})]),
     {"cpu": 1.5, "memory": 1.5 * GI}),
    # Upstream fit.go example: init containers take max(sum, each init), per resource.
    ("init max vs sum",
     pod([ctr({"cpu": "2", "memory": "1G"}), ctr({"cpu": "1", "memory": "1G"})],
         init=[ctr({"cpu": "2", "memory": "1G"}), ctr({"cpu": "2", "memory": "3G"})]),
     {"cpu": 3.0, "memory": 3e9}),
    ("init larger than sum",
     pod([ctr({"nvidia.com/gpu": "1"})], init=[ctr({"nvidia.com/gpu": "4"})]),
     {"nvidia.com/gpu": 4.0}),
    ("init resource absent from containers",
     pod([ctr({"cpu": "1"})], init=[ctr({"ephemeral-storage": "10Gi"})]),
     {"cpu": 1.0, "ephemeral-storage": 10 * GI}),
    # KEP-753: sidecars add to the sum; an init container runs beside the sidecars before it.
    ("sidecar added to containers",
     pod([ctr({"cpu": "1"})], init=[ctr({"cpu": "500m"}, restart="Always")]),
     {"cpu": 1.5}),
    ("regular init after sidecar stacks on it",
     pod([ctr({"cpu": "1"})],
         init=[ctr({"cpu": "1"}), ctr({"cpu": "2"}, restart="Always"), ctr({"cpu": "3"})]),
     {"cpu": 5.0}),  # max(1 + 2, 1, 2, 3 + 2)
    ("regular init before sidecar does not stack",
     pod([ctr({"cpu": "1"})], init=[ctr({"cpu": "3"}), ctr({"cpu": "2"}, restart="Always")]),
     {"cpu": 3.0}),  # max(1 + 2, 3, 2)
    ("two sidecars cumulative",
     pod([ctr({"memory": "1Gi"})],
         init=[ctr({"memory": "1Gi"}, restart="Always"), ctr({"memory": "1Gi"}, restart="Always"),
               ctr({"memory": "2Gi"})]),
     {"memory": 4 * GI}),  # max(1+1+1, 1, 2, 2+2)
    ("overhead added after init max",
     pod([ctr({"cpu": "1"})], init=[ctr({"cpu": "2"})],
         overhead={"cpu": "250m", "memory": "120Mi"}),
     {"cpu": 2.25, "memory": 120 * 2.0**20}),
    ("GPU limit stands in for the request",
     pod([ctr(limits={"nvidia.com/gpu": 2})]), {"nvidia.com/gpu": 2.0}),
    ("cpu/memory limits default the requests",
     pod([ctr(limits={"cpu": "2", "memory": "4Gi"})]), {"cpu": 2.0, "memory": 4 * GI}),
    ("explicit request wins over limit",
     pod([ctr({"cpu": "500m"}, {"cpu": "2", "memory": "1Gi"})]), {"cpu": 0.5, "memory": GI}),
    ("init container limit defaults its request",
     pod([ctr({"nvidia.com/gpu": "1"})], init=[ctr(limits={"nvidia.com/gpu": "2"})]),
     {"nvidia.com/gpu": 2.0}),
    ("hugepages and mig",
     pod([ctr({"hugepages-2Mi": "1Gi", "nvidia.com/mig-1g.5gb": "1"})]),
     {"hugepages-2Mi": GI, "nvidia.com/mig-1g.5gb": 1.0}),
    ("no resources", pod([ctr()]), {}),
    ("pod-level resources replace cpu/memory only",
     pod([ctr({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"})],
         resources={"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}}),
     {"cpu": 4.0, "memory": 8 * GI, "nvidia.com/gpu": 1.0}),
    ("cpu rounded up to whole millicores", pod([ctr({"cpu": "100.4m"})]), {"cpu": 0.101}),
    ("sums stay on the millicore grid",
     pod([ctr({"cpu": "100m"}), ctr({"cpu": "100m"}), ctr({"cpu": "100m"})]), {"cpu": 0.3}),
]


@pytest.mark.parametrize(("pod_obj", "want"), [(c[1], c[2]) for c in REQUEST_CASES],
                         ids=[c[0] for c in REQUEST_CASES])
def test_pod_requests(pod_obj: Obj, want: dict[str, float]) -> None:
    assert pod_requests(pod_obj) == pytest.approx(want)
    assert set(pod_requests(pod_obj)) == set(want)
    assert "pods" not in pod_requests(pod_obj)


def test_in_place_resize_counts_the_larger_of_spec_and_status() -> None:
    p = pod([ctr({"cpu": "1", "memory": "1Gi"}, name="main")])
    p["status"]["containerStatuses"] = [{
        "name": "main", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}},
        "allocatedResources": {"cpu": "2", "memory": "512Mi"}}]
    assert pod_requests(p) == {"cpu": 2.0, "memory": GI}
    p["status"]["conditions"] = [{"type": "PodResizePending", "reason": "Infeasible"}]
    assert pod_requests(p) == {"cpu": 2.0, "memory": 512 * 2.0**20}


@pytest.mark.parametrize(("phase", "terminated"), [
    ("Succeeded", True), ("Failed", True), ("Running", False), ("Pending", False),
    ("Unknown", False)])
def test_is_terminated(phase: str, terminated: bool) -> None:
    assert is_terminated(pod([ctr()], phase=phase)) is terminated


@pytest.mark.parametrize(("containers", "qos", "best_effort"), [
    ([ctr()], None, True),
    ([ctr({"nvidia.com/gpu": "1"})], None, True),  # only cpu/memory decide the QoS class
    ([ctr({"cpu": "100m"})], None, False),
    ([ctr(limits={"memory": "1Gi"})], None, False),
    ([ctr({"cpu": "1"})], "BestEffort", True),  # status.qosClass is authoritative
])
def test_is_best_effort(containers: list[Obj], qos: str | None, best_effort: bool) -> None:
    p = pod(containers)
    if qos:
        p["status"]["qosClass"] = qos
    assert is_best_effort(p) is best_effort


def test_pod_gpu_request() -> None:
    p = pod([ctr(limits={"nvidia.com/gpu": "4"}), ctr({"amd.com/gpu": "1"})])
    assert pod_gpu_request(p) == 4.0
    assert pod_gpu_request(p, "amd.com/gpu") == 1.0
    assert pod_gpu_request(p, "nvidia.com/mig-1g.5gb") == 0.0


@pytest.mark.parametrize(("status", "want"), [
    ({"allocatable": {"cpu": "7910m", "memory": "60Gi", "pods": "110", "nvidia.com/gpu": "8"},
      "capacity": {"cpu": "8", "nvidia.com/gpu": "8"}},
     {"cpu": 7.91, "memory": 60 * GI, "pods": 110.0, "nvidia.com/gpu": 8.0}),
    ({"capacity": {"cpu": "4", "pods": "10"}}, {"cpu": 4.0, "pods": 10.0}),  # fixture fallback
    ({"allocatable": {}, "capacity": {"cpu": "4"}}, {}),  # reported, empty: nothing allocatable
    ({}, {}),
])
def test_node_allocatable(status: Obj, want: dict[str, float]) -> None:
    assert node_allocatable({"metadata": {"name": "n"}, "status": status}) == want


def test_node_requested_skips_terminated_pods() -> None:
    pods = [pod([ctr({"cpu": "100m", "nvidia.com/gpu": "1"})]) for _ in range(7)]
    pods.append(pod([ctr({"cpu": "4", "nvidia.com/gpu": "4"})], phase="Succeeded"))
    pods.append(pod([ctr({"cpu": "4", "nvidia.com/gpu": "4"})], phase="Failed"))
    assert node_requested(pods) == {"cpu": 0.7, "nvidia.com/gpu": 7.0}


def test_nothing_is_memoised_outside_a_diagnosis() -> None:
    def outside() -> None:
        real = pod([ctr({"cpu": "1"})], uid="u-1")
        assert pod_requests(real) == {"cpu": 1.0}
        assert R._PODS.of() is None

    contextvars.Context().run(outside)  # as a thread no diagnosis ran in


def test_memoised_by_identity_only_for_api_objects() -> None:
    diagnosis = Diagnosing()
    real = pod([ctr({"cpu": "1"})], uid="u-1")
    assert pod_requests(real) == {"cpu": 1.0}
    pod_requests(real)["cpu"] = 99.0  # callers get a copy
    assert pod_requests(real) == {"cpu": 1.0}
    twin = pod([ctr({"cpu": "2"})], uid="u-1")  # same uid, another object: not confused
    assert pod_requests(twin) == {"cpu": 2.0}
    assert len(R._PODS.of(diagnosis.memos) or ()) == 1  # the newer version took the entry
    fixture = pod([ctr({"cpu": "1"})])  # no uid: never cached, so mutation is seen
    assert pod_requests(fixture) == {"cpu": 1.0}
    fixture["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    assert pod_requests(fixture) == {"cpu": 3.0}
    real["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5"
    clear_cache()
    assert pod_requests(real) == {"cpu": 5.0}


@pytest.mark.parametrize(("a", "b", "same"), [
    ({"metadata": {"uid": "1", "name": "x"}}, {"metadata": {"uid": "1", "name": "y"}}, True),
    ({"metadata": {"uid": "1", "name": "x"}}, {"metadata": {"uid": "2", "name": "x"}}, False),
    ({"metadata": {"name": "x", "namespace": "a"}}, {"metadata": {"name": "x", "namespace": "a"}},
     True),
    ({"metadata": {"name": "x", "namespace": "a"}}, {"metadata": {"name": "x", "namespace": "b"}},
     False),
    ({"metadata": {}}, {"metadata": {}}, False),
])
def test_same_pod(a: Obj, b: Obj, same: bool) -> None:
    assert same_pod(a, b) is same


def test_requests_are_cached_per_pod_and_stay_correct() -> None:
    diagnosis = Diagnosing()
    pods = [pod([ctr({"cpu": f"{100 + i % 7}m", "memory": f"{1 + i % 3}Gi",
                      "nvidia.com/gpu": str(i % 2)}), ctr({"cpu": "50m", "memory": "64Mi"})],
                uid=f"u-{i}") for i in range(3_000)]
    cold = node_requested(pods)
    warm = node_requested(pods)
    assert cold == warm
    assert cold["nvidia.com/gpu"] == 1_500
    assert len(R._PODS.of(diagnosis.memos) or ()) >= 3_000
