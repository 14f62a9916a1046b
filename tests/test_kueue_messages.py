"""Kueue's own words about a Workload it does not admit, as its releases wrote them."""

from __future__ import annotations

import pytest

from handlers import kueue
from handlers.kueue import parse_message


@pytest.mark.parametrize(("message", "kind", "resource", "flavor", "quantity"), [
    # every release (pkg/scheduler/flavorassigner/flavorassigner.go)
    ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
     "flavor a100-80gb, 8 more needed", kueue.QUOTA, "nvidia.com/gpu", "a100-80gb", "8"),
    # v0.6
    ("couldn't assign flavors to pod set main: insufficient unused quota in cohort for "
     "nvidia.com/gpu in flavor h100, 4 more needed", kueue.COHORT, "nvidia.com/gpu", "h100", "4"),
    ("couldn't assign flavors to pod set main: borrowing limit for nvidia.com/gpu in flavor "
     "h100 exceeded", kueue.BORROWING, "nvidia.com/gpu", "h100", ""),
    # v0.10
    ("couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor "
     "h100, request > maximum capacity (16 > 8)", kueue.MAX_CAPACITY, "nvidia.com/gpu", "h100",
     "8"),
    # v0.13+
    ("couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu in "
     "flavor h100, previously considered podsets requests (8) + current podset request (16) > "
     "maximum capacity (16)", kueue.MAX_CAPACITY, "nvidia.com/gpu", "h100", "16"),
    ("couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in "
     "ClusterQueue", kueue.NO_FLAVOR, "nvidia.com/gpu", "", ""),
    ("couldn't assign flavors to pod set main: untolerated taint {nvidia.com/gpu present "
     "NoSchedule <nil>} in flavor h100-80gb", kueue.NO_FLAVOR, "", "h100-80gb", ""),
    ("couldn't assign flavors to pod set main: flavor spot doesn't match node affinity",
     kueue.NO_FLAVOR, "", "spot", ""),
])
def test_flavor_reasons(message: str, kind: str, resource: str, flavor: str,
                        quantity: str) -> None:
    reasons, preempting = parse_message(message)
    assert [(r.kind, r.resource, r.flavor, r.quantity) for r in reasons] == [
        (kind, resource, flavor, quantity)]
    assert preempting == 0
    assert reasons[0].pod_set in ("main", "workers")


def test_several_reasons_and_pod_sets_and_preemption() -> None:
    msg = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
           "a100, 2 more needed, insufficient unused quota for memory in flavor a100, 2Gi more "
           "needed; couldn't assign flavors to pod set workers: insufficient unused quota for "
           "nvidia.com/gpu in flavor a100, 5 more needed. Pending the preemption of 2 "
           "workload(s)")
    reasons, preempting = parse_message(msg)
    assert [(r.pod_set, r.resource, r.quantity) for r in reasons] == [
        ("main", "cpu", "2"), ("main", "memory", "2Gi"), ("workers", "nvidia.com/gpu", "5")]
    assert preempting == 2


@pytest.mark.parametrize(("message", "kind", "queue_kind", "queue"), [
    ("LocalQueue team-a-gpu doesn't exist", kueue.QUEUE_MISSING, "LocalQueue", "team-a-gpu"),
    ("ClusterQueue team-a-cq doesn't exist", kueue.QUEUE_MISSING, "ClusterQueue", "team-a-cq"),
    ("ClusterQueue team-a-cq is inactive", kueue.QUEUE_INACTIVE, "ClusterQueue", "team-a-cq"),
    ("LocalQueue team-a-gpu is stopped", kueue.QUEUE_STOPPED, "LocalQueue", "team-a-gpu"),
])
def test_queue_reasons(message: str, kind: str, queue_kind: str, queue: str) -> None:
    reasons, _ = parse_message(message)
    assert [(r.kind, r.queue_kind, r.queue) for r in reasons] == [(kind, queue_kind, queue)]


def test_unknown_words_give_no_reason() -> None:
    assert parse_message("The workload has no reservation") == ([], 0)


def test_quotas_and_usage_of_a_cluster_queue() -> None:
    cq = {"spec": {"cohort": "llm", "resourceGroups": [{"flavors": [{"name": "h100", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4"}]}]}]},
        "status": {"flavorsUsage": [{"name": "h100", "resources": [
            {"name": "nvidia.com/gpu", "total": "12", "borrowed": "4"}]}]}}
    q = kueue.quotas(cq)[("h100", "nvidia.com/gpu")]
    assert (q.nominal, q.borrowing_limit, q.used, q.borrowed) == (8.0, 4.0, 12.0, 4.0)
    assert kueue.cohort_of(cq) == "llm"
    assert kueue.cohort_of({"spec": {"cohortName": "llm2"}}) == "llm2"  # v1beta2
