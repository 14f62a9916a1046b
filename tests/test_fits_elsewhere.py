"""Fits elsewhere (issue 26 item 4), on snapshot data: a pending GPU pod checked against other
clusters as their API server and scheduler would take it (handlers/pending/elsewhere.py).

tests/data/fleet: train (home: Job ml-team/train's pod asks 4 A100s, its one A100 node is
full), lab (A100s free on b-gpu-1 and b-gpu-2, an H100 on b-gpu-3), spare (H100s only).
Variants of lab are written to tmp_path: no namespace, quota used up, LimitRange, no
PriorityClass, a claim missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.render import render_json, render_text
from bot.snapshot import load_snapshot
from handlers import why_pending
from handlers.model import Diagnosis
from handlers.pending import elsewhere
from handlers.target import Target, parse_target
from handlers.view import Reader
from tests.test_json_schema import _errors as schema_errors

DATA = Path(__file__).parent / "data" / "fleet"
POD = "ml-team/train-x7k2p"
PIPE = ("kubectl --context train-ctx -n ml-team apply view-last-applied job/train -o yaml | "
        "kubectl --context lab-ctx -n ml-team apply -f -")

Items = list[dict[str, Any]]


def _items(name: str) -> Items:
    items: Items = yaml.safe_load((DATA / f"{name}.yaml").read_text())["items"]
    return items


def _write(tmp: Path, name: str, items: Items) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def _reader(path: Path) -> Reader:
    return Reader(load_snapshot(path))


def _home(target: str = POD, ns: str | None = None,
          path: Path = DATA / "train.yaml") -> tuple[Target, Diagnosis, elsewhere.Subject]:
    t = parse_target(target, ns)
    diag = why_pending.run(_reader(path), t)
    s = elsewhere.subject(_reader(path), t, diag, home="train", home_context="train-ctx")
    assert s is not None
    return t, diag, s


def _lab(tmp: Path, change: Callable[[Items], Items]) -> Reader:
    return _reader(_write(tmp, "lab", change(_items("lab"))))


def test_it_fits_where_the_model_it_pins_has_free_gpus() -> None:
    _, _, s = _home()
    assert (s.workload_ref, s.gpu_resource, s.gpus) == ("job/train", "nvidia.com/gpu", 4.0)
    fit = elsewhere.check_cluster(s, "lab", _reader(DATA / "lab.yaml"), "lab-ctx")
    assert fit.verdict == "fits"
    # Most free first; b-gpu-3 has 8 free but is an H100.
    assert [(n.node, n.gpu_free) for n in fit.nodes] == [("b-gpu-1", 8.0), ("b-gpu-2", 4.0)]
    assert {n.product for n in fit.nodes} == {"NVIDIA-A100-SXM4-80GB"}
    assert fit.command == PIPE
    assert "a copy: job/train stays on train until deleted there" in fit.notes


def test_a_cluster_without_the_model_says_which_models_it_has() -> None:
    _, _, s = _home()
    fit = elsewhere.check_cluster(s, "spare", _reader(DATA / "spare.yaml"), "spare-ctx")
    assert fit.verdict == "does not fit" and fit.command is None
    assert "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB" in fit.reasons[0]
    assert fit.reasons[0].endswith("its GPU nodes are NVIDIA-H100-80GB-HBM3")


def _drop(kind: str, name: str) -> Callable[[Items], Items]:
    return lambda items: [o for o in items if not (
        o["kind"] == kind and o["metadata"]["name"] == name)]


def _rename_priority_class(items: Items) -> Items:
    for o in items:
        if o["kind"] == "PriorityClass":
            o["metadata"]["name"] = "inference-high"
    return items


def _quota_used(used: str) -> Callable[[Items], Items]:
    def change(items: Items) -> Items:
        for o in items:
            if o["kind"] == "ResourceQuota":
                o["status"]["used"]["requests.nvidia.com/gpu"] = used
        return items
    return change


def _limit_range(items: Items) -> Items:
    return [*items, {"apiVersion": "v1", "kind": "LimitRange",
                     "metadata": {"name": "gpu-limits", "namespace": "ml-team"},
                     "spec": {"limits": [{"type": "Container",
                                          "max": {"nvidia.com/gpu": "2"}}]}}]


@pytest.mark.parametrize(("change", "words"), [
    (_drop("Namespace", "ml-team"), "namespace ml-team does not exist there"),
    (_quota_used("14"), "ResourceQuota gpu-quota in ml-team is used up"),
    (_limit_range, "LimitRange"),
    (_rename_priority_class, "PriorityClass ml-batch does not exist there"),
], ids=["no-namespace", "quota-used-up", "limitrange-max", "no-priorityclass"])
def test_what_the_api_server_there_refuses(tmp_path: Path, change: Callable[[Items], Items],
                                           words: str) -> None:
    _, _, s = _home()
    fit = elsewhere.check_cluster(s, "lab", _lab(tmp_path, change), "lab-ctx")
    assert fit.verdict == "does not fit" and not fit.nodes and fit.command is None
    assert words in fit.reasons[0], fit.reasons


def test_quota_with_room_for_the_pod_still_fits(tmp_path: Path) -> None:
    _, _, s = _home()
    fit = elsewhere.check_cluster(s, "lab", _lab(tmp_path, _quota_used("12")), "lab-ctx")
    assert fit.verdict == "fits"


def test_a_claim_the_other_cluster_lacks(tmp_path: Path) -> None:
    items = _items("train")
    for o in items:
        if o["kind"] in ("Pod", "Job"):
            spec = o["spec"] if o["kind"] == "Pod" else o["spec"]["template"]["spec"]
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "ds"}}]
    _, _, s = _home(path=_write(tmp_path, "train", items))
    fit = elsewhere.check_cluster(s, "lab", _reader(DATA / "lab.yaml"), "lab-ctx")
    assert fit.verdict == "does not fit"
    assert fit.reasons[0].startswith("PersistentVolumeClaim ds does not exist in ml-team")


def test_without_last_applied_the_command_names_the_manifest(tmp_path: Path) -> None:
    items = _items("train")
    for o in items:
        if o["kind"] == "Job":
            del o["metadata"]["annotations"]
    _, _, s = _home(path=_write(tmp_path, "train", items))
    fit = elsewhere.check_cluster(s, "lab", _reader(DATA / "lab.yaml"), None)
    assert fit.command == "kubectl --context lab -n ml-team apply -f MANIFEST"
    assert any(n.startswith("MANIFEST: the manifest job/train was made from") for n in fit.notes)
    assert any("no kubeconfig context is configured for cluster lab" in n for n in fit.notes)


def test_a_workload_of_the_same_name_there_is_said(tmp_path: Path) -> None:
    job = next(o for o in _items("train") if o["kind"] == "Job")
    _, _, s = _home()
    fit = elsewhere.check_cluster(s, "lab", _lab(tmp_path, lambda items: [*items, job]),
                                  "lab-ctx")
    assert "job/train exists in ml-team on lab already: applying changes that one" in fit.notes


def test_the_job_named_is_diagnosed_from_its_pod_and_copied_whole() -> None:
    _, _, s = _home("job/train", "ml-team")
    assert s.workload_ref == "job/train"
    assert s.pod["metadata"]["name"] == "train-x7k2p-<elsewhere>"
    assert "uid" not in s.pod["metadata"] and "nodeName" not in s.pod["spec"]


@pytest.mark.parametrize("change", [
    lambda pod: pod["spec"].update(nodeName="a-gpu-1"),
    lambda pod: pod["status"].update(phase="Running"),
    lambda pod: pod["spec"]["containers"][0]["resources"].update(
        requests={"cpu": "1"}, limits={}),
    lambda pod: pod["metadata"].update(ownerReferences=[
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": True}]),
], ids=["bound", "running", "no-gpu", "daemonset"])
def test_no_subject_unless_a_pending_gpu_pod(tmp_path: Path,
                                             change: Callable[[dict[str, Any]], None]) -> None:
    items = _items("train")
    for o in items:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "train-x7k2p":
            change(o)
    path = _write(tmp_path, "train", items)
    t = parse_target(POD, None)
    diag = why_pending.run(_reader(path), t)
    assert elsewhere.subject(_reader(path), t, diag, home="train", home_context=None) is None


def test_the_answer_in_text_and_json() -> None:
    _, diag, s = _home()
    fits = [elsewhere.check_cluster(s, "spare", _reader(DATA / "spare.yaml"), "spare-ctx"),
            elsewhere.check_cluster(s, "lab", _reader(DATA / "lab.yaml"), "lab-ctx"),
            elsewhere.not_checked("down", "unreachable: connection refused")]
    elsewhere.attach(diag, s, fits)
    whole = json.loads(render_json(diag, source="cluster train"))
    assert not schema_errors(whole)
    doc = whole["details"]["fits_elsewhere"]
    assert [(c["cluster"], c["verdict"]) for c in doc["clusters"]] == [
        ("lab", "fits"), ("spare", "does not fit"), ("down", "not checked")]
    assert doc["clusters"][0]["nodes"][0] == {"node": "b-gpu-1", "gpu_free": 8,
                                              "product": "NVIDIA-A100-SXM4-80GB"}
    assert (doc["workload"], doc["gpus"], doc["home"]) == ("job/train", 4, "train")
    text = render_text(diag, source="cluster train")
    part = text[text.index("Fits elsewhere"):text.index("Nodes through")]
    assert "lab: fits on b-gpu-1 (8 free, NVIDIA-A100-SXM4-80GB), b-gpu-2" in part
    assert PIPE in part
    assert "spare: does not fit: no node of the GPU model" in part
    assert "down: not checked: unreachable: connection refused" in part


def test_what_could_not_be_read_there_is_said(tmp_path: Path) -> None:
    _, _, s = _home()
    no_quotas = _lab(tmp_path, lambda items: [o for o in items if o["kind"] != "ResourceQuota"])
    fit = elsewhere.check_cluster(s, "lab", no_quotas, "lab-ctx")
    assert fit.verdict == "fits"
    assert any(n.startswith("not checked there: ResourceQuota") for n in fit.notes), fit.notes


def _queued_home(tmp: Path) -> elsewhere.Subject:
    """Job train naming Kueue's LocalQueue gpu-queue."""
    items = _items("train")
    for o in items:
        if o["kind"] == "Job":
            o["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "gpu-queue"}
    return _home(path=_write(tmp, "train", items))[2]


def _local_queue(name: str) -> Callable[[Items], Items]:
    return lambda items: [*items, {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "ml-team"}, "spec": {"clusterQueue": "gpus"}}]


def test_a_kueue_queue_missing_there_holds_it(tmp_path: Path) -> None:
    s = _queued_home(tmp_path)
    fit = elsewhere.check_cluster(s, "lab", _lab(tmp_path, _local_queue("other")), "lab-ctx")
    assert fit.verdict == "does not fit"
    assert fit.reasons[0].startswith("LocalQueue gpu-queue (its kueue.x-k8s.io/queue-name) "
                                     "does not exist in ml-team there")
    fit = elsewhere.check_cluster(s, "lab", _lab(tmp_path, _local_queue("gpu-queue")),
                                  "lab-ctx")
    assert fit.verdict == "fits"
    assert any("ClusterQueue's quota is not checked" in n for n in fit.notes)


def test_a_scheduler_that_does_not_run_there(tmp_path: Path) -> None:
    items = _items("train")
    for o in items:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "train-x7k2p":
            o["spec"]["schedulerName"] = "volcano"
    _, _, s = _home(path=_write(tmp_path, "train", items))
    fit = elsewhere.check_cluster(s, "lab", _reader(DATA / "lab.yaml"), "lab-ctx")
    assert fit.verdict == "does not fit"
    assert fit.reasons[0].startswith("The pod waits for scheduler 'volcano', which is not running")
