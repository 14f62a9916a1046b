"""Reading what a snapshot holds through a ``ClusterView``: the live reader (``bot.live``,
with its timeouts, pagination, retries and RBAC messages) or another snapshot.

A read refused or failed is recorded as not captured, with the reader's own message (which
names the RBAC rule that would allow it), and the rest goes on; a fatal error (the API
server unreachable, credentials refused) ends the snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from bot.snapshot.manifest import Refusal
from handlers.view import ClusterView, Obj, ViewError

from . import plan

Say = Callable[[str], None]


@dataclass
class Capture:
    objects: dict[str, list[Obj]] = field(default_factory=dict)  # every kind read, even empty
    logs: list[tuple[str, str, str, str]] = field(default_factory=list)  # ns, pod, container, text
    refused: list[Refusal] = field(default_factory=list)
    namespace: str | None = None
    captured_at: datetime | None = None
    log_failures: int = 0  # logs the kubelet would not serve (other than 403)

    def refuse(self, kind: str, err: ViewError, *, namespace: str | None = None,
               outside: bool = False) -> None:
        if err.fatal:
            raise err
        self.refused.append(Refusal(kind, str(err), namespace, outside))


def collect(view: ClusterView, namespace: str | None = None, *, say: Say = lambda _: None,
            workers: int = 4) -> Capture:
    """Every kind of ``plan.kinds()`` (``namespace``: NS's and what its diagnoses need from
    elsewhere), then the logs of ``plan.log_pods``. Raises a fatal ViewError."""
    cap = Capture(namespace=namespace)
    for kind in plan.kinds():
        say(f"listing {kind}")
        if kind == "ConfigMap":
            _config_maps(view, cap)
        else:
            _kind(view, cap, kind)
    _logs(view, cap, say, workers)
    cap.captured_at = view.now()
    return cap


def _kind(view: ClusterView, cap: Capture, kind: str) -> None:
    ns = cap.namespace if plan.namespaced(kind) else None
    try:
        if ns is None:
            cap.objects[kind] = view.list(kind)
        elif kind not in plan.CLUSTER_WIDE:
            cap.objects[kind] = view.list(kind, ns)
        else:
            try:
                found = view.list(kind)
            except ViewError as err:  # a namespace's user: NS alone, the rest not captured
                cap.refuse(kind, err, outside=True)
                cap.objects[kind] = view.list(kind, ns)
            else:
                cap.objects[kind] = plan.keep_in_scope(kind, found, ns, cap.objects)
    except ViewError as err:
        cap.refuse(kind, err, namespace=ns)


def _config_maps(view: ClusterView, cap: Capture) -> None:
    """The GPU stack's config ConfigMaps and kubeadm's kubelet-config, nothing else."""
    found: list[Obj] = []
    for ns in sorted(plan.stack_namespaces(cap.objects)):
        try:
            found += plan.gpu_config_maps(view.list("ConfigMap", ns), cap.objects)
        except ViewError as err:
            cap.refuse("ConfigMap", err, namespace=ns)
    ns, name = plan.KUBELET_CONFIG
    if not any(plan.ns_name(c) == (ns, name) for c in found):
        try:
            kubelet = view.get("ConfigMap", name, ns)
        except ViewError as err:
            cap.refuse("ConfigMap", err, namespace=ns)
        else:
            found += [kubelet] if kubelet is not None else []
    cap.objects["ConfigMap"] = found


def _logs(view: ClusterView, cap: Capture, say: Say, workers: int) -> None:
    pods = plan.log_pods(cap.objects.get("Pod", []), view.now())
    if cap.namespace is not None:  # other teams' logs stay out of NS's snapshot
        pods = [p for p in pods if plan.ns_name(p)[0] == cap.namespace or plan.is_stack(p)]
    refused: set[str] = set()  # namespaces whose logs RBAC refuses: not asked again
    lock = threading.Lock()
    done = 0

    def read(pod: Obj) -> list[tuple[str, str, str, str]]:
        ns, name = plan.ns_name(pod)
        out = []
        for container in plan.ran(pod):
            if ns in refused:
                break
            try:
                text = view.logs(ns, name, container)
            except ViewError as err:
                if err.fatal:
                    raise
                with lock:
                    if getattr(err, "status", None) != 403:
                        cap.log_failures += 1
                    elif ns not in refused:
                        refused.add(ns)
                        cap.refuse(plan.LOGS, err, namespace=ns)
                continue
            if text:
                out.append((ns, name, container, text))
        return out

    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="gpubot-snapshot") as pool:
        for got in pool.map(read, pods):
            cap.logs += got
            done += 1
            say(f"reading logs: {done:,}/{len(pods):,} pods")
