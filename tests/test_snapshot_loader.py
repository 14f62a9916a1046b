"""The snapshot loader reads every format of snapshot-format.md, by content, and keeps
whatever it can from broken input; SnapshotView answers the ClusterView protocol."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import bot.snapshot.view as view_module
from bot.snapshot import LoadProblem, SnapshotError, SnapshotView, load_snapshot
from handlers.kube.selectors import match_fields
from handlers.view import ClusterView, ViewError

DATA = Path(__file__).parent / "data" / "loader"
DUMP = DATA / "dump"
STREAM = DATA / "stream.txt"
PLUGIN = "nvidia-device-plugin-daemonset-x7k2p"


def names(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def pod(name: str, namespace: str = "default", **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
    }
    obj.update(extra)
    return obj


def line_and_column(text: str, offset: int) -> str:
    """Where a parser reports ``offset``: 1-based line and column."""
    line_start = text.rfind("\n", 0, offset) + 1
    return f"line {text.count(chr(10), 0, offset) + 1}, column {offset - line_start + 1}"


def problems_in(view: SnapshotView, filename: str) -> list[LoadProblem]:
    return [p for p in view.problems if Path(p.path).name == filename]


# -- plain YAML / JSON files ----------------------------------------------------------------


def test_single_object_json_and_yaml(tmp_path: Path) -> None:
    write(tmp_path / "pod.json", json.dumps(pod("a", "ml")))
    write(tmp_path / "node.yaml", "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n")
    view = load_snapshot(tmp_path)
    assert names(view.list("Pod")) == ["a"]
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    assert view.get("Node", "n1") == node
    assert view.problems == []
    assert sorted(Path(f).name for f in view.files) == ["node.yaml", "pod.json"]
    assert view.source == f"snapshot {tmp_path}"


def test_multi_document_yaml_and_kind_list(tmp_path: Path) -> None:
    path = write(
        tmp_path / "cluster.yaml",
        """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: ml}
- apiVersion: scheduling.k8s.io/v1
  kind: PriorityClass
  metadata: {name: high}
  value: 1000
---
# a comment-only document between separators is not a document
---
apiVersion: v1
kind: Node
metadata:
  name: n1
  creationTimestamp: 2024-05-01T10:00:00Z
""",
    )
    view = load_snapshot(path)
    assert names(view.list("Pod")) == ["a"]
    assert view.get("PriorityClass", "high")["value"] == 1000  # type: ignore[index]
    node = view.get("Node", "n1")
    assert node is not None
    # Unquoted YAML timestamps stay text, as in `kubectl -o json`.
    assert node["metadata"]["creationTimestamp"] == "2024-05-01T10:00:00Z"
    assert view.problems == []


def test_typed_list_gives_items_kind_and_api_version(tmp_path: Path) -> None:
    doc = {
        "kind": "DaemonSetList",
        "apiVersion": "apps/v1",
        "items": [{"metadata": {"name": "dp", "namespace": "gpu-operator"}}],
    }
    view = load_snapshot(write(tmp_path / "whatever.json", json.dumps(doc)))
    [ds] = view.list("DaemonSet")
    assert ds["kind"] == "DaemonSet"
    assert ds["apiVersion"] == "apps/v1"


def test_generic_list_does_not_lend_its_api_version(tmp_path: Path) -> None:
    doc = {
        "kind": "List",
        "apiVersion": "v1",
        "items": [{"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "d"}},
                  {"kind": "PodGroup", "metadata": {"name": "pg", "namespace": "ml"}}],
    }
    view = load_snapshot(write(tmp_path / "x.json", json.dumps(doc)))
    assert view.get("Deployment", "d")["apiVersion"] == "apps/v1"  # type: ignore[index]
    assert "apiVersion" not in view.get("PodGroup", "pg", "ml")  # type: ignore[operator]


@pytest.mark.parametrize(
    "text",
    [
        '{"items": [{"metadata": {"name": "a", "namespace": "ml"}}]}',  # list without kind
        '[{"metadata": {"name": "a", "namespace": "ml"}}]',  # bare array
        '{"metadata": {"name": "a", "namespace": "ml"}}',  # single object without kind
    ],
)
def test_kind_from_file_name(tmp_path: Path, text: str) -> None:
    view = load_snapshot(write(tmp_path / "pods.json", text))
    [found] = view.list("Pod", "ml")
    assert found["kind"] == "Pod"
    assert view.problems == []


def test_format_is_told_by_content_not_name(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", json.dumps(pod("from-json-txt")))
    write(tmp_path / "b.json", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: from-yaml-json\n")
    write(tmp_path / "c", json.dumps(pod("no-suffix")))
    view = load_snapshot(tmp_path)
    assert names(view.list("Pod")) == ["from-json-txt", "from-yaml-json", "no-suffix"]


def test_unused_kinds_and_secrets_are_dropped_silently(tmp_path: Path) -> None:
    write(
        tmp_path / "extra.yaml",
        """\
apiVersion: v1
kind: Secret
metadata: {name: token, namespace: ml}
data: {password: aHVudGVyMg==}
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: ml}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: time-slicing, namespace: gpu-operator}
data: {any: "sharing: {timeSlicing: {}}"}
""",
    )
    view = load_snapshot(tmp_path)
    assert view.problems == []
    assert names(view.list("ConfigMap")) == ["time-slicing"]
    assert "Secret" not in view.kinds
    assert "hunter2" not in repr(view._raw) and "aHVudGVyMg==" not in repr(view._raw)
    with pytest.raises(ViewError):
        view.list("Secret")


def test_non_kubernetes_files_are_skipped_silently(tmp_path: Path) -> None:
    write(tmp_path / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n")
    write(tmp_path / "README.md", "# Dump\n\n```yaml\napiVersion: v1\nkind: Pod\n```\nsee: x: y\n")
    write(tmp_path / "notes.txt", "taken at 3am by on-call\n")
    write(tmp_path / "scenario.yaml", "description: x\ncommand: why-pending\nexpect: [A]\n")
    write(tmp_path / "package.json", '{"name": "x", "version": "1.0"}')
    write(tmp_path / "tags.json", '["a", "b", 3]')
    write(tmp_path / ".hidden.yaml", ": : : not yaml")
    view = load_snapshot(tmp_path)
    assert names(view.list("Pod")) == ["a"]
    assert view.problems == []


# -- kubectl cluster-info dump -------------------------------------------------------------


def test_cluster_info_dump_directory() -> None:
    view = load_snapshot(DUMP)
    assert names(view.list("Node")) == ["cpu-node-1", "gpu-node-1"]
    assert names(view.list("Pod", "gpu-operator")) == ["gpu-feature-discovery-m2x9q", PLUGIN]
    assert names(view.list("DaemonSet")) == ["nvidia-device-plugin-daemonset"]
    node = view.get("Node", "gpu-node-1")
    assert node is not None
    assert (node["kind"], node["apiVersion"]) == ("Node", "v1")
    assert "managedFields" not in node["metadata"]
    assert view.problems == []
    # Empty lists still tell the kind was captured; kinds never dumped are not claimed.
    assert {"Deployment", "ReplicaSet", "Pod", "Node"} <= view.kinds
    assert "ResourceQuota" not in view.kinds


def test_dump_directory_gives_namespace_to_objects_without_one() -> None:
    view = load_snapshot(DUMP)
    train = view.get("Pod", "train-0", "ml-team")
    assert train is not None
    assert train["metadata"]["namespace"] == "ml-team"
    assert view.get("Pod", "train-0") is None  # not in "default"


def test_dump_directory_logs_txt_blocks_and_plain_text() -> None:
    view = load_snapshot(DUMP)
    log = view.logs("gpu-operator", PLUGIN, "nvidia-device-plugin")
    assert log is not None
    assert "Starting FS watcher." in log
    # The END line shares the last log line when the log lacks a final newline.
    assert "failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND" in log
    assert "==== END" not in log
    assert view.logs("gpu-operator", PLUGIN, "toolkit-validation") == "toolkit is ready\n"
    # A logs.txt without START/END lines is the pod's log, whatever the container.
    assert view.logs("ml-team", "infer-0") == "serving model on :8080\nshutting down\n"
    assert view.logs("ml-team", "infer-0", "server") == "serving model on :8080\nshutting down\n"
    assert view.logs("ml-team", "train-0") is None
    assert view.logs("nowhere", "nothing") is None


def test_all_containers_joined_in_spec_order() -> None:
    view = load_snapshot(DUMP)
    log = view.logs("gpu-operator", PLUGIN)
    assert log is not None
    assert log.index("toolkit is ready") < log.index("Starting FS watcher.")


def test_termination_message_counts_as_log(tmp_path: Path) -> None:
    status = {
        "containerStatuses": [
            {
                "name": "main",
                "state": {"terminated": {"message": "CUDA out of memory", "exitCode": 1}},
                "lastState": {"terminated": {"message": "NCCL error", "exitCode": 1}},
            }
        ]
    }
    doc = pod("p", "ml", spec={"containers": [{"name": "main"}]}, status=status)
    view = load_snapshot(write(tmp_path / "p.json", json.dumps(doc)))
    log = view.logs("ml", "p", "main")
    assert log is not None
    assert log.index("NCCL error") < log.index("CUDA out of memory")
    assert view.logs("ml", "p") == log


def test_termination_message_already_in_log_is_not_repeated() -> None:
    view = load_snapshot(DUMP)
    log = view.logs("gpu-operator", PLUGIN, "nvidia-device-plugin")
    assert log is not None
    assert log.count("ERROR_LIBRARY_NOT_FOUND") == 1


def test_cluster_info_dump_stream() -> None:
    view = load_snapshot(STREAM)
    assert names(view.list("Node")) == ["cpu-node-1", "gpu-node-1"]
    assert names(view.list("Pod")) == ["gpu-feature-discovery-m2x9q", PLUGIN]
    assert len(view.events("Pod", PLUGIN, "gpu-operator")) == 2
    assert view.logs("gpu-operator", "gpu-feature-discovery-m2x9q") == "Loading configuration.\n"
    log = view.logs("gpu-operator", PLUGIN, "nvidia-device-plugin")
    assert log is not None and "failed to initialize NVML" in log
    assert view.problems == []
    assert view.files == [str(STREAM)]


def test_yaml_stream_with_log_blocks(tmp_path: Path) -> None:
    # `kubectl cluster-info dump -o yaml` prints YAML documents between the log blocks.
    path = write(
        tmp_path / "dump.out",
        """\
apiVersion: v1
items:
- metadata: {name: n1}
kind: NodeList
---
apiVersion: v1
items:
- metadata: {name: p, namespace: ml}
  spec: {containers: [{name: c}]}
kind: PodList
==== START logs for container c of pod ml/p ====
hello
==== END logs for container c of pod ml/p ====
apiVersion: v1
items:
- metadata: {name: q, namespace: ml}
  spec: [broken
kind: PodList
""",
    )
    view = load_snapshot(path)
    assert names(view.list("Node")) == ["n1"]
    assert names(view.list("Pod")) == ["p"]
    assert view.logs("ml", "p") == "hello\n"
    [problem] = view.problems
    assert problem.where is not None and problem.where.startswith("line 18,")
    assert "document 3" in problem.message


def test_stream_of_compact_documents(tmp_path: Path) -> None:
    text = "\n".join(json.dumps(pod(n, "ml")) for n in ("a", "b")) + "\n" + json.dumps(pod("c"))
    view = load_snapshot(write(tmp_path / "s.json", text))
    assert names(view.list("Pod")) == ["a", "b", "c"]


def test_mixed_directory_recursively(tmp_path: Path) -> None:
    shutil.copytree(DUMP, tmp_path / "bundle" / "dump")
    write(
        tmp_path / "bundle" / "extra.yaml",
        """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ResourceQuota
  metadata: {name: gpu-quota, namespace: ml-team}
  spec: {hard: {requests.nvidia.com/gpu: "4"}}
""",
    )
    write(
        tmp_path / "bundle" / "crds" / "volcano" / "podgroups.yaml",
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
        "metadata: {name: train, namespace: ml-team}\nspec: {minMember: 4}\n",
    )
    shutil.copy(STREAM, tmp_path / "bundle" / "stdout-dump.log")
    view = load_snapshot(tmp_path)
    assert names(view.list("ResourceQuota", "ml-team")) == ["gpu-quota"]
    assert names(view.list("PodGroup")) == ["train"]
    # The stream repeats the dump's pods: one object per name, not two.
    assert names(view.list("Pod", "gpu-operator")) == ["gpu-feature-discovery-m2x9q", PLUGIN]
    assert view.logs("ml-team", "infer-0") is not None
    assert view.problems == []


# -- events ----------------------------------------------------------------------------------


def test_events_k8s_io_normalised_to_core_shape(tmp_path: Path) -> None:
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e1", "namespace": "ml"},
        "regarding": {"kind": "Pod", "name": "p", "namespace": "ml"},
        "note": "0/3 nodes are available",
        "reason": "FailedScheduling",
        "type": "Warning",
        "reportingController": "default-scheduler",
        "eventTime": "2024-05-02T10:00:00.000000Z",
        "series": {"count": 7, "lastObservedTime": "2024-05-02T10:30:00.000000Z"},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    }
    view = load_snapshot(write(tmp_path / "events.yaml", json.dumps(event)))
    [ev] = view.events("Pod", "p", "ml")
    assert ev["involvedObject"] == {"kind": "Pod", "name": "p", "namespace": "ml"}
    assert ev["message"] == "0/3 nodes are available"
    assert ev["count"] == 7
    assert ev["lastTimestamp"] == "2024-05-02T10:30:00.000000Z"
    assert ev["firstTimestamp"] == "2024-05-02T10:00:00.000000Z"
    assert ev["source"]["component"] == "default-scheduler"
    assert (ev["reason"], ev["type"]) == ("FailedScheduling", "Warning")
    assert ev["note"] == "0/3 nodes are available"  # originals kept
    assert ev["regarding"]["name"] == "p"


def test_events_deprecated_fields_and_null_timestamps(tmp_path: Path) -> None:
    events = [
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "old", "namespace": "ml"},
            "regarding": {"kind": "Pod", "name": "p", "namespace": "ml"},
            "note": "old",
            "deprecatedCount": 3,
            "deprecatedFirstTimestamp": "2024-05-01T00:00:00Z",
            "deprecatedLastTimestamp": "2024-05-01T01:00:00Z",
            "deprecatedSource": {"component": "kubelet", "host": "n1"},
            "eventTime": None,
        },
        {   # core/v1 as a new cluster writes it: timestamps null, eventTime set
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "new", "namespace": "ml"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ml"},
            "message": "new",
            "firstTimestamp": None,
            "lastTimestamp": None,
            "eventTime": "2024-05-01T02:00:00.123456Z",
            "reportingComponent": "default-scheduler",
        },
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "none", "namespace": "ml"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ml"},
            "message": "no time at all",
            "firstTimestamp": None,
            "lastTimestamp": None,
        },
    ]
    view = load_snapshot(write(tmp_path / "ev.json", json.dumps({"kind": "List", "items": events})))
    got = view.events("Pod", "p", "ml")
    assert [e["metadata"]["name"] for e in got] == ["none", "old", "new"]
    old = got[1]
    assert (old["count"], old["lastTimestamp"], old["firstTimestamp"]) == (
        3, "2024-05-01T01:00:00Z", "2024-05-01T00:00:00Z")
    assert old["source"] == {"component": "kubelet", "host": "n1"}
    new = got[2]
    assert (new["count"], new["lastTimestamp"]) == (1, "2024-05-01T02:00:00.123456Z")
    assert new["source"]["component"] == "default-scheduler"


def test_events_sorted_oldest_first_and_matched_by_object() -> None:
    view = load_snapshot(DUMP)
    got = view.events("Pod", PLUGIN, "gpu-operator")
    assert [e["reason"] for e in got] == ["Pulled", "BackOff"]
    assert view.events("Pod", PLUGIN, "ml-team") == []
    assert view.events("Pod", "train-0", "ml-team")[0]["reason"] == "FailedScheduling"
    assert view.events("Node", "gpu-node-1") == []


def test_node_events_ignore_namespace(tmp_path: Path) -> None:
    event = {
        "kind": "Event",
        "metadata": {"name": "n.1", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "n1"},
        "reason": "NodeNotReady",
        "lastTimestamp": "2024-05-01T00:00:00Z",
    }
    view = load_snapshot(write(tmp_path / "e.json", json.dumps(event)))
    assert len(view.events("Node", "n1")) == 1
    assert len(view.events("Node", "n1", "kube-system")) == 1


# -- selectors and lookups -----------------------------------------------------------------


def test_label_selectors() -> None:
    view = load_snapshot(DUMP)
    assert names(view.list("Pod", label_selector="app=train")) == ["train-0"]
    assert names(view.list("Pod", label_selector="app in (train,infer)")) == ["infer-0", "train-0"]
    assert names(view.list("Pod", "ml-team", label_selector="team notin (vision)")) == ["infer-0"]
    assert names(view.list("Pod", label_selector="team,app!=infer")) == ["train-0"]
    assert names(view.list("Pod", "gpu-operator", label_selector="!team")) == [
        "gpu-feature-discovery-m2x9q", PLUGIN]


def test_field_selectors() -> None:
    view = load_snapshot(DUMP)
    on_gpu = view.list("Pod", field_selector="spec.nodeName=gpu-node-1")
    assert names(on_gpu) == ["gpu-feature-discovery-m2x9q", "infer-0", PLUGIN]
    assert names(view.list("Pod", field_selector="spec.nodeName=")) == ["train-0"]
    assert names(view.list("Pod", "ml-team", field_selector="spec.nodeName=gpu-node-1")) == [
        "infer-0"]
    active = view.list("Pod", field_selector="status.phase!=Succeeded,status.phase!=Failed")
    assert names(active) == ["gpu-feature-discovery-m2x9q", PLUGIN, "train-0"]
    assert names(view.list("Pod", field_selector="metadata.name=train-0")) == ["train-0"]
    assert names(view.list("Node", field_selector="metadata.name=gpu-node-1")) == ["gpu-node-1"]


def test_node_name_selector_uses_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pods = [pod(f"p{i}", spec={"nodeName": f"n{i % 10}"}) for i in range(200)]
    path = write(tmp_path / "pods.json", json.dumps({"kind": "PodList", "items": pods}))
    view = load_snapshot(path)
    checked: list[str] = []
    real = match_fields

    def counting(expr: str | None, obj: dict[str, Any]) -> bool:
        checked.append(obj["metadata"]["name"])
        return real(expr, obj)

    monkeypatch.setattr(view_module, "match_fields", counting)
    assert len(view.list("Pod", field_selector="spec.nodeName=n3")) == 20
    assert len(checked) == 20  # only the node's pods were looked at


def test_bad_selector_is_a_view_error() -> None:
    view = load_snapshot(DUMP)
    with pytest.raises(ViewError):
        view.list("Pod", field_selector="spec.noSuchField=x")
    with pytest.raises(ViewError):
        view.list("Pod", label_selector="app in (a")


def test_get_by_namespace_and_cluster_scope(tmp_path: Path) -> None:
    write(tmp_path / "a.json", json.dumps(pod("web", "ml")))
    write(tmp_path / "b.yaml", "kind: Pod\napiVersion: v1\nmetadata: {name: web}\n")
    write(tmp_path / "n.yaml", "kind: Node\napiVersion: v1\nmetadata: {name: n1}\n")
    view = load_snapshot(tmp_path)
    assert view.get("Pod", "web", "ml") is not None
    found = view.get("Pod", "web")  # no namespace: "default", as kubectl does
    assert found is not None and found["metadata"]["namespace"] == "default"
    assert view.get("Pod", "web", "other") is None
    assert view.get("Node", "n1", "ignored") is not None
    assert names(view.list("Node", "ignored")) == ["n1"]
    assert names(view.list("Pod", "ml")) == ["web"]


def test_returned_lists_are_fresh() -> None:
    view = load_snapshot(DUMP)
    view.list("Pod").clear()
    assert len(view.list("Pod")) == 4


def test_unknown_kind_is_a_view_error() -> None:
    view = load_snapshot(DUMP)
    with pytest.raises(ViewError):
        view.list("Ingress")


def test_is_a_cluster_view() -> None:
    view: ClusterView = load_snapshot(DUMP)
    assert view.source.startswith("snapshot ")


# -- now() ---------------------------------------------------------------------------------


def test_now_is_newest_timestamp() -> None:
    # Newest: the FailedScheduling event's lastTimestamp (10:14:00) loses to the GPU
    # node's heartbeat at 10:14:51.
    assert load_snapshot(DUMP).now() == datetime(2024, 5, 2, 10, 14, 51, tzinfo=UTC)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"series": {"lastObservedTime": "2024-06-01T00:00:00.5Z"}}, "2024-06-01T00:00:00.5+00:00"),
        ({"eventTime": "2024-06-01T00:00:00.000001Z"}, "2024-06-01T00:00:00.000001+00:00"),
        ({"lastTimestamp": "2024-06-01T02:00:00+02:00"}, "2024-06-01T00:00:00+00:00"),
    ],
)
def test_now_reads_every_event_time(tmp_path: Path, extra: dict[str, Any], expected: str) -> None:
    event = {"kind": "Event", "metadata": {"name": "e", "namespace": "ml"},
             "involvedObject": {"kind": "Pod", "name": "p"},
             "firstTimestamp": "2024-06-01T00:00:00Z", "lastTimestamp": None}
    event.update(extra)
    view = load_snapshot(write(tmp_path / "e.json", json.dumps(event)))
    assert view.now() == datetime.fromisoformat(expected)


def test_now_reads_container_states_and_skips_deletion(tmp_path: Path) -> None:
    doc = pod(
        "p",
        metadata={"name": "p", "namespace": "ml", "creationTimestamp": "2024-01-01T00:00:00Z",
                  "deletionTimestamp": "2030-01-01T00:00:00Z"},
        status={"containerStatuses": [{"name": "c", "lastState": {"terminated": {
            "startedAt": "2024-01-01T00:01:00Z", "finishedAt": "2024-01-01T00:02:00Z"}}}]},
    )
    view = load_snapshot(write(tmp_path / "p.json", json.dumps(doc)))
    assert view.now() == datetime(2024, 1, 1, 0, 2, tzinfo=UTC)


def test_now_falls_back_to_wall_clock(tmp_path: Path) -> None:
    view = load_snapshot(write(tmp_path / "p.json", json.dumps(pod("p"))))
    before = datetime.now(UTC)
    assert before <= view.now() <= datetime.now(UTC)
    assert view.now().tzinfo is not None


# -- broken input ------------------------------------------------------------------------------


def test_invalid_yaml_document_costs_only_itself(tmp_path: Path) -> None:
    path = write(
        tmp_path / "cluster.yaml",
        """\
apiVersion: v1
kind: Pod
metadata: {name: a}
---
apiVersion: v1
kind: Pod
metadata:
  name: [b
  namespace: ml
---
apiVersion: v1
kind: Pod
metadata: {name: c}
""",
    )
    view = load_snapshot(path)
    assert names(view.list("Pod")) == ["a", "c"]
    [problem] = view.problems
    assert problem.path == str(path)
    assert problem.where == "line 9, column 12"  # where libyaml noticed the open `[`
    assert "document 2" in problem.message


def test_truncated_dump_json_keeps_complete_items(tmp_path: Path) -> None:
    items = [pod(f"p{i}", "ml", spec={"nodeName": "n1"}) for i in range(5)]
    text = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items},
                      indent=4)
    cut = text.index('"p3"')  # in the middle of the fourth pod
    path = write(tmp_path / "ml" / "pods.json", text[:cut])
    view = load_snapshot(tmp_path)
    assert names(view.list("Pod")) == ["p0", "p1", "p2"]
    assert all(p["kind"] == "Pod" and p["apiVersion"] == "v1" for p in view.list("Pod"))
    [problem] = view.problems
    assert problem.path == str(path)
    assert problem.where == line_and_column(text, cut)


def test_truncated_kubectl_get_list_uses_file_name(tmp_path: Path) -> None:
    # `kubectl get -o json` sorts keys: "kind" comes after "items" and is lost in the cut.
    items = [pod(f"p{i}", "ml") for i in range(3)]
    for item in items:
        del item["kind"]
    text = json.dumps({"apiVersion": "v1", "items": items, "kind": "List"}, indent=4)
    write(tmp_path / "pods.json", text[: text.index('"p2"')])
    view = load_snapshot(tmp_path)
    assert names(view.list("Pod")) == ["p0", "p1"]


def test_broken_item_in_the_middle_costs_only_itself(tmp_path: Path) -> None:
    items = [pod(f"p{i}", "ml") for i in range(4)]
    text = json.dumps({"kind": "PodList", "items": items}, indent=4)
    text = text.replace('"p1"', '"p1" oops', 1)
    path = write(tmp_path / "pods.json", text)
    view = load_snapshot(path)
    assert names(view.list("Pod")) == ["p0", "p2", "p3"]
    [problem] = view.problems
    assert problem.where is not None and problem.where.startswith(
        f"line {text[: text.index('oops')].count(chr(10)) + 1},")


def test_truncated_stream_keeps_everything_before_the_cut(tmp_path: Path) -> None:
    text = STREAM.read_text()
    cut = text.index('"gpu-feature-discovery-m2x9q"', text.index('"PodList"'))
    path = write(tmp_path / "dump.txt", text[:cut])
    view = load_snapshot(path)
    assert names(view.list("Node")) == ["cpu-node-1", "gpu-node-1"]
    assert names(view.list("Pod")) == [PLUGIN]
    assert len(view.events("Pod", PLUGIN, "gpu-operator")) == 2
    assert [p.path for p in view.problems] == [str(path)]


def test_unclosed_log_block(tmp_path: Path) -> None:
    text = (json.dumps(pod("p", "ml"), indent=4)
            + "\n==== START logs for container c of pod ml/p ====\nline one\nline t")
    path = write(tmp_path / "dump.txt", text)
    view = load_snapshot(path)
    assert view.logs("ml", "p", "c") == "line one\nline t"
    [problem] = view.problems
    start_line = text[: text.index("==== START")].count("\n") + 1
    assert (problem.path, problem.where) == (str(path), f"line {start_line}")


def test_empty_file_binary_junk_and_unreadable_kept_apart(tmp_path: Path) -> None:
    write(tmp_path / "good.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n")
    write(tmp_path / "empty.yaml", "")
    (tmp_path / "junk.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "bundle.tar.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 20)
    view = load_snapshot(tmp_path)
    assert names(view.list("Pod")) == ["a"]
    assert sorted(Path(p.path).name for p in view.problems) == [
        "bundle.tar.gz", "empty.yaml", "junk.bin"]
    assert all(p.where is None for p in view.problems)


def test_not_a_mapping_and_no_kind_are_problems(tmp_path: Path) -> None:
    path = write(
        tmp_path / "objs.yaml",
        """\
apiVersion: v1
kind: Pod
metadata: {name: a}
---
- just
- a list of strings
---
apiVersion: v1
metadata: {name: mystery}
---
42
""",
    )
    view = load_snapshot(path)
    assert names(view.list("Pod")) == ["a"]
    assert sorted(p.where or "" for p in problems_in(view, "objs.yaml")) == [
        "document 2, item 1", "document 2, item 2", "document 3", "document 4"]


def test_list_item_problems_name_the_item(tmp_path: Path) -> None:
    doc = {"kind": "List", "items": [
        {"kind": "Pod", "metadata": {"name": "a"}},
        {"metadata": {"name": "no-kind"}},
        {"kind": "Pod", "metadata": {}},
        "text",
    ]}
    view = load_snapshot(write(tmp_path / "list.json", json.dumps(doc)))
    assert names(view.list("Pod")) == ["a"]
    assert [p.where for p in view.problems] == [
        "document 1, item 2", "document 1, item 3", "document 1, item 4"]


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.json", '{\n  "kind": "Pod",\n  "metadata": {"name": x}\n}\n')
    write(tmp_path / "ok.json", json.dumps(pod("ok")))
    view = load_snapshot(tmp_path)
    assert names(view.list("Pod")) == ["ok"]
    [problem] = view.problems
    assert (problem.path, problem.where) == (str(path), "line 3, column 24")


def test_broken_symlink_is_a_problem(tmp_path: Path) -> None:
    write(tmp_path / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n")
    (tmp_path / "nodes.json").symlink_to(tmp_path / "gone.json")
    view = load_snapshot(tmp_path)
    assert [(Path(p.path).name, p.where) for p in view.problems] == [("nodes.json", None)]


def test_utf16_and_bom_files(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n"
    (tmp_path / "ps.yaml").write_bytes(text.encode("utf-16"))
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(pod("b")).encode())
    view = load_snapshot(tmp_path)
    assert names(view.list("Pod")) == ["a", "b"]


def test_missing_path_is_a_snapshot_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(SnapshotError) as info:
        load_snapshot(missing)
    assert str(missing) in str(info.value)
    assert isinstance(info.value, ViewError)


def test_nothing_readable_is_a_snapshot_error(tmp_path: Path) -> None:
    write(tmp_path / "broken.json", '{"kind": "Pod", "metadata": ')
    write(tmp_path / "README.md", "hello")
    with pytest.raises(SnapshotError) as info:
        load_snapshot(tmp_path)
    assert str(tmp_path) in str(info.value)
    assert "broken.json" in str(info.value)


def test_empty_directory_is_a_snapshot_error(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError):
        load_snapshot(tmp_path)


def test_single_empty_file_is_a_snapshot_error(tmp_path: Path) -> None:
    path = write(tmp_path / "cluster.yaml", "")
    with pytest.raises(SnapshotError) as info:
        load_snapshot(path)
    assert "cluster.yaml" in str(info.value)
