"""handlers/scheduler/messages.py over a corpus of real FailedScheduling messages, plus edges."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from handlers.scheduler.messages import (
    CATEGORIES,
    Reason,
    SchedulingMessage,
    classify_reason,
    parse_scheduling_message,
)

CORPUS_PATH = Path(__file__).parent / "data" / "scheduler_messages.yaml"
CORPUS: list[dict[str, Any]] = yaml.safe_load(CORPUS_PATH.read_text(encoding="utf-8"))


def category_counts(reasons: tuple[Reason, ...]) -> dict[str, int | None]:
    """{category: summed node count}; None when no reason of the category has a count."""
    out: dict[str, int | None] = {}
    for reason in reasons:
        if reason.count is None:
            out.setdefault(reason.category, None)
        else:
            out[reason.category] = (out.get(reason.category) or 0) + reason.count
    return out


def taints_of(parsed: SchedulingMessage) -> list[list[str | None]]:
    return [list(reason.taint) for reason in parsed.reasons if reason.taint is not None]


# ---------------------------------------------------------------------------------------------
# the corpus itself


def test_corpus_is_big_and_real_enough() -> None:
    real = [entry for entry in CORPUS if entry["real"]]
    assert len(real) >= 20
    stated_versions = {entry["k8s_version"] for entry in real if entry["version_basis"] == "stated"}
    assert len(stated_versions) >= 5, stated_versions
    for entry in real:
        assert re.match(r"^https://github\.com/[^/]+/[^/]+/(issues|pull)/\d+$", entry["source"])


def test_corpus_entries_are_well_formed() -> None:
    ids = [entry["id"] for entry in CORPUS]
    assert len(ids) == len(set(ids))
    for entry in CORPUS:
        assert {"id", "k8s_version", "version_basis", "source", "real", "message", "expect"} <= set(
            entry
        ), entry["id"]
        assert entry["version_basis"] in {"stated", "inferred", "unknown", "source"}
        expect = entry["expect"]
        assert "total_nodes" in expect and "categories" in expect, entry["id"]
        for category in [*expect["categories"], *expect.get("preemption_categories", {})]:
            assert category in CATEGORIES, (entry["id"], category)


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["id"] for entry in CORPUS])
def test_corpus_message(entry: dict[str, Any]) -> None:
    expect = entry["expect"]
    parsed = parse_scheduling_message(entry["message"])

    assert parsed.raw == entry["message"]
    assert parsed.total_nodes == expect["total_nodes"]
    assert category_counts(parsed.reasons) == expect["categories"]
    if "counts_add_up" in expect:
        assert parsed.counts_add_up is expect["counts_add_up"]
    if "taints" in expect:
        assert taints_of(parsed) == expect["taints"]
    if "resources" in expect:
        assert [r.resource for r in parsed.reasons if r.resource] == expect["resources"]
    if "preemption_categories" in expect:
        assert category_counts(parsed.preemption) == expect["preemption_categories"]
    else:
        assert parsed.preemption == ()
    if "preemption_summary" in expect:
        assert parsed.preemption_summary == expect["preemption_summary"]
    for reason in (*parsed.reasons, *parsed.preemption):
        assert reason.category in CATEGORIES
        assert reason.text == reason.text.strip()
        assert reason.text
        assert reason.text in " ".join(entry["message"].split()) or reason.text.lower() in (
            entry["message"].lower()
        )


# ---------------------------------------------------------------------------------------------
# the formats named in the brief


def test_taint_with_comma_inside_the_reason_is_one_reason() -> None:
    parsed = parse_scheduling_message(
        "0/5 nodes are available: 3 node(s) had taint {node-role.kubernetes.io/master: }, "
        "that the pod didn't tolerate, 2 Insufficient nvidia.com/gpu."
    )
    assert parsed.total_nodes == 5
    assert parsed.counts_add_up
    taint, gpu = parsed.reasons
    assert taint == Reason(
        count=3,
        text="node(s) had taint {node-role.kubernetes.io/master: }, that the pod didn't tolerate",
        category="taint",
        taint=("node-role.kubernetes.io/master", None, None),
    )
    assert gpu == Reason(2, "Insufficient nvidia.com/gpu", "insufficient", "nvidia.com/gpu")
    assert parsed.by_category("insufficient") == [gpu]
    assert parsed.by_category("dra") == []


def test_old_taint_text_has_no_key() -> None:
    parsed = parse_scheduling_message(
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "2 node(s) had taints that the pod didn't tolerate."
    )
    (taint,) = parsed.by_category("taint")
    assert taint.count == 2 and taint.taint is None


def test_untolerated_taint_with_value_and_without_key() -> None:
    with_value = parse_scheduling_message(
        "0/2 nodes are available: 2 node(s) had untolerated taint {nvidia.com/gpu: present}."
    )
    assert with_value.reasons[0].taint == ("nvidia.com/gpu", "present", None)
    without = parse_scheduling_message(
        "0/2 nodes are available: 2 node(s) had untolerated taint(s)."
    )
    assert without.reasons == (Reason(2, "node(s) had untolerated taint(s)", "taint"),)


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("node(s) didn't match node selector", "node_selector"),
        ("node(s) didn't match Pod's node affinity", "node_affinity"),
        ("node(s) didn't match Pod's node affinity/selector", "node_affinity_selector"),
        ("node(s) didn't match scheduler-enforced node affinity", "node_affinity"),
        ("node(s) were unschedulable", "unschedulable"),
        ("node(s) had untolerated taint {node.kubernetes.io/unschedulable: }", "unschedulable"),
        (
            "node(s) had taint {node.kubernetes.io/not-ready: }, that the pod didn't tolerate",
            "not_ready",
        ),
        ("node(s) had untolerated taint {node.kubernetes.io/unreachable: }", "not_ready"),
        ("node(s) were not ready", "not_ready"),
        ("node(s) had untolerated taint {node.kubernetes.io/disk-pressure: }", "pressure"),
        ("node(s) had pid pressure", "pressure"),
        ("node(s) didn't match pod affinity rules", "pod_affinity"),
        ("node(s) didn't match pod affinity/anti-affinity", "pod_affinity"),
        ("node(s) didn't match pod anti-affinity rules", "pod_anti_affinity"),
        ("node(s) didn't satisfy existing pods anti-affinity rules", "pod_anti_affinity"),
        ("node(s) had volume node affinity conflict", "volume_node_affinity"),
        ("pod has unbound immediate PersistentVolumeClaims", "volume"),
        ("node(s) didn't find available persistent volumes to bind", "volume"),
        ("node(s) exceed max volume count", "volume"),
        ('persistentvolumeclaim "data-0" not found', "volume"),
        ("node(s) didn't have free ports for the requested pod ports", "ports"),
        ("node(s) didn't match the requested node name", "node_name"),
        ("node(s) didn't match the requested hostname", "node_name"),
        ("node(s) didn't match pod topology spread constraints", "topology_spread"),
        ("cannot allocate all claims", "dra"),
        ("no new claims to deallocate", "dra"),
        ("Too many pods", "too_many_pods"),
        ("Insufficient nvidia.com/gpu", "insufficient"),
        ("No preemption victims found for incoming pod", "no_preemption_victims"),
        ("Preemption is not helpful for scheduling", "preemption_not_helpful"),
        ("skip schedule deleting pod: ml/train-0", "other"),
        ('binding rejected: running Bind plugin "DefaultBinder": pods "x" not found', "other"),
        ("something nobody printed before", "other"),
    ],
)
def test_classify_reason(text: str, category: str) -> None:
    assert classify_reason(text)[0] == category


def test_insufficient_resources_and_too_many_pods() -> None:
    parsed = parse_scheduling_message(
        "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Too many pods."
    )
    assert [(r.category, r.resource) for r in parsed.reasons] == [
        ("insufficient", "cpu"),
        ("insufficient", "memory"),
        ("too_many_pods", "pods"),
    ]
    assert parsed.counts_add_up


def test_preemption_suffix_is_separate() -> None:
    parsed = parse_scheduling_message(
        "0/4 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/"
        "control-plane: }, 3 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
        "1 Preemption is not helpful for scheduling, "
        "3 No preemption victims found for incoming pod."
    )
    assert category_counts(parsed.reasons) == {"taint": 1, "insufficient": 3}
    assert [(r.count, r.category) for r in parsed.preemption] == [
        (1, "preemption_not_helpful"),
        (3, "no_preemption_victims"),
    ]
    assert parsed.preemption_summary == "No preemption victims found for incoming pod."


def test_preemption_summary_of_a_free_text_postfilter() -> None:
    parsed = parse_scheduling_message(
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to a terminating pod on the nominated node."
    )
    assert parsed.preemption == ()
    assert (
        parsed.preemption_summary == "not eligible due to a terminating pod on the nominated node."
    )


def test_counts_do_not_add_up() -> None:
    parsed = parse_scheduling_message(
        "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory, 1 MatchNodeSelector."
    )
    assert not parsed.counts_add_up
    assert parse_scheduling_message("0/3 nodes are available: 3 Insufficient cpu.").counts_add_up


def test_running_prefilter_plugin_error() -> None:
    parsed = parse_scheduling_message(
        'running PreFilter plugin "VolumeBinding": error getting PVC "ml/data": could not find '
        'v1.PersistentVolumeClaim "ml/data"'
    )
    assert parsed.total_nodes is None
    (reason,) = parsed.reasons
    assert reason.count is None and reason.category == "volume"


# ---------------------------------------------------------------------------------------------
# edge cases


def test_empty_string() -> None:
    parsed = parse_scheduling_message("")
    assert parsed == SchedulingMessage(
        raw="",
        total_nodes=None,
        reasons=(),
        preemption=(),
        preemption_summary=None,
        counts_add_up=True,
    )


@pytest.mark.parametrize(
    "garbage",
    [
        "   ",
        "lorem ipsum",
        "{{{{",
        "}}}, , , ...",
        "0/",
        "0/x nodes are available: y",
        "preemption:",
        "preemption: preemption: preemption:",
        "nodes are available: 1 2 3",
        "\x00\x01\x02",
        "0/3 nodes are available: , , .",
        "0/3 nodes are available: 3 node(s) had taint {unclosed: value, 2 Insufficient cpu",
        "é" * 1000,
        "1" * 100_000,
        "1/" * 50_000,
        "taint {" * 20_000,
        "(" * 100_000,
        " preemption:" * 20_000,
        "0/3 nodes are available: " * 10_000,
    ],
    ids=lambda garbage: f"{len(garbage)}:{garbage[:16]!r}",
)
def test_garbage_never_raises(garbage: str) -> None:
    parsed = parse_scheduling_message(garbage)
    assert parsed.raw == garbage
    for reason in (*parsed.reasons, *parsed.preemption):
        assert reason.category in CATEGORIES


def test_garbage_is_other() -> None:
    parsed = parse_scheduling_message("lorem ipsum")
    assert parsed.reasons == (Reason(None, "lorem ipsum", "other"),)


def test_non_string_input_does_not_raise() -> None:
    parsed = parse_scheduling_message(None)  # type: ignore[arg-type]
    assert parsed.reasons[0].category == "other"


def test_unschedulable_prefix_without_counts() -> None:
    parsed = parse_scheduling_message(
        "Unschedulable: pod has unbound immediate PersistentVolumeClaims"
    )
    assert parsed.total_nodes is None
    assert parsed.counts_add_up
    assert parsed.reasons == (
        Reason(None, "pod has unbound immediate PersistentVolumeClaims", "volume"),
    )


def test_unschedulable_prefix_with_counts_and_quotes() -> None:
    parsed = parse_scheduling_message(
        'Unschedulable: "0/3 nodes are available: 3 Insufficient cpu."'
    )
    assert parsed.total_nodes == 3
    assert parsed.reasons == (Reason(3, "Insufficient cpu", "insufficient", "cpu"),)


def test_pod_prefixed_message() -> None:
    parsed = parse_scheduling_message(
        "pod ml/train-0: 0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
    )
    assert parsed.total_nodes == 8
    assert parsed.by_category("insufficient")[0].resource == "nvidia.com/gpu"


def test_huge_node_count() -> None:
    n = 10**30
    parsed = parse_scheduling_message(f"0/{n} nodes are available: {n} Insufficient cpu.")
    assert parsed.total_nodes == n
    assert parsed.reasons[0].count == n
    assert parsed.counts_add_up


def test_many_reasons_are_linear() -> None:
    reasons = ", ".join(f"1 Insufficient example.com/r{i}" for i in range(20000))
    parsed = parse_scheduling_message(f"0/20000 nodes are available: {reasons}.")
    assert len(parsed.reasons) == 20000
    assert parsed.counts_add_up


def test_reasons_are_frozen() -> None:
    parsed = parse_scheduling_message("0/1 nodes are available: 1 Insufficient cpu.")
    with pytest.raises(AttributeError):
        parsed.reasons[0].count = 2  # type: ignore[misc]
