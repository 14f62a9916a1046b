"""The read-only cluster view handlers see, and the reader that guards it.

Handlers never know whether they read a snapshot or a live API server. Every object is a
plain ``kubectl get -o json``-shaped dict with ``kind`` set (``"Pod"``, ``"Node"``, ...).

Kinds are spelled as Kubernetes spells them: Node, Pod, Event, Namespace, DaemonSet,
Deployment, StatefulSet, ReplicaSet, Job, ResourceQuota, LimitRange, PriorityClass,
RuntimeClass, ConfigMap, PersistentVolume, PersistentVolumeClaim, PodGroup (Volcano),
Workload (Kueue), ClusterPolicy (GPU operator).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from handlers.runtime.source import MetricsSource

from handlers.kube.shape import cut_long_lines
from handlers.memo import Memos, use

Obj = dict[str, Any]

# Pods that hold node resources: what the scheduler counts (a field selector every view takes).
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"

CLUSTER_SCOPED = frozenset(
    {"Node", "Namespace", "PriorityClass", "RuntimeClass", "PersistentVolume", "ClusterPolicy",
     "ClusterQueue", "ResourceFlavor", "Queue", "DeviceClass", "ResourceSlice",
     "NodeResourceTopology"}
)


class ViewError(Exception):
    """A read the view could not do. ``str()`` is a message fit for the user.

    ``fatal`` errors (the API cannot be reached, our credentials are refused) mean no other
    read will work either: the Reader lets them through instead of carrying on with a
    diagnosis built on nothing.
    """

    fatal = False

    def __init__(self, message: str, *, kind: str = "", namespace: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.namespace = namespace


class ClusterView(Protocol):
    """What a diagnosis may read. Implementations: snapshot files, a live API server."""

    @property
    def source(self) -> str:
        """Where the data comes from, for the user: ``snapshot examples/x``, ``context prod``."""
        ...

    @property
    def memos(self) -> Memos | None:
        """What diagnoses remember of the cluster state this view hands out (see
        handlers/memo.py); None: each Reader keeps its own. A view that wraps another hands
        out the other's, or its diagnoses start cold every time."""
        ...

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[Obj]:
        """Objects of ``kind``; ``namespace=None`` means all namespaces. Raises ViewError."""
        ...

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """One object, or None when it does not exist. Raises ViewError."""
        ...

    def events(self, kind: str, name: str, namespace: str | None = None) -> builtins.list[Obj]:
        """Events about one object (core/v1 ``involvedObject`` or events.k8s.io ``regarding``)."""
        ...

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        """Container log text (all containers when ``container`` is None), None if unknown."""
        ...

    def now(self) -> datetime:
        """The moment the data describes: wall clock live, newest timestamp in a snapshot."""
        ...


class Reader:
    """Wraps a view for one diagnosis: caches every read (a diagnosis never fetches the
    same list twice) and turns a failed read into a "not checked" line instead of a crash.
    """

    def __init__(self, view: ClusterView, metrics: MetricsSource | None = None) -> None:
        self.view = view
        self.metrics = metrics  # Prometheus, when configured (handlers/runtime)
        self.unchecked: list[str] = []
        # Claims a check did not make because the evidence showed the opposite
        # (handlers/consistency.py): said to the user as "Not said".
        self.withheld: list[str] = []
        self._lists: dict[tuple[str, str | None, str | None, str | None], builtins.list[Obj]] = {}
        self._gets: dict[tuple[str, str, str | None], Obj | None] = {}
        self._events: dict[tuple[str, str, str | None], builtins.list[Obj]] = {}
        self._logs: dict[tuple[str, str, str | None], str | None] = {}
        self._node_pods: dict[str, Sequence[Obj]] = {}  # pods_on's answers
        self.failed_kinds: set[str] = set()
        # What checks work out once from this Reader's reads (the chain's inventories): it
        # lives and dies with the Reader, as those reads do.
        self.memo: dict[str, Any] = {}
        # What diagnoses remember between them, owned by the view's cluster state (one of
        # our own without one); current in this context while we live (handlers/memo.py).
        # (getattr: tests' hand-written views leave it out.)
        memos: Memos | None = getattr(view, "memos", None)
        self.memos = Memos() if memos is None else memos
        use(self)

    def _fail(self, err: ViewError, kind: str) -> None:
        if err.fatal:
            raise err
        self.failed_kinds.add(kind)
        msg = str(err)
        if msg not in self.unchecked:
            self.unchecked.append(msg)

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[Obj]:
        key = (kind, namespace, label_selector, field_selector)
        if key not in self._lists:
            try:
                self._lists[key] = self.view.list(
                    kind, namespace, label_selector=label_selector, field_selector=field_selector
                )
            except ViewError as err:
                self._fail(err, kind)
                self._lists[key] = []
        return self._lists[key]

    def prefetch(self, requests: Iterable[tuple[str, str | None, str | None, str | None]],
                 ) -> None:
        """Hint that these lists (kind, namespace, label_selector, field_selector) will be
        read: a live view fetches them concurrently in its bounded pool. Optional."""
        start = getattr(self.view, "prefetch", None)
        todo = [r for r in requests if r not in self._lists]
        if callable(start) and todo:
            start(todo)

    def pods_on(self, nodes: Iterable[str]) -> dict[str, Sequence[Obj]]:
        """The pods bound to each of ``nodes``, instead of every pod of the cluster: a
        watch cache answers them in one pass, else one field-selected list per node, fetched
        together. Each node's answer is kept for the rest of the diagnosis."""
        nodes = builtins.list(nodes)
        names = [n for n in dict.fromkeys(nodes) if n not in self._node_pods]
        bulk = getattr(self.view, "pods_on", None)  # a cache or an index answers all at once
        found: Mapping[str, Sequence[Obj]] | None = None
        if callable(bulk) and names:
            try:
                found = bulk(names)
            except ViewError:
                found = None  # the lists below say what could not be read
        if found is None:
            self.prefetch([("Pod", None, None, f"spec.nodeName={n}") for n in names])
            found = {n: self.list("Pod", field_selector=f"spec.nodeName={n}") for n in names}
        self._node_pods.update(found)
        return {n: self._node_pods[n] for n in nodes}

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        key = (kind, name, namespace)
        if key not in self._gets:
            try:
                self._gets[key] = self.view.get(kind, name, namespace)
            except ViewError as err:
                self._fail(err, kind)
                self._gets[key] = None
        return self._gets[key]

    def events(self, kind: str, name: str, namespace: str | None = None) -> builtins.list[Obj]:
        key = (kind, name, namespace)
        if key not in self._events:
            try:
                self._events[key] = self.view.events(kind, name, namespace)
            except ViewError as err:
                self._fail(err, "Event")
                self._events[key] = []
        return self._events[key]

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        key = (namespace, pod, container)
        if key not in self._logs:
            try:
                text = self.view.logs(namespace, pod, container)
                self._logs[key] = cut_long_lines(text) if text else text
            except ViewError as err:
                self._fail(err, "Pod/log")
                self._logs[key] = None
        return self._logs[key]

    def now(self) -> datetime:
        return self.view.now()

    def readable(self, kind: str) -> bool:
        """False once a read of ``kind`` failed: checks that need it report "not checked"."""
        return kind not in self.failed_kinds


def names(objs: Iterable[Obj]) -> list[str]:
    return [o.get("metadata", {}).get("name", "") for o in objs]
