"""``FakeKube``: a Kubernetes API server for tests, real HTTP on 127.0.0.1.

    with FakeKube("tests/data/fake_kube/cluster.yaml", daemonset_delay=0.2) as fk:
        cfg = fk.write_kubeconfig(tmp_path / "kubeconfig")
        api = kubernetes.config.new_client_from_config(config_file=str(cfg))
        ...
        fk.faults.forbid("pods", verb="list", namespace="ml-team")
        fk.requests.paths("GET")

Served with ``http.server.ThreadingHTTPServer`` (HTTP/1.1 keep-alive, one thread per
connection, no dependencies). See ``store.py`` for the API semantics, ``faults.py`` for
fault injection, ``controllers.py`` for the DaemonSet controller.
"""

from __future__ import annotations

import contextlib
import email.utils
import socket
import threading
import time
import traceback
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson
import yaml

from handlers.kube.selectors import parse_field_selector

from . import status as st
from . import tables
from .controllers import DaemonSetController, PodTermination, Timers
from .faults import DEFAULT_USER, Faults, Raw, RequestInfo
from .requestlog import RequestLog, RequestRecord
from .resources import OPTIONAL, Registry, ResourceType
from .routing import TRUE, Route, route
from .store import Change, Entry, Obj, Store, dumps

JSON = "application/json"
VERSION = {
    "major": "1", "minor": "32", "gitVersion": "v1.32.0",
    "gitCommit": "70d3cc986aa8221cd1dfb1121852688902d3bf53", "gitTreeState": "clean",
    "buildDate": "2024-12-11T17:57:30Z", "goVersion": "go1.23.3", "compiler": "gc",
    "platform": "linux/amd64",
}


# -- HTTP -----------------------------------------------------------------------------------------


class _Dropped(Exception):
    """Close the connection without answering."""


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True
    request_queue_size = 512
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], fake: FakeKube) -> None:
        self.fake = fake
        self.conns: set[socket.socket] = set()
        self.conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.conns_lock:
            self.conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.conns_lock:
            self.conns.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self.conns_lock:
            conns = list(self.conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    record: RequestRecord
    logged: bool
    server_version = "fake-kube-apiserver"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def date_time_string(self, timestamp: float | None = None) -> str:
        # The Date header runs on the cluster's clock: a snapshot's "now", advancing from
        # the moment the server started, so ages read live equal ages read from the files.
        return email.utils.formatdate(self.server.fake.clock(), usegmt=True)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the RequestLog records requests

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_OPTIONS(self) -> None:
        self._handle()

    # -- plumbing --------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _log_request(self, status: int) -> None:
        """Record the request once its answer is decided (before the client can see it)."""
        if not self.logged:
            self.logged = True
            self.record.status = status
            self.server.fake.requests.add(self.record)

    def _send(self, code: int, body: bytes | Iterable[bytes], content_type: str = JSON,
              headers: Mapping[str, str] | None = None, length: int | None = None) -> None:
        self._log_request(code)
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if isinstance(body, bytes):
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return
        assert length is not None
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if self.command == "HEAD":
            return
        buf: list[bytes] = []
        size = 0
        for piece in body:
            buf.append(piece)
            size += len(piece)
            if size >= 1 << 20:
                self.wfile.write(b"".join(buf))
                buf, size = [], 0
        if buf:
            self.wfile.write(b"".join(buf))

    def _send_json(self, code: int, obj: Any) -> None:
        self._send(code, dumps(obj))

    def _send_error(self, err: st.ApiError) -> None:
        self._send(err.code, dumps(err.status()), headers=err.headers)

    # -- dispatch ----------------------------------------------------------------------------

    def _handle(self) -> None:
        fake = self.server.fake
        self.record = RequestRecord(self.command, self.path,
                                    user_agent=self.headers.get("User-Agent", ""))
        self.logged = False
        try:
            body = self._read_body()
            parts = urlsplit(self.path)
            query = dict(parse_qsl(parts.query, keep_blank_values=True))
            self._dispatch(fake, parts.path, query, body)
        except _Dropped:
            self.close_connection = True
            self._log_request(0)
            with contextlib.suppress(OSError):
                self.request.shutdown(socket.SHUT_RDWR)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
        except Exception as err:
            if not isinstance(err, st.ApiError):  # a bug in the fake: say so like the
                traceback.print_exc()  # apiserver says so of its own
                err = st.internal_error(f"{type(err).__name__}: {err}")
            if self.logged:  # the answer had started: all we can do is hang up
                self.close_connection = True
            else:
                with contextlib.suppress(OSError):
                    self._send_error(err)
        finally:
            self._log_request(0)

    def _dispatch(self, fake: FakeKube, path: str, query: dict[str, str], body: bytes) -> None:
        if fake.token is not None:
            auth = self.headers.get("Authorization", "")
            if auth != f"Bearer {fake.token}":
                raise st.unauthorized()
        rt_route = route(fake.registry, path)
        if rt_route is None:
            info = RequestInfo("get" if self.command == "GET" else self.command.lower(), None)
            self._apply_faults(fake, info)
            self._non_resource(fake, path.rstrip("/") or "/")
            return
        verb = rt_route.verb(self.command, query)
        self.record.verb = verb
        self.record.resource = rt_route.rtype.qualified + (
            f"/{rt_route.sub}" if rt_route.sub else "")
        self.record.namespace = rt_route.namespace
        self.record.dry_run = query.get("dryRun") == "All"  # also when a fault answers
        info = RequestInfo(verb, rt_route.rtype, rt_route.sub, rt_route.namespace,
                           rt_route.name)
        self._apply_faults(fake, info)
        self._resource(fake, rt_route, verb, query, body)

    def _apply_faults(self, fake: FakeKube, info: RequestInfo) -> None:
        verdict = fake.faults.check(info)
        if verdict.delay > 0:
            time.sleep(verdict.delay)
        if verdict.fault is None:
            return
        if verdict.fault.action == "drop":
            raise _Dropped()
        if verdict.fault.raw is not None:
            self._send_raw(verdict.fault.raw, verdict.fault.hits)
            raise _Dropped()  # hang up: what was sent may lie about its length
        raise verdict.fault.error(info)

    def _send_raw(self, raw: Raw, hit: int) -> None:
        body = raw.bytes_for(hit)
        self._log_request(raw.status)
        self.send_response(raw.status)
        self.send_header("Content-Type", JSON)
        self.send_header("Content-Length", str(len(body) if raw.length is None else raw.length))
        for k, v in raw.headers.items():
            self.send_header(k, v)
        self.end_headers()
        if not raw.trickle:
            self.wfile.write(body)
            return
        for i in range(len(body)):
            self.wfile.write(body[i:i + 1])
            time.sleep(raw.trickle)

    def _non_resource(self, fake: FakeKube, path: str) -> None:
        reg = fake.registry
        doc: Any = None
        if self.command not in ("GET", "HEAD"):
            raise st.method_not_allowed()
        if path == "/version":
            doc = VERSION
        elif path == "/api":
            doc = reg.api_versions(f"{fake.host}:{fake.port}")
        elif path == "/api/v1":
            doc = reg.resource_list("", "v1")
        elif path == "/apis":
            doc = reg.api_group_list()
        elif path.startswith("/apis/"):
            segs = path.split("/")[2:]
            if len(segs) == 1:
                doc = reg.api_group(segs[0])
            elif len(segs) == 2:
                doc = reg.resource_list(segs[0], segs[1])
        elif path in ("/healthz", "/livez", "/readyz"):
            self._send(200, b"ok", "text/plain; charset=utf-8")
            return
        if doc is None:
            raise st.path_not_found()
        # Aggregated discovery (apidiscovery.k8s.io/v2) is not served: answering the legacy
        # document as plain application/json makes clients fall back to legacy discovery.
        self._send_json(200, doc)

    def _resource(self, fake: FakeKube, r: Route, verb: str, q: dict[str, str],
                  body: bytes) -> None:
        store = fake.store
        rt = r.rtype
        ns = r.namespace or ""
        dry_run = q.get("dryRun") == "All"
        self.record.dry_run = dry_run
        if r.sub == "log":
            if verb != "get":
                raise st.method_not_allowed()
            assert r.name is not None
            text = store.logs(rt, ns, r.name, container=q.get("container") or None,
                              previous=q.get("previous") in TRUE,
                              tail_lines=_int(q, "tailLines"),
                              limit_bytes=_int(q, "limitBytes"))
            self._send(200, text.encode(), "text/plain")
            return
        if verb == "list":
            self._list(fake, r, q)
        elif verb == "watch":
            self._watch(fake, r, q)
        elif verb == "get":
            assert r.name is not None
            self._send_object(200, rt, store.get(rt, ns, r.name), q)
        elif verb == "create":
            if r.name is not None:
                raise st.method_not_allowed()
            obj = store.create(rt, ns, _parse(body), dry_run=dry_run)
            self._send_object(201, rt, obj, q)
        elif verb == "update":
            assert r.name is not None
            obj = store.update(rt, ns, r.name, _parse(body), subresource=r.sub, dry_run=dry_run)
            self._send_object(200, rt, obj, q)
        elif verb == "patch":
            assert r.name is not None
            obj = store.patch(rt, ns, r.name, body, self.headers.get("Content-Type", ""),
                              subresource=r.sub, dry_run=dry_run)
            self._send_object(200, rt, obj, q)
        elif verb == "delete":
            assert r.name is not None
            opts = _delete_options(body, q)
            dry_run = self.record.dry_run = dry_run or "All" in (opts.get("dryRun") or [])
            obj = store.delete(rt, ns, r.name, options=opts, dry_run=dry_run)
            self._send_json(200, obj)
        elif verb == "deletecollection":
            opts = _delete_options(body, q)
            dry_run = self.record.dry_run = dry_run or "All" in (opts.get("dryRun") or [])
            items = store.delete_collection(
                rt, r.namespace, label_selector=q.get("labelSelector"),
                field_selector=q.get("fieldSelector"), options=opts, dry_run=dry_run)
            self._send_json(200, {"kind": rt.list_kind, "apiVersion": rt.api_version,
                                  "metadata": {"resourceVersion": str(store.rv)},
                                  "items": [i for i in items if i.get("kind") != "Status"]})
        else:
            raise st.method_not_allowed()

    def _send_object(self, code: int, rt: ResourceType, obj: Obj, q: Mapping[str, str]) -> None:
        if tables.wants_table(self.headers.get("Accept", "")):
            meta = {"resourceVersion": obj.get("metadata", {}).get("resourceVersion", "")}
            self._send_json(code, tables.table(rt, [obj], q.get("includeObject", "Metadata"),
                                               meta))
            return
        self._send_json(code, obj)

    def _list(self, fake: FakeKube, r: Route, q: dict[str, str]) -> None:
        store = fake.store
        rt = r.rtype
        limit = _int(q, "limit") or 0
        res = store.list(rt, r.namespace, label_selector=q.get("labelSelector"),
                         field_selector=q.get("fieldSelector"), limit=limit,
                         continue_token=q.get("continue") or None)
        meta: Obj = {"resourceVersion": str(res.rv)}
        if res.continue_token:
            meta["continue"] = res.continue_token
        if res.remaining is not None:
            meta["remainingItemCount"] = res.remaining
        if tables.wants_table(self.headers.get("Accept", "")):
            objs = [store.obj(rt, e) for e in res.entries]
            self._send_json(200, tables.table(rt, objs, q.get("includeObject", "Metadata"),
                                              meta))
            return
        head = b'{"kind":"%s","apiVersion":"%s","metadata":%s,"items":[' % (
            rt.list_kind.encode(), rt.api_version.encode(), dumps(meta))
        items = [store.item(rt, e) for e in res.entries]
        length = len(head) + sum(len(i) for i in items) + max(0, len(items) - 1) + 2

        def pieces() -> Iterable[bytes]:
            yield head
            for n, item in enumerate(items):
                yield b"," + item if n else item
            yield b"]}"

        self._send(200, pieces(), length=length)

    # -- watch ---------------------------------------------------------------------------------

    def _watch(self, fake: FakeKube, r: Route, q: dict[str, str]) -> None:
        store = fake.store
        rt = r.rtype
        label_sel = q.get("labelSelector") or None
        fields = store.parse_fields(rt, q.get("fieldSelector"))
        store.check_labels(label_sel)
        if r.name is not None:  # legacy /watch/.../name
            fields = (*fields, ("metadata.name", "=", r.name))
        field_expr = ",".join(f"{k}{op}{v}" for k, op, v in fields) or None
        timeout = _int(q, "timeoutSeconds") or fake.watch_timeout
        deadline = time.monotonic() + timeout
        rv_param = q.get("resourceVersion") or ""
        bookmarks = q.get("allowWatchBookmarks") in TRUE
        send_initial = q.get("sendInitialEvents") in TRUE
        as_table = tables.wants_table(self.headers.get("Accept", ""))
        include = q.get("includeObject", "Metadata")
        start: int | None = None
        if rv_param not in ("", "0") and not send_initial:
            try:
                start = int(rv_param)
            except ValueError as err:
                raise st.bad_request(f"invalid resource version: {rv_param}") from err

        self._log_request(200)
        self.send_response(200)
        self.send_header("Content-Type", JSON)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def event(type_: str, obj_bytes: bytes) -> bytes:
            if as_table and type_ in ("ADDED", "MODIFIED", "DELETED"):
                obj = orjson.loads(obj_bytes)
                obj_bytes = dumps(tables.table(rt, [obj], include, {
                    "resourceVersion": obj["metadata"].get("resourceVersion", "")}))
            return b'{"type":"%s","object":%s}\n' % (type_.encode(), obj_bytes)

        def write(data: bytes) -> None:
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        def bookmark(rv: int, initial_end: bool = False) -> bytes:
            meta: Obj = {"resourceVersion": str(rv)}
            if initial_end:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            return event("BOOKMARK", dumps({"kind": rt.kind, "apiVersion": rt.api_version,
                                            "metadata": meta}))

        def expired(rv: int) -> bytes:
            err = st.expired(f"too old resource version: {rv} "
                             f"({store.oldest_watchable()})")
            return event("ERROR", dumps(err.status()))

        with store.lock:
            if start is None:
                initial = store.list(rt, r.namespace, label_selector=label_sel,
                                     field_selector=_raw_fields(q, r))
                pos = initial.rv
                first = [event("ADDED", store.full(rt, e)) for e in initial.entries]
            else:
                pos = start
                first = []
                if start < store.oldest_watchable():
                    first = [expired(start)]
                    pos = -1
        if send_initial and bookmarks and pos >= 0:
            first.append(bookmark(pos, initial_end=True))
        write(b"".join(first))
        while pos >= 0 and not store.closed and not fake.stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            changes = store.changes_after(pos, min(left, 0.5))
            if changes is None:
                write(expired(pos))
                pos = -1
                break
            out = []
            for ch in changes:
                pos = ch.rv
                ev = _watch_event(store, rt, r.namespace, label_sel, field_expr, ch)
                if ev is not None:
                    out.append(event(*ev))
            write(b"".join(out))
        if bookmarks and pos >= 0 and not store.closed:
            write(bookmark(pos))
        self.wfile.write(b"0\r\n\r\n")


def _raw_fields(q: Mapping[str, str], r: Route) -> str | None:
    expr = q.get("fieldSelector") or ""
    if r.name is not None:
        expr = f"{expr},metadata.name={r.name}" if expr else f"metadata.name={r.name}"
    return expr or None


def _watch_event(store: Store, rt: ResourceType, ns: str | None, label_sel: str | None,
                 field_expr: str | None, ch: Change) -> tuple[str, bytes] | None:
    if ch.storage != rt.storage:
        return None
    if ns is not None and ch.entry.ns != ns:
        return None
    # field_expr is already in storage field names (validated and translated).
    selected = Store.matcher(label_sel, parse_field_selector(field_expr) if field_expr else ())

    def ok(e: Entry | None) -> bool:
        return e is not None and selected(e)

    now_ok = ok(ch.entry)
    if ch.type == "ADDED":
        return ("ADDED", store.full(rt, ch.entry)) if now_ok else None
    if ch.type == "DELETED":
        return ("DELETED", store.full(rt, ch.entry)) if now_ok else None
    was_ok = ok(ch.old)
    if now_ok and was_ok:
        return "MODIFIED", store.full(rt, ch.entry)
    if now_ok:
        return "ADDED", store.full(rt, ch.entry)
    if was_ok and ch.old is not None:
        # No longer selected: DELETED with the previous state at the new resourceVersion.
        obj = store.obj(rt, ch.old)
        obj["metadata"]["resourceVersion"] = str(ch.rv)
        return "DELETED", dumps(obj)
    return None


def _int(q: Mapping[str, str], name: str) -> int | None:
    value = q.get(name)
    if not value:
        return None
    try:
        return int(value)
    except ValueError as err:
        raise st.bad_request(f"invalid value for {name}: {value!r}") from err


def _parse(body: bytes) -> Any:
    if not body:
        raise st.bad_request("the body of the request is empty")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        try:
            return yaml.safe_load(body)
        except yaml.YAMLError as err:
            raise st.bad_request(f"the body of the request could not be decoded: {err}") from err


def _delete_options(body: bytes, q: Mapping[str, str]) -> Obj:
    opts: Obj = {}
    if body.strip():
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            raise st.bad_request(f"invalid DeleteOptions: {err}") from err
        if isinstance(parsed, dict):
            opts.update(parsed)
    if q.get("gracePeriodSeconds"):
        opts["gracePeriodSeconds"] = _int(q, "gracePeriodSeconds")
    if q.get("propagationPolicy"):
        opts["propagationPolicy"] = q["propagationPolicy"]
    if q.get("orphanDependents"):
        opts["orphanDependents"] = q["orphanDependents"] in TRUE
    if q.get("dryRun"):
        opts["dryRun"] = [q["dryRun"]]
    return opts


# -- the public object -------------------------------------------------------------------------


class FakeKube:
    """A fake kube-apiserver over real HTTP. Start with ``with`` or ``start()``/``stop()``."""

    def __init__(
        self,
        snapshot: str | Path | None = None,
        *,
        token: str | None = None,
        daemonset_delay: float = 2.0,
        daemonset_outcome: Mapping[str, str] | None = None,
        pod_termination_delay: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        history: int = 10_000,
        watch_timeout: float = 1800.0,
        log_requests: str | Path | None = None,
        user: str = DEFAULT_USER,
        objects: Iterable[Obj] = (),
        absent_kinds: Iterable[str] = (),
        extra_kinds: Iterable[str] = (),
        hide_uncaptured: bool = True,
    ) -> None:
        self.registry = Registry()
        for kind in absent_kinds:  # e.g. "PodGroup": Volcano is not installed
            self.registry.remove(kind)
        for kind in extra_kinds:  # e.g. "NodeFeature" (see resources.OPTIONAL)
            self.registry.add(next(t for t in OPTIONAL if t.kind == kind))
        self.store = Store(self.registry, history=history)
        self.faults = Faults(user)
        self.requests = RequestLog(log_requests)
        self.token = token
        self.host = host
        self.port = port
        self.watch_timeout = watch_timeout
        self.stopping = False
        self.timers = Timers()
        self.daemonsets = DaemonSetController(self.store, self.timers, delay=daemonset_delay,
                                              outcomes=daemonset_outcome)
        self.pod_termination = PodTermination(self.store, self.timers, pod_termination_delay)
        self.snapshot = snapshot
        self.uncaptured: list[str] = []  # resources forbidden because the snapshot lacks them
        seeds: list[Obj] = list(objects)
        self._epoch = (time.time(), time.monotonic())
        if snapshot is not None:
            from .seed import snapshot_objects

            view_objs, log_source, now, uncaptured = snapshot_objects(snapshot, self.registry)
            self._epoch = (now.timestamp(), time.monotonic())
            # What the snapshot could not hold (a cluster-info dump has no quotas, limit
            # ranges, RuntimeClasses, PriorityClasses, ConfigMaps) is unreadable here too,
            # as the snapshot view reports it: serving it empty would read as "none in the
            # cluster" live, "not checked" from the snapshot.
            self.uncaptured = uncaptured if hide_uncaptured else []
            for plural in self.uncaptured:
                self.faults.forbid(plural)
            seeds = view_objs + seeds
            self.store.log_source = log_source
        self.store.seed(seeds)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeKube:
        if self._server is not None:
            return self
        self._server = _Server((self.host, self.port), self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name=f"fake-kube:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping = True
        self.timers.cancel_all()
        self.store.close()
        server = self._server
        if server is not None:
            server.shutdown()
            server.close_connections()
            server.server_close()  # joins the connection threads
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self.requests.close()

    def __enter__(self) -> FakeKube:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def clock(self) -> float:
        """The cluster's time now (seconds since the epoch): the snapshot's moment plus
        the time since the server started; the wall clock without a snapshot."""
        start, at = self._epoch
        return start + (time.monotonic() - at)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def write_kubeconfig(self, path: str | Path, context: str = "fake",
                         namespace: str = "default") -> Path:
        """A kubeconfig for this server (bearer token included when one is set)."""
        user: Obj = {"token": self.token} if self.token else {}
        config = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": user}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context,
                                                       "namespace": namespace}}],
            "current-context": context,
        }
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(config, sort_keys=False))
        return out
