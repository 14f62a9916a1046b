"""The fake Web API server (``FakeSlack``): ``ThreadingHTTPServer``, no dependencies."""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

BOT_USER = "UBOT0001"


@dataclass
class Call:
    method: str  # "chat.postMessage", "upload", "response_url"
    params: dict[str, Any]
    headers: dict[str, str]
    path: str
    status: int = 200
    response: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)

    @property
    def blocks(self) -> list[dict[str, Any]]:
        b = self.params.get("blocks")
        if isinstance(b, str):
            b = json.loads(b)
        return list(b or [])


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the listen backlog: bursts of 50+ connections (the bench)
    daemon_threads = True


@dataclass
class _Fault:
    method: str
    times: int
    status: int = 200
    error: str = ""
    retry_after: int = 1
    delay: float = 0.0


class FakeSlack:
    def __init__(self, *, socket_mode: bool = False) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._calls: list[Call] = []
        self._faults: list[_Fault] = []
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self.uploads: dict[str, bytes] = {}
        self.usergroups: dict[str, list[str]] = {}  # usergroups.users.list: ID -> members
        self.channels: dict[str, str] = {}  # channel ID -> name, for conversations.info
        self.socket: Any = None
        self._socket_mode = socket_mode
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="fake-slack", daemon=True)

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def start(self) -> FakeSlack:
        self._thread.start()
        if self._socket_mode:
            from .socket import FakeSocketMode

            self.socket = FakeSocketMode().start()
        return self

    def stop(self) -> None:
        if self.socket is not None:
            self.socket.stop()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- test API -------------------------------------------------------------------------------

    def response_url(self, key: str) -> str:
        return f"{self.url}/response/{key}"

    def calls(self, method: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def wait_for(self, method: str, n: int = 1, timeout: float = 10.0,
                 where: Any = None) -> list[Call]:
        """The first ``n`` calls of ``method`` (matching ``where(call)``), waiting for them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [c for c in self._calls if c.method == method
                         and (where is None or where(c))]
                if len(found) >= n:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [c.method for c in self._calls]
                    raise AssertionError(f"{n} x {method} not seen in {timeout}s; calls: {seen}")
                self._cond.wait(left)

    def rate_limit(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        with self._lock:
            self._faults.append(_Fault(method, times, 429, "ratelimited", retry_after))

    def fail(self, method: str, error: str, times: int = 1) -> None:
        with self._lock:
            self._faults.append(_Fault(method, times, 200, error))

    def slow(self, method: str, seconds: float, times: int = 1_000_000) -> None:
        with self._lock:
            self._faults.append(_Fault(method, times, 200, "", delay=seconds))

    def heal(self, method: str) -> None:
        """Drop the faults still pending for ``method`` (an outage ends), keeping the calls."""
        with self._lock:
            self._faults = [f for f in self._faults if f.method != method]

    def clear(self) -> None:
        with self._lock:
            self._calls.clear()
            self._faults.clear()

    # -- serving --------------------------------------------------------------------------------

    def _record(self, call: Call) -> None:
        with self._cond:
            self._calls.append(call)
            self._cond.notify_all()

    def _fault(self, method: str) -> _Fault | None:
        with self._lock:
            for f in self._faults:
                if f.method == method and f.times > 0:
                    f.times -= 1
                    return f
        return None

    def _api(self, method: str, params: dict[str, Any], headers: dict[str, str]
             ) -> tuple[int, dict[str, Any], dict[str, str]]:
        auth = headers.get("authorization", "")
        if not auth.startswith(("Bearer xox", "Bearer xapp-")):
            return 200, {"ok": False, "error": "not_authed"}, {}
        f = self._fault(method)
        if f is not None:
            if f.delay:
                time.sleep(f.delay)
            elif f.status == 429:
                return 429, {"ok": False, "error": "ratelimited"}, {
                    "Retry-After": str(f.retry_after)}
            else:
                return 200, {"ok": False, "error": f.error}, {}
        if method == "auth.test":
            return 200, {"ok": True, "url": "https://fake.slack.test/", "team": "Fake",
                         "user": "gpubot", "team_id": "T0001", "user_id": BOT_USER,
                         "bot_id": "B0001"}, {}
        if method == "apps.connections.open":
            if not auth.startswith("Bearer xapp-") or self.socket is None:
                return 200, {"ok": False, "error": "invalid_auth"}, {}
            return 200, {"ok": True, "url": self.socket.url}, {}
        if method == "chat.postMessage":
            ts = f"1700000000.{next(self._ts):06d}"
            return 200, {"ok": True, "channel": params.get("channel"), "ts": ts,
                         "message": {"ts": ts, "text": params.get("text", "")}}, {}
        if method == "chat.update":
            return 200, {"ok": True, "channel": params.get("channel"), "ts": params.get("ts"),
                         "text": params.get("text", "")}, {}
        if method == "chat.postEphemeral":
            return 200, {"ok": True, "message_ts": f"1700000000.{next(self._ts):06d}"}, {}
        if method == "files.getUploadURLExternal":
            if not params.get("filename") or not params.get("length"):
                return 200, {"ok": False, "error": "invalid_arguments"}, {}
            file_id = f"F{next(self._ids):08d}"
            return 200, {"ok": True, "upload_url": f"{self.url}/upload/{file_id}",
                         "file_id": file_id}, {}
        if method == "files.completeUploadExternal":
            files = params.get("files")
            if isinstance(files, str):
                files = json.loads(files)
            missing = [f["id"] for f in files or [] if f.get("id") not in self.uploads]
            if missing:
                return 200, {"ok": False, "error": "file_not_found"}, {}
            return 200, {"ok": True, "files": [{"id": f["id"], "title": f.get("title", "")}
                                               for f in files or []]}, {}
        if method == "usergroups.users.list":
            members = self.usergroups.get(str(params.get("usergroup")))
            if members is None:
                return 200, {"ok": False, "error": "no_such_subteam"}, {}
            return 200, {"ok": True, "users": list(members)}, {}
        if method == "conversations.info":
            name = self.channels.get(str(params.get("channel")))
            if name is None:
                return 200, {"ok": False, "error": "channel_not_found"}, {}
            return 200, {"ok": True, "channel": {"id": params.get("channel"), "name": name}}, {}
        if method == "files.info":
            return 200, {"ok": True, "file": {"id": params.get("file")}}, {}
        return 200, {"ok": False, "error": "unknown_method"}, {}


def _handler(fake: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None,
                  content_type: str = "application/json; charset=utf-8") -> None:
            body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            raw = self._body()
            headers = {k.lower(): v for k, v in self.headers.items()}
            if parts.path.startswith("/upload/"):
                file_id = parts.path.rsplit("/", 1)[-1]
                fake.uploads[file_id] = raw
                fake._record(Call("upload", {"file_id": file_id, "size": len(raw)}, headers,
                                  parts.path))
                self._send(200, f"OK - {len(raw)}".encode(), content_type="text/plain")
                return
            if parts.path.startswith("/response/"):
                fake._record(Call("response_url", json.loads(raw or b"{}"), headers,
                                  parts.path))
                self._send(200, b"ok", content_type="text/plain")
                return
            if not parts.path.startswith("/api/"):
                self._send(404, {"ok": False, "error": "not_found"})
                return
            method = parts.path[len("/api/"):]
            params: dict[str, Any] = dict(parse_qsl(parts.query))
            ctype = headers.get("content-type", "")
            if raw and ctype.startswith("application/json"):
                params.update(json.loads(raw))
            elif raw:
                params.update(parse_qsl(raw.decode(), keep_blank_values=True))
            status, payload, extra = fake._api(method, params, headers)
            fake._record(Call(method, params, headers, parts.path, status, payload))
            self._send(status, payload, extra)

        do_GET = _handle
        do_POST = _handle

    return Handler
