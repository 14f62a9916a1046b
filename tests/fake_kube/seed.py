"""Objects and logs of a snapshot (any format ``bot.snapshot.load_snapshot`` reads)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from handlers.view import ClusterView, ViewError

from .resources import DRA_GROUP, DRA_VERSIONS, Registry
from .store import Obj

LogSource = Callable[[str, str, str], str | None]


def snapshot_objects(path: str | Path,
                     registry: Registry | None = None,
                     ) -> tuple[list[Obj], LogSource, datetime, list[str]]:
    """Every object of a kind the fake serves, a function giving container logs, the
    snapshot's moment (its newest timestamp), and the resources (plurals) the snapshot
    could not hold: kinds a ``cluster-info dump`` leaves out and that no added file listed
    (``bot.snapshot.view.MUST_BE_CAPTURED``). Nothing returned refers to the parsed
    snapshot, so it is freed once seeding is done (150,000 pods: gigabytes)."""
    from bot.snapshot import load_snapshot
    from bot.snapshot.view import MUST_BE_CAPTURED

    view = load_snapshot(path)
    registry = registry or Registry()
    version = _dra_version(view)
    # Unless the test made the cluster serve no DRA at all (absent_kinds).
    if version is not None and any(t.group == DRA_GROUP for t in registry.types):
        registry.serve_dra(version)
    objs: list[Obj] = []
    for rt in registry.storages():
        if rt.kind not in view.kinds:
            continue
        try:
            found = view.list(rt.kind)
        except ViewError:
            continue
        for obj in found:
            if "kind" not in obj:
                obj = {"kind": rt.kind, **obj}
            objs.append(obj)
    texts = _container_logs(view, (o for o in objs if o["kind"] == "Pod"))
    uncaptured = [plural for kind, plural in MUST_BE_CAPTURED.items() if kind not in view.kinds]
    return (objs, lambda ns, pod, container: texts.get((ns, pod, container)), view.now(),
            uncaptured)


def _dra_version(view: ClusterView) -> str | None:
    """The resource.k8s.io version the snapshot's DRA objects were read at."""
    for kind in ("ResourceClaim", "ResourceSlice", "DeviceClass", "ResourceClaimTemplate"):
        try:
            found = view.list(kind)
        except ViewError:
            continue
        for obj in found:
            group, _, version = str(obj.get("apiVersion") or "").partition("/")
            if group == DRA_GROUP and version in DRA_VERSIONS:
                return version
    return None


def _container_logs(view: ClusterView, pods: Iterable[Obj]) -> dict[tuple[str, str, str], str]:
    """What the snapshot says each container logged (its log files and termination
    messages), read now; a snapshot holds logs for a few pods only."""
    texts: dict[tuple[str, str, str], str] = {}
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            container = str(c.get("name") or "")
            text = view.logs(ns, name, container)
            if text is not None:
                texts[(ns, name, container)] = text
    return texts
