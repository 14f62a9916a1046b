"""``SnapshotView``: the ``ClusterView`` handlers read, over objects loaded from files.

Loading only sorts objects by kind; every other index (by namespace, by name, pods by
node, events by object), event normalisation and ``now()`` are built on first use, so a
command pays only for what it reads.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from handlers.kube.selectors import (
    SelectorError,
    match_fields,
    match_labels,
    parse_field_selector,
    parse_label_selector,
)
from handlers.memo import Memos
from handlers.view import CLUSTER_SCOPED, Obj, ViewError

from .events import event_time, involved_key, normalise_event
from .labelindex import LabelIndex
from .logs import LogStore
from .manifest import LOGS, Manifest
from .model import USED_KINDS, LoadProblem
from .timestamps import newest

_FieldReqs = tuple[tuple[str, str, str], ...]
_EventIndex = dict[tuple[str, str], list[tuple[str, Obj]]]  # (kind, name) -> (namespace, event)
# Reads files load_snapshot left for later: their objects by kind, problems, and the files
# that gave objects.
ReadDeferred = Callable[[builtins.list[Path]],
                        tuple[dict[str, builtins.list[Obj]], builtins.list[LoadProblem],
                              builtins.list[str]]]


# Kinds whose absence changes a verdict (no quota, no RuntimeClass): when a snapshot holds
# not even an empty list of them, reading them is an error, not an empty answer.
MUST_BE_CAPTURED = {
    "ResourceQuota": "resourcequotas",
    "LimitRange": "limitranges",
    "RuntimeClass": "runtimeclasses",
    "PriorityClass": "priorityclasses",
    "ConfigMap": "configmaps",
    "ControllerRevision": "controllerrevisions",
    # A claim's verdict rests on what is absent (no slice, no free device): Dynamic
    # Resource Allocation objects and Kueue queues must have been captured to be judged.
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "ResourceFlavor": "resourceflavors",
    # "No device-plugin DaemonSet" must mean none was deployed, not that a pods-and-nodes
    # snapshot left them out (cluster-info dump does hold them).
    "DaemonSet": "daemonsets",
}
# The kinds above that ``kubectl cluster-info dump`` leaves out.
NOT_IN_DUMP = frozenset(MUST_BE_CAPTURED) - {"DaemonSet"}


class SnapshotView:
    """A read-only cluster as a snapshot saw it. Objects are the loaded dicts themselves:
    callers must not change them.

    ``problems`` lists what could not be read; pod log directories, and a dump's lists of
    ReplicaSets and Deployments (``deferred``), are read on first ask, so their problems
    join the list then. ``files`` are the files that gave objects or logs.
    """

    def __init__(
        self,
        path: str,
        *,
        objects: dict[str, builtins.list[Obj]],
        kinds: set[str],
        stamps: set[Any],
        logs: LogStore,
        problems: builtins.list[LoadProblem],
        files: builtins.list[str],
        configz: dict[str, tuple[Obj, str]] | None = None,
        manifest: Manifest | None = None,
        from_dump: bool = False,
        deferred: dict[str, builtins.list[Path]] | None = None,
        read_deferred: ReadDeferred | None = None,
    ) -> None:
        self.path = path
        self.problems = problems
        self.files = files
        self._raw = objects
        self._kinds = frozenset(kinds | objects.keys())
        self._logs = logs
        self._configz = configz or {}
        # gpubot snapshot's own account: when it was taken, what it could not capture.
        self.manifest = manifest
        self.from_dump = from_dump  # part of it is `kubectl cluster-info dump` output
        self._unique: dict[str, builtins.list[Obj]] = {}
        self._by_name: dict[str, dict[tuple[str, str], Obj]] = {}
        self._by_namespace: dict[str, dict[str, builtins.list[Obj]]] = {}
        self._pods_by_node: dict[str, builtins.list[Obj]] | None = None
        self._events_by_object: _EventIndex | None = None
        self._stamps = stamps  # every object's (timestamps.stamp_reader), for now()
        self._now: datetime | None = None
        self._label_indexes: dict[str, LabelIndex] = {}
        self._deferred = dict(deferred or {})
        self._read_deferred = read_deferred
        self._reading = threading.Lock()  # a served snapshot is read by many threads
        # A snapshot is one cluster state for ever: what diagnoses work out from its objects
        # holds as long as the view (handlers/memo.py).
        self.memos = Memos()

    @property
    def source(self) -> str:
        return f"snapshot {self.path}"

    @property
    def kinds(self) -> frozenset[str]:
        """Kinds the snapshot holds, counting empty lists: a kind missing here was not
        captured at all, which is not the same as none existing."""
        return self._kinds

    # -- ClusterView ----------------------------------------------------------------------------

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[Obj]:
        self._check_kind(kind, namespace)
        try:
            fields = parse_field_selector(field_selector) if field_selector else ()
            if label_selector:
                parse_label_selector(label_selector)
        except SelectorError as err:
            raise ViewError(f"{kind}: {err}", kind=kind, namespace=namespace) from err
        namespace = None if kind in CLUSTER_SCOPED else namespace
        objs = self._candidates(kind, namespace, fields)
        if label_selector:
            objs = [o for o in self._by_labels(kind, objs, label_selector)
                    if match_labels(label_selector, _labels(o))]
        if field_selector:
            objs = [o for o in objs if match_fields(field_selector, o)]
        return builtins.list(objs)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        self._check_kind(kind, None if kind in CLUSTER_SCOPED else namespace or "default")
        return self._names(kind).get((self._namespace_key(kind, namespace), name))

    def events(self, kind: str, name: str, namespace: str | None = None) -> builtins.list[Obj]:
        """Oldest first. ``namespace=None`` (or a cluster-scoped kind) matches any."""
        self._not_captured("Event", None if kind in CLUSTER_SCOPED else namespace)
        found = self._event_index().get((kind, name), [])
        if namespace is not None and kind not in CLUSTER_SCOPED:
            found = [(ns, ev) for ns, ev in found if ns == namespace]
        return sorted((ev for _, ev in found), key=event_time)

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        self._not_captured(LOGS, namespace)
        pod_obj = self._names("Pod").get((namespace, pod))
        return self._logs.get(namespace, pod, container, pod_obj)

    def kubelet_configz(self, node: str) -> tuple[Obj, str] | None:
        """The node's kubelet configuration as its /configz gave it, and the file; None when
        the snapshot holds none for it (``handlers/kubeletconfig.py`` reads it)."""
        return self._configz.get(node)

    def now(self) -> datetime:
        """The newest timestamp in the snapshot; the wall clock only if it has none."""
        if self._now is None:
            taken = self.manifest.captured_at if self.manifest else None
            self._now = taken or newest(self._stamps) or datetime.now(UTC)
        return self._now

    # -- indexes ----------------------------------------------------------------------------

    def _not_captured(self, kind: str, namespace: str | None) -> None:
        """A ViewError when ``gpubot snapshot`` could not capture what this read needs."""
        refusal = self.manifest.refusal(kind, namespace) if self.manifest else None
        if refusal is not None:
            raise ViewError(f"{kind}{refusal.where()}: not captured in this snapshot: "
                            f"{refusal.reason}", kind=kind, namespace=namespace)

    def _check_kind(self, kind: str, namespace: str | None = None) -> None:
        self._not_captured(kind, namespace)
        if kind not in USED_KINDS:
            raise ViewError(f"{self.source}: {kind} objects are not read from snapshots",
                            kind=kind)
        if kind in MUST_BE_CAPTURED and kind not in self._kinds:
            # "None in the snapshot" would read as "none in the cluster": say it was not
            # captured, so that the checks needing it report "not checked" instead.
            raise ViewError(self._not_in_snapshot(kind), kind=kind)

    def _not_in_snapshot(self, kind: str) -> str:
        """Why a kind is missing and how to add it, as fits what made the snapshot."""
        plural = MUST_BE_CAPTURED[kind]
        if self.manifest is not None:
            # gpubot snapshot lists every kind it read, empty or refused (then in the manifest).
            return (f"{kind}: not in the snapshot, though gpubot snapshot collects {plural} "
                    f"(and names them as not captured when RBAC refuses them): was "
                    f"{plural}.json removed? Take the snapshot again with gpubot snapshot")
        add = f"add them: kubectl get {plural} -A -o yaml > extra.yaml"
        if self.from_dump and kind in NOT_IN_DUMP:
            return (f"{kind}: not in the snapshot (kubectl cluster-info dump leaves {plural} "
                    f"out); {add}")
        return f"{kind}: not in the snapshot; {add}"

    @staticmethod
    def _namespace_key(kind: str, namespace: str | None) -> str:
        # Cluster-scoped kinds ignore the namespace; namespaced ones default as kubectl does.
        return "" if kind in CLUSTER_SCOPED else namespace or "default"

    def _all(self, kind: str) -> builtins.list[Obj]:
        """Objects of a kind, one per (namespace, name): a later file wins over an earlier
        (a deferred file over any other)."""
        if kind not in self._unique:
            self._read_later_files(kind)
            objs = self._raw.get(kind, [])
            if kind == "Event":
                for ev in objs:
                    normalise_event(ev)
            scoped = kind not in CLUSTER_SCOPED
            names = {((o["metadata"]["namespace"] if scoped else ""), o["metadata"]["name"]): o
                     for o in objs}
            self._by_name[kind] = names
            # In the API server's order (its storage key: namespace, then name), so that a
            # diagnosis reads the same from a snapshot as from a live cluster.
            self._unique[kind] = [names[k] for k in sorted(names)]
        return self._unique[kind]

    def _read_later_files(self, kind: str) -> None:
        with self._reading:
            paths = self._deferred.pop(kind, None)
            if not paths or self._read_deferred is None:
                return
            objects, problems, files = self._read_deferred(paths)
            for k, objs in objects.items():
                self._raw.setdefault(k, []).extend(objs)
            self.problems.extend(problems)
            self.files.extend(files)

    def _names(self, kind: str) -> dict[tuple[str, str], Obj]:
        self._all(kind)
        return self._by_name[kind]

    def _in_namespace(self, kind: str, namespace: str) -> builtins.list[Obj]:
        index = self._by_namespace.get(kind)
        if index is None:
            index = {}
            for obj in self._all(kind):
                index.setdefault(obj["metadata"]["namespace"], []).append(obj)
            self._by_namespace[kind] = index
        return index.get(namespace, [])

    def _candidates(self, kind: str, namespace: str | None, fields: _FieldReqs) -> Sequence[Obj]:
        """The smallest indexed set the selectors can narrow to; filters still run after."""
        wanted = {key: value for key, op, value in fields if op == "="}
        if "metadata.name" in wanted:
            key = (self._namespace_key(kind, namespace), wanted["metadata.name"])
            if namespace is not None or kind in CLUSTER_SCOPED:
                found = self._names(kind).get(key)
                return [found] if found is not None else []
        if kind == "Pod" and "spec.nodeName" in wanted:
            pods = self._pods_on(wanted["spec.nodeName"])
            if namespace is None:
                return pods
            return [p for p in pods if p["metadata"]["namespace"] == namespace]
        if namespace is None:
            return self._all(kind)
        return self._in_namespace(kind, namespace)

    def _by_labels(self, kind: str, objs: Sequence[Obj], selector: str) -> Sequence[Obj]:
        """``objs`` narrowed by a label index when they are every object of ``kind``."""
        if objs is not self._unique.get(kind):
            return objs
        index = self._label_indexes.get(kind)
        if index is None:
            index = self._label_indexes[kind] = LabelIndex(objs)
        return index.candidates(selector)

    def pods_on(self, nodes: Iterable[str]) -> dict[str, tuple[Obj, ...]]:
        """The pods bound to each of ``nodes`` from one index (``Reader.pods_on`` would
        otherwise list them node by node). Raises ViewError when pods were not captured."""
        self._check_kind("Pod")
        return {n: tuple(self._pods_on(n)) for n in nodes}

    def _pods_on(self, node: str) -> builtins.list[Obj]:
        if self._pods_by_node is None:
            index: dict[str, builtins.list[Obj]] = {}
            for pod in self._all("Pod"):
                spec = pod.get("spec")
                name = (spec.get("nodeName") if isinstance(spec, dict) else None) or ""
                index.setdefault(name, []).append(pod)
            self._pods_by_node = index
        return self._pods_by_node.get(node, [])

    def _event_index(self) -> _EventIndex:
        if self._events_by_object is None:
            index: _EventIndex = {}
            for ev in self._all("Event"):
                key = involved_key(ev)
                if key is not None:
                    index.setdefault(key[:2], []).append((key[2], ev))
            self._events_by_object = index
        return self._events_by_object


def _labels(obj: Obj) -> dict[str, str] | None:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else None
