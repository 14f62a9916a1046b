"""``LiveView``: the ``ClusterView`` over a live API server, and ``open_live_view``.

Lists are read as raw JSON pages (``limit=500`` + ``continue``) and parsed with orjson, never
turned into the client's model classes. Each item gets ``kind`` and ``apiVersion`` (list
items from the API lack them) and loses ``metadata.managedFields`` (as ``kubectl get -o
json`` shows them); Events are filled in to the core/v1 shape the snapshot view gives.

A kind whose API group is not served (a CRD that is not installed: Volcano, Kueue, the GPU
operator) lists as ``[]`` and is remembered for ``missing_ttl`` seconds; a list refused
(403) is refused again, without asking, for ``refused_ttl`` seconds.

``prefetch`` runs independent lists concurrently; a ``WatchCache`` (``cache=``) serves the
kinds it watches without any request once synced.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from bot.snapshot.events import event_time, involved_key
from bot.snapshot.logs import join_parts, termination_messages
from bot.snapshot.model import LoadProblem
from handlers.kube.selectors import SelectorError
from handlers.memo import Memos
from handlers.view import CLUSTER_SCOPED, Obj, ViewError

from .errors import ApiForbidden, KubeconfigError, Op
from .kinds import KINDS, KindInfo, kind_info
from .lean import Leaner
from .objects import Misfits
from .objects import prepare as _prepare
from .transport import RetryPolicy, Transport, gc_paused

if TYPE_CHECKING:
    from .cache import WatchCache

# (kind, namespace, label_selector, field_selector), as ``list()`` takes them, with the
# namespace None for a cluster-scoped kind and empty selectors as None.
ListKey = tuple[str, str | None, str | None, str | None]
_T = TypeVar("_T")
_R = TypeVar("_R")
_E = TypeVar("_E", bound=BaseException)

_EVENT = KINDS["Event"]
_POD = KINDS["Pod"]
_SPEC_LISTS = ("initContainers", "containers", "ephemeralContainers")
_POD_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
_LOGS_KEPT_CHARS = 8 << 20  # logs kept, in all
_LOG_ENTRY_CHARS = 256  # what a kept log counts besides its text: empty ones are kept too
_RUNNING = "running"  # ends the key of a running instance's log

_STATUS_LISTS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")


class LiveView:
    """A ``handlers.view.ClusterView`` reading a live cluster. Thread-safe.

    Objects and lists returned may be shared with the watch cache: callers must not change
    them.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        source: str | None = None,
        timeout: float = 10.0,
        max_workers: int = 8,
        cache: WatchCache | None = None,
        retry: RetryPolicy | None = None,
        page_size: int = 500,
        log_tail_lines: int = 200,
        log_limit_bytes: int = 1 << 20,
        missing_ttl: float = 300.0,
        prefetch_ttl: float = 60.0,
        unreachable_ttl: float = 15.0,
        refused_ttl: float = 60.0,
        live_log_ttl: float = 5.0,
        lean: bool = True,
    ) -> None:
        self.api_client = api_client
        self.transport = Transport(api_client, timeout=timeout, retry=retry,
                                   unreachable_ttl=unreachable_ttl)
        self._source = source or f"API server {self.transport.server}"
        self.misfits = Misfits(f"API server {self.transport.server}")
        # Direct reads share subtrees across lists (replicas on different nodes), as the
        # watch cache does; one list at a time (a Leaner is not thread-safe).
        self._leaner = Leaner()
        self._leaner_lock = threading.Lock()
        # False: lists keep every field (``gpubot snapshot`` writes whole objects).
        self.lean = lean
        self.cache = cache
        self.page_size = page_size
        self.log_tail_lines = log_tail_lines
        self.log_limit_bytes = log_limit_bytes
        self.missing_ttl = missing_ttl
        self.prefetch_ttl = prefetch_ttl
        self.refused_ttl = refused_ttl
        self.live_log_ttl = live_log_ttl
        self._max_workers = max(1, max_workers)
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._prefetched: dict[ListKey, tuple[float, Future[builtins.list[Obj]]]] = {}
        self._missing: dict[str, float] = {}
        # A finished container instance's log never changes: kept (see _log_key), so a
        # crash-looping plugin's logs are read once per restart, not per diagnosis. A
        # running one's grows: kept ``live_log_ttl`` seconds (its key -> until when), as
        # diagnoses in a row read the same plugin logs, each through the kubelet.
        self._logs: dict[tuple[Any, ...], str | None] = {}
        self._logs_size = 0
        self._live_until: dict[tuple[Any, ...], float] = {}
        # (kind, namespace) -> (until, the 403): a bot whose RBAC leaves a kind out would
        # otherwise ask, and be refused, on every diagnosis.
        self._refused: dict[tuple[str, str | None], tuple[float, ApiForbidden]] = {}
        self._group_versions: dict[str, builtins.list[str]] = {}  # group -> served versions
        self._cache_reads = 0
        self._own_cache = False
        # The kubeconfig context's namespace (in a pod: its own), the default namespace of
        # commands as in kubectl; None when the context names none.
        self.context_namespace: str | None = None

    @property
    def source(self) -> str:
        cache = self.cache
        if cache is not None and not cache.settled():
            # Answers still come, read from the API server directly: slower, as fresh.
            return f"{self._source} (watch cache syncing: read from the API server)"
        return self._source

    @property
    def server(self) -> str:
        return self.transport.server

    @property
    def memos(self) -> Memos | None:
        """The watch cache's (its objects are one evolving cluster state, see
        handlers/memo.py); None without one: direct reads hand out new objects every time,
        so each diagnosis keeps its own."""
        cache = self.cache
        return cache.memos if cache is not None else None

    @property
    def problems(self) -> builtins.list[LoadProblem]:
        """Objects the API answered that handlers cannot read (skipped), newest last."""
        return self.misfits.problems()

    @property
    def stats(self) -> dict[str, Any]:
        """Requests made and body bytes read, in all and per URL path (no query); retries;
        reads the watch cache answered without a request."""
        out = self.transport.stats()
        out["cache_reads"] = self._cache_reads
        return out

    # -- ClusterView ----------------------------------------------------------------------------

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[Obj]:
        info = self._served(kind_info(kind))
        key = _key(info, namespace, label_selector, field_selector)
        future = self._take_prefetched(key)
        if future is not None:
            return future.result()
        return self._list(info, key)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """``namespace=None`` on a namespaced kind means ``default``, as kubectl does."""
        info = self._served(kind_info(kind))
        ns = (namespace or "default") if info.namespaced else None
        cache = self._warm(kind, ns)
        if cache is not None:
            self._cache_reads += 1
            return cache.get(kind, name, ns)
        if self._is_missing(kind):
            return None
        op = Op("get", kind, info.group, info.plural, ns, info.namespaced, name=name)
        resp = self.transport.get(op, info.path(ns, name), accept=(404,))
        if resp.status == 404:
            if not info.builtin and not _object_not_found(resp.data):
                self._remember_missing(kind)
            return None
        obj = self.transport.decode(op, resp.data)
        got = _prepare(info, [obj], "", self.misfits)
        return got[0] if got else None

    def events(self, kind: str, name: str, namespace: str | None = None) -> builtins.list[Obj]:
        """Oldest first. ``namespace=None`` (or a cluster-scoped kind) matches any."""
        info = KINDS.get(kind)
        scoped = info.namespaced if info is not None else kind not in CLUSTER_SCOPED
        ns = namespace if scoped else None
        cache = self._warm("Event", None)
        if cache is not None:
            self._cache_reads += 1
            return cache.events(kind, name, ns)
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        op = Op("list", "Event", "", "events", ns, True)
        got = self.transport.list_all(op, _EVENT.path(ns), {"fieldSelector": selector},
                                      page_size=self.page_size)
        items = _prepare(_EVENT, got[0], got[2], self.misfits) if got else []
        if ns is not None:
            items = [e for e in items if (involved_key(e) or ("", "", ""))[2] == ns]
        return sorted(items, key=event_time)

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        """The last ``log_tail_lines`` lines of each container (all when ``container`` is
        None) that has run, the previous instance's first when it restarted, then the
        termination messages the logs do not already hold. A finished instance's log is
        read once; a running one's at most every ``live_log_ttl`` seconds."""
        pod_obj = self.get("Pod", pod, namespace)
        if pod_obj is None:
            return None
        ran = _ran(pod_obj)
        names = [container] if container else [n for n in _container_names(pod_obj)
                                              if n in ran]
        messages = termination_messages(pod_obj)
        # The kubelet serves a waiting container's last terminated instance as its current
        # log: ask for "previous" only when a newer instance exists. All asked at once.
        asks = [(name, previous) for name in names
                for previous in ((True, False) if ran.get(name) == (True, True) else (False,))]
        keys = {ask: _log_key(pod_obj, *ask) for ask in asks}
        now = time.monotonic()
        with self._lock:
            got = {ask: self._logs[key] for ask in asks
                   if (key := keys[ask]) is not None and key in self._logs
                   and self._live_until.get(key, now) >= now}
        fetch = [ask for ask in asks if ask not in got]
        fetched = self._concurrently(
            lambda ask: self._log(namespace, pod, ask[0], previous=ask[1]), fetch)
        with self._lock:
            for ask, text in zip(fetch, fetched, strict=True):
                got[ask] = text
                if (key := keys[ask]) is not None:
                    self._keep_log(key, text, running=key[-1] == _RUNNING, now=now)
        parts: builtins.list[str] = []
        for name in names:
            # none, empty or repeated: left out
            texts = builtins.list(dict.fromkeys(t for ask in asks if ask[0] == name
                                                if (t := got[ask])))
            parts.extend(texts)
            parts.extend(m for m in messages.get(name, [])
                         if not any(m.strip() in t for t in texts))
        return join_parts(parts) if parts else None

    def _keep_log(self, key: tuple[Any, ...], text: str | None, *, running: bool,
                  now: float) -> None:
        """Under ``self._lock``. ``text`` None: the kubelet did not serve the log (400, 404),
        which may change for a finished instance too (its log is not known yet)."""
        if running:
            if self.live_log_ttl <= 0:
                return
            self._live_until[key] = now + self.live_log_ttl
        elif text is None or key in self._logs:
            return  # a finished instance's log: kept once, and only as the kubelet served it
        if key in self._logs:  # a running instance's, read again after live_log_ttl
            self._logs_size -= _LOG_ENTRY_CHARS + len(self._logs.pop(key) or "")
        self._logs_size += _LOG_ENTRY_CHARS + len(text or "")
        self._logs[key] = text
        while self._logs_size > _LOGS_KEPT_CHARS:  # the oldest go first
            old = next(iter(self._logs))
            self._logs_size -= _LOG_ENTRY_CHARS + len(self._logs.pop(old) or "")
            self._live_until.pop(old, None)

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """Around a diagnosis: it reads one state of the watch cache (WatchCache.reading)."""
        return self.cache.reading() if self.cache is not None else contextlib.nullcontext()

    def pods_on(self, nodes: Iterable[str]) -> dict[str, tuple[Obj, ...]] | None:
        """The pods bound to each node, from the watch cache in one pass; None when the
        cache does not hold pods (the caller then lists them node by node)."""
        cache = self._warm("Pod", None)
        if cache is None:
            return None
        self._cache_reads += 1
        return cache.pods_on(nodes)

    def now(self) -> datetime:
        """The API server's clock when it answered anything (one GET /version if nothing
        was read yet), else ours."""
        if self.transport.server_now() is None:
            op = Op("get", "Version", "", "version", None, namespaced=False)
            with contextlib.suppress(ViewError):
                self.transport.get(op, "/version")
        return self.transport.server_now() or datetime.now(UTC)

    # -- prefetch -------------------------------------------------------------------------------

    def prefetch(
        self, requests: Iterable[tuple[str, str | None, str | None, str | None]]
    ) -> int:
        """Start ``(kind, namespace, label_selector, field_selector)`` lists concurrently in a
        pool of ``max_workers`` threads; the next ``list()`` with the same arguments takes
        the result (waiting for it if still running) instead of asking the server. A
        result is taken once, and dropped unread after ``prefetch_ttl`` seconds. Kinds the
        watch cache serves, and lists already in flight, are skipped. Returns how many
        lists were started. Errors surface from the ``list()`` that takes the result."""
        started = 0
        now = time.monotonic()
        with self._lock:
            for key, (at, fut) in builtins.list(self._prefetched.items()):
                if fut.done() and now - at > self.prefetch_ttl:
                    del self._prefetched[key]
            for kind, namespace, label_selector, field_selector in requests:
                info = KINDS.get(kind)
                if info is None or info.older or info.required:
                    continue  # its version is chosen on first read (_served)
                key = _key(info, namespace, label_selector, field_selector)
                if self._warm(kind, key[1]) is not None:
                    continue
                if key in self._prefetched:
                    continue
                fut = self._pool().submit(self._list, info, key)
                self._prefetched[key] = (now, fut)
                started += 1
        return started

    def _concurrently(self, fn: Callable[[_T], _R], items: Sequence[_T]) -> builtins.list[_R]:
        """``[fn(x) for x in items]``, run in the pool when there is more than one; the
        first error is raised."""
        if len(items) < 2:
            return [fn(x) for x in items]
        return builtins.list(self._pool().map(fn, items))

    def _take_prefetched(self, key: ListKey) -> Future[builtins.list[Obj]] | None:
        with self._lock:
            entry = self._prefetched.pop(key, None)
        if entry is None:
            return None
        at, fut = entry
        if fut.done() and time.monotonic() - at > self.prefetch_ttl:
            return None
        return fut

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._max_workers,
                                                thread_name_prefix="gpubot-live")
        return self._executor

    def close(self) -> None:
        """Stop the pool, the watch cache ``watch()`` started, and the client's
        connections."""
        if self._own_cache and self.cache is not None:
            self.cache.stop()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        close = getattr(self.api_client, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> LiveView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads ------------------------------------------------------------------------------

    def _list(self, info: KindInfo, key: ListKey) -> builtins.list[Obj]:
        _, ns, label_selector, field_selector = key
        cache = self._warm(info.kind, ns)
        if cache is not None:
            try:
                found = cache.list(info.kind, ns, label_selector=label_selector,
                                   field_selector=field_selector)
            except SelectorError:
                pass  # a field the local matcher does not know: let the server do it
            else:
                self._cache_reads += 1
                return found
        if self._is_missing(info.kind):
            return []
        refused = self._refused.get((info.kind, ns))
        if refused is not None and time.monotonic() < refused[0]:
            raise _fresh(refused[1])
        op = Op("list", info.kind, info.group, info.plural, ns, info.namespaced)
        query: dict[str, str] = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        # Lean like the watch cache's objects, page by page: a cold diagnosis lists the pods
        # of every GPU node, and their full objects made most of its peak memory.
        def lean(page: builtins.list[Obj], api_version: str) -> builtins.list[Obj]:
            items = _prepare(info, page, api_version, self.misfits)
            if not self.lean:
                return items
            with self._leaner_lock:
                return [self._leaner.lean(info.kind, o) for o in items]

        with gc_paused():
            try:
                got = self.transport.list_all(op, info.path(ns), query,
                                              page_size=self.page_size, each_page=lean)
            except ApiForbidden as err:
                self._refused[(info.kind, ns)] = (time.monotonic() + self.refused_ttl,
                                                  _fresh(err))
                raise
            if got is None:
                if not info.builtin:
                    self._remember_missing(info.kind)
                return []
            return got[0]

    def _served(self, info: KindInfo) -> KindInfo:
        """``info`` at the newest of its versions the server serves (one discovery GET per
        group). A required group that serves none of them is a ``ViewError``."""
        if not info.older and not info.required:
            return info
        if self._warm(info.kind, None) is not None:
            return info  # the watch cache found the served version itself
        with self._lock:
            known = self._group_versions.get(info.group)
        if known is None:
            op = Op("get", "APIGroup", info.group, "", None, namespaced=False)
            resp = self.transport.get(op, f"/apis/{info.group}", accept=(404,))
            known = []
            if resp.status != 404:
                doc = self.transport.decode(op, resp.data)
                known = [str(v.get("version")) for v in doc.get("versions") or []
                         if isinstance(v, dict)]
            with self._lock:
                self._group_versions[info.group] = known
        version = next((v for v in info.versions if v in known), None)
        if version is None:
            if info.required:
                raise ViewError(
                    f"{info.kind}: the API server serves none of {info.group} "
                    f"{', '.join(info.versions)} (Dynamic Resource Allocation needs "
                    "Kubernetes 1.32 or later with the group enabled)", kind=info.kind)
            return info
        return info if version == info.version else info.at(version)

    def _log(self, namespace: str, pod: str, container: str, *,
             previous: bool) -> str | None:
        """None when the kubelet serves no log (yet)."""
        op = Op("get", "Pod", "", "pods/log", namespace, True, name=pod)
        query = {"container": container, "tailLines": str(self.log_tail_lines),
                 "limitBytes": str(self.log_limit_bytes)}
        if previous:
            query["previous"] = "true"
        # 400: the container has not started, or has no previous instance; 404: pod gone.
        resp = self.transport.get(op, _POD.path(namespace, pod, "log"), query,
                                  accept=(400, 404))
        if resp.status != 200:
            return None
        return resp.data.decode("utf-8", "replace")

    def _warm(self, kind: str, namespace: str | None) -> WatchCache | None:
        """The watch cache, if it answers reads of ``kind`` in ``namespace``."""
        cache = self.cache
        return cache if cache is not None and cache.serves(kind, namespace) else None

    def _is_missing(self, kind: str) -> bool:
        until = self._missing.get(kind)
        return until is not None and time.monotonic() < until

    def _remember_missing(self, kind: str) -> None:
        self._missing[kind] = time.monotonic() + self.missing_ttl

    @property
    def missing_kinds(self) -> builtins.list[str]:
        """Kinds whose API is not served (CRD not installed), as last seen."""
        return sorted(k for k in self._missing if self._is_missing(k))

    def watch(self, kinds: Iterable[str] | None = None, **options: Any) -> WatchCache:
        """Start a ``WatchCache`` on this view's client and serve reads from it."""
        from .cache import DEFAULT_KINDS, WatchCache

        options.setdefault("timeout", self.transport.timeout)
        options.setdefault("retry", self.transport.retry)
        options.setdefault("misfits", self.misfits)
        cache = WatchCache(self.api_client, tuple(kinds or DEFAULT_KINDS), **options)
        cache.start()
        self.cache = cache
        self._own_cache = True
        return cache


def open_live_view(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    timeout: float = 10.0,
    max_workers: int = 8,
    retry: RetryPolicy | None = None,
    callers: int = 1,
) -> LiveView:
    """A ``LiveView`` of the cluster a kubeconfig context names, or of the cluster this pod
    runs in. ``callers``: threads that read through it at once (the bot's diagnosis
    workers), so that the connection pool holds a connection for each.

    In-cluster config (service account token) is used when ``KUBERNETES_SERVICE_HOST`` is
    set and no kubeconfig (argument or ``KUBECONFIG``) and no context is given. Otherwise
    the kubeconfig is ``kubeconfig``, else ``$KUBECONFIG`` (``:``-separated files merge),
    else ``~/.kube/config``, and the context ``context``, else its current-context. The
    kubeconfig is never written back (refreshed tokens are not persisted).
    Raises ``KubeconfigError`` (a ``ViewError``) when none of that is usable; no request is
    made before the first read.
    """
    # Typed as Any: the package ships type hints only in recent releases.
    kclient: Any = importlib.import_module("kubernetes.client")
    kconfig: Any = importlib.import_module("kubernetes.config")

    # type.__call__: a fresh Configuration even on releases whose metaclass hands out a
    # copy of the process-wide default (the kubernetes package does the same).
    configuration = type.__call__(kclient.Configuration)
    # A connection for each pool worker, each caller and each watch cache stream, and a few
    # spare: a smaller pool discards connections under load and opens new ones.
    from .cache import DEFAULT_KINDS

    configuration.connection_pool_maxsize = max_workers + callers + len(DEFAULT_KINDS) + 2
    env_config = os.environ.get("KUBECONFIG")
    if (kubeconfig is None and not env_config and context is None
            and os.environ.get("KUBERNETES_SERVICE_HOST")):
        try:
            kconfig.load_incluster_config(client_configuration=configuration)
        except Exception as err:  # ConfigException, OSError: the token or CA file
            raise KubeconfigError(f"cannot use the in-cluster service account: {err}") from err
        api_client = kclient.ApiClient(configuration)
        view = LiveView(api_client, timeout=timeout, max_workers=max_workers, retry=retry)
        view._source = f"in-cluster ({view.server})"
        with contextlib.suppress(OSError):
            view.context_namespace = Path(_POD_NAMESPACE).read_text().strip() or None
        return view

    shown = kubeconfig or env_config or "~/.kube/config"
    files = [os.path.expanduser(p) for p in shown.split(os.pathsep) if p]
    if not any(os.path.isfile(f) for f in files):
        raise KubeconfigError(f"no kubeconfig at {shown}: pass --kubeconfig, set KUBECONFIG, "
                              "or use a snapshot")
    config_file = os.pathsep.join(files)
    try:
        contexts, current = kconfig.list_kube_config_contexts(config_file=config_file)
    except Exception as err:  # ConfigException, YAML errors
        raise KubeconfigError(f"cannot read kubeconfig {shown}: {err}") from err
    names = [str(c.get("name")) for c in contexts or [] if isinstance(c, dict)]
    if context is not None and context not in names:
        raise KubeconfigError(f'context "{context}" is not in kubeconfig {shown} '
                              f"(it has: {', '.join(names) or 'none'})")
    name = context or (current or {}).get("name")
    if not name:
        raise KubeconfigError(f"kubeconfig {shown} has no current-context: pass --context "
                              f"(one of: {', '.join(names) or 'none'})")
    try:
        # What new_client_from_config does, spelled out: its client_configuration argument
        # (needed to size the pool) is missing from older releases (29). Given a
        # configuration, load_kube_config fills it and leaves the process default alone.
        kconfig.load_kube_config(config_file=config_file, context=context,
                                 client_configuration=configuration, persist_config=False)
        api_client = kclient.ApiClient(configuration)
    except Exception as err:  # ConfigException, exec plugin failures, bad cert files
        raise KubeconfigError(f'cannot use context "{name}" of kubeconfig {shown}: '
                              f"{err}") from err
    view = LiveView(api_client, timeout=timeout, max_workers=max_workers, retry=retry)
    view._source = f"context {name} ({view.server})"
    for c in contexts or []:
        if isinstance(c, dict) and c.get("name") == name and isinstance(c.get("context"), dict):
            namespace = c["context"].get("namespace")
            view.context_namespace = str(namespace) if namespace else None
    return view


# -- helpers ------------------------------------------------------------------------------------


def _key(info: KindInfo, namespace: str | None, label_selector: str | None,
         field_selector: str | None) -> ListKey:
    return (info.kind, namespace if info.namespaced else None, label_selector or None,
            field_selector or None)


def _object_not_found(body: bytes) -> bool:
    """A Status saying the object is missing, as opposed to the resource type (a CRD that is
    not installed answers ``404 page not found`` in plain text)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(doc, dict) or doc.get("kind") != "Status":
        return False
    details = doc.get("details")
    return doc.get("reason") == "NotFound" and isinstance(details, dict) and "name" in details


def _dicts(value: Any) -> builtins.list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, builtins.list) else []


def _container_names(pod: Obj) -> builtins.list[str]:
    spec = pod.get("spec") or {}
    names = [str(c.get("name", "")) for key in _SPEC_LISTS for c in _dicts(spec.get(key))]
    return builtins.list(dict.fromkeys(n for n in names if n))


def _log_key(pod: Obj, container: str, previous: bool) -> tuple[Any, ...] | None:
    """What names the container instance a log read returns, ending in its finishedAt when
    it has finished (its log is complete) and in ``_RUNNING`` while it runs (its log grows);
    None when the pod has no uid or the container no instance. Without ``previous`` the kubelet
    serves the current instance, or the last terminated one while the container waits
    (CrashLoopBackOff)."""
    uid = (pod.get("metadata") or {}).get("uid")
    status = pod.get("status") or {}
    for cs in (cs for key in _STATUS_LISTS for cs in _dicts(status.get(key))):
        if cs.get("name") != container:
            continue
        state, last = cs.get("state") or {}, cs.get("lastState") or {}
        if previous or "waiting" in state:
            instance = last.get("terminated")
        else:
            instance = state.get("terminated")
        if not uid:
            return None
        # restartCount numbers the instances: the current one, or previous's one before it
        if isinstance(instance, dict):
            return (uid, container, previous, cs.get("restartCount"), instance.get("finishedAt"))
        running = state.get("running")
        if previous or not isinstance(running, dict):
            return None
        return (uid, container, previous, cs.get("restartCount"), running.get("startedAt"),
                _RUNNING)
    return None


def _ran(pod: Obj) -> dict[str, tuple[bool, bool]]:
    """Containers that have run: name -> (an earlier instance terminated, an instance is
    running or terminated now)."""
    status = pod.get("status") or {}
    out: dict[str, tuple[bool, bool]] = {}
    for key in _STATUS_LISTS:
        for cs in _dicts(status.get(key)):
            state = cs.get("state") or {}
            last = cs.get("lastState") or {}
            before = "terminated" in last
            now = "running" in state or "terminated" in state
            if before or now:
                out[str(cs.get("name", ""))] = (before, now)
    return out



__all__ = ["ListKey", "LiveView", "open_live_view"]


def _fresh(err: _E) -> _E:
    """A copy of ``err`` without traceback or context. An exception kept and raised again
    would gather the frames of every raise, and through their locals hold the diagnosis
    that caught it (its Reader, every read): cyclic garbage a warm bot left at each
    diagnosis until a full collection."""
    new = type(err).__new__(type(err), *err.args)
    new.__dict__.update(err.__dict__)
    return new
