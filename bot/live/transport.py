"""HTTP to the API server: raw JSON GETs with timeouts, bounded retries, and counters.

Requests go through the urllib3 pool the kubernetes ``ApiClient`` built from the kubeconfig
(TLS, client certificates, proxy) with the Authorization header its ``Configuration``
computes per request (so exec plugins and in-cluster token files refresh as they do in the
client). ``ApiClient.call_api`` is not used: its signature changed between client releases
(the openapi-generator 7 rewrite), and its GET path retries on its own; this module needs
the response bytes, the status and ``Retry-After`` on every release the ``>=29`` pin allows.

Retries, per request (``RetryPolicy``):
- 429: wait ``Retry-After`` (capped at ``max_retry_after``), at most ``attempts`` tries;
- 5xx and dropped connections (``ProtocolError``, ``RemoteDisconnected``): exponential
  backoff with jitter, at most ``attempts`` tries;
- connection refused, name not resolved, TLS failure, timeouts: not retried. Connection
  failures are remembered for ``unreachable_ttl`` seconds, so that a diagnosis of thirty
  reads against a dead server says so once, quickly, instead of thirty times slowly.
"""

from __future__ import annotations

import gc
import http.client
import random
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlencode

import orjson
import urllib3
from urllib3 import exceptions as u3

from handlers.view import Obj

from . import errors
from .errors import ApiUnreachable, LiveError, Op


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3  # tries in all, for 429, 5xx and dropped connections
    backoff: float = 0.5  # first wait, doubled each try, with jitter (x0.5..1)
    max_backoff: float = 8.0
    max_retry_after: float = 10.0  # a longer Retry-After is cut to this

    def delay(self, failures: int) -> float:
        base = min(self.max_backoff, self.backoff * 2 ** (failures - 1))
        return float(base * random.uniform(0.5, 1.0))


@dataclass
class Response:
    status: int
    reason: str
    headers: Mapping[str, str]
    data: bytes


@dataclass
class _PathStats:
    requests: int = 0
    bytes: int = 0


@dataclass
class _Stats:
    requests: int = 0
    bytes: int = 0
    retries: int = 0
    by_path: dict[str, _PathStats] = field(default_factory=dict)
    # For /metrics: requests by (verb, HTTP code or "error"), retries by (verb, reason).
    by_code: dict[tuple[str, str], int] = field(default_factory=dict)
    retry_reasons: dict[tuple[str, str], int] = field(default_factory=dict)


_DROPPED = (u3.ProtocolError, http.client.HTTPException, ConnectionError)
MAX_RESPONSE = 256 << 20  # a page of 500 large pods is ~5 MB; pod logs are asked with limitBytes
MAX_PAGES = 10_000  # 5 million objects at 500 a page: a list that goes on is a broken server
MAX_BACKOFF_MEMORY = 300.0  # seconds a long Retry-After is remembered at most
_CHUNK = 1 << 16
_NAME_RESOLUTION = getattr(u3, "NameResolutionError", None)


class Transport:
    """Requests to one API server (GETs; writes through ``send``). Thread-safe."""

    def __init__(
        self,
        api_client: Any,
        *,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        unreachable_ttl: float = 15.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._config = api_client.configuration
        self._base = str(self._config.host).rstrip("/")
        self.server = errors.redact_url(self._base)
        self._pool: urllib3.PoolManager = api_client.rest_client.pool_manager
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.unreachable_ttl = unreachable_ttl
        self._sleep = sleep
        self._lock = threading.Lock()
        self._stats = _Stats()
        self._down: tuple[float, str] | None = None
        self._throttled: tuple[float, float] | None = None  # (until, Retry-After asked)
        self.max_pages = MAX_PAGES
        self.server_clock: tuple[datetime, float] | None = None
        # Called after each page of a list: (kind, pages so far, objects so far).
        self.on_page: Callable[[str, int, int], None] | None = None

    # -- counters ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """``{"requests": n, "bytes": n, "retries": n, "by_path": {path: {...}}}``; bytes are
        response bodies as decoded (after gzip), query strings are not part of the path."""
        with self._lock:
            s = self._stats
            return {
                "requests": s.requests,
                "bytes": s.bytes,
                "retries": s.retries,
                "by_path": {p: {"requests": v.requests, "bytes": v.bytes}
                            for p, v in sorted(s.by_path.items())},
            }

    def counts(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
        """(requests by (verb, code), retries by (verb, reason)), copies."""
        with self._lock:
            return dict(self._stats.by_code), dict(self._stats.retry_reasons)

    def _tally(self, table: dict[tuple[str, str], int], verb: str, label: str) -> None:
        with self._lock:
            table[(verb, label)] = table.get((verb, label), 0) + 1

    def count(self, path: str, *, requests: int = 0, nbytes: int = 0, retries: int = 0) -> None:
        with self._lock:
            s = self._stats
            s.requests += requests
            s.bytes += nbytes
            s.retries += retries
            p = s.by_path.setdefault(path, _PathStats())
            p.requests += requests
            p.bytes += nbytes

    # -- requests ---------------------------------------------------------------------------

    def headers(self) -> dict[str, str]:
        out = {"Accept": "application/json", "Accept-Encoding": "gzip",
               "User-Agent": "gpubot/0.1"}
        for setting in self._config.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                out[setting["key"]] = setting["value"]
        return out

    def get(
        self, op: Op, path: str, query: Mapping[str, str] | None = None, *,
        accept: Collection[int] = (),
    ) -> Response:
        """The 2xx response (or one whose status is in ``accept``), after the retries."""
        attempts = max(1, self.retry.attempts)
        for attempt in range(1, attempts + 1):
            last = attempt == attempts
            try:
                started = time.monotonic()
                resp = self._send(op, path, query, stream=False)
                data = self._read(resp, path, op, started)
            except _DROPPED as err:
                if last:
                    raise errors.dropped(self.server, op, attempts) from err
                self._wait(path, self.retry.delay(attempt), op, "dropped")
                continue
            result = Response(resp.status, resp.reason or "", _header_map(resp), data)
            if 200 <= resp.status < 300 or resp.status in accept:
                return result
            if resp.status == 429 or resp.status >= 500:
                if last:
                    if resp.status == 429:
                        raise errors.throttled(self.server, op, attempts)
                    raise errors.server_error(self.server, op, resp.status, result.reason,
                                              data, attempts)
                after = _retry_after(result)
                if after is not None and after > max(self.timeout, self.retry.max_retry_after):
                    # Longer than the request itself may take: waiting (even cut to
                    # max_retry_after, again and again) would stretch the command to
                    # minutes. Say so now, and do not ask again before the server said to.
                    self._throttled = (time.monotonic() + min(after, MAX_BACKOFF_MEMORY),
                                       after)
                    raise errors.throttled_for(self.server, op, after)
                delay = (min(after, self.retry.max_retry_after) if after is not None
                         else self.retry.delay(attempt))
                self._wait(path, delay, op, str(resp.status))
                continue
            raise self.status_error(op, result)
        raise AssertionError("unreachable")  # pragma: no cover

    def send(
        self, op: Op, method: str, path: str, *, query: Mapping[str, str] | None = None,
        body: Any = None, content_type: str = "application/json",
        accept: Collection[int] = (),
    ) -> Response:
        """A write (POST, PUT, PATCH, DELETE) with a JSON body: the 2xx response, or one whose
        status is in ``accept``. Only a 429 is retried (the server did not act on it): after a
        5xx or a dropped connection the write may have happened, so the caller decides."""
        data = orjson.dumps(body) if body is not None else None
        attempts = max(1, self.retry.attempts)
        for attempt in range(1, attempts + 1):
            try:
                resp = self._send(op, path, query, stream=False, method=method, body=data,
                                  content_type=content_type)
                raw = self._read(resp, path, op)
            except _DROPPED as err:
                raise errors.dropped(self.server, op, 1) from err
            result = Response(resp.status, resp.reason or "", _header_map(resp), raw)
            if 200 <= resp.status < 300 or resp.status in accept:
                return result
            if resp.status == 429 and attempt < attempts:
                after = _retry_after(result)
                self._wait(path, min(after if after is not None else self.retry.delay(attempt),
                                     self.retry.max_retry_after), op, "429")
                continue
            if resp.status == 429:
                raise errors.throttled(self.server, op, attempts)
            if resp.status >= 500:
                raise errors.server_error(self.server, op, resp.status, result.reason, raw, 1)
            raise self.status_error(op, result)
        raise AssertionError("unreachable")  # pragma: no cover

    def stream(
        self, op: Op, path: str, query: Mapping[str, str], *, read_timeout: float,
        accept: Collection[int] = (),
    ) -> urllib3.BaseHTTPResponse | Response:
        """An unread 2xx response to iterate (a watch), else the read error ``Response`` when
        its status is in ``accept``; raises ``LiveError`` otherwise. No retries here: the
        watch loop has its own backoff."""
        try:
            resp = self._send(op, path, query, stream=True, read_timeout=read_timeout)
            if 200 <= resp.status < 300:
                return resp
            data = self._read(resp, path, op)
        except _DROPPED as err:
            raise errors.dropped(self.server, op, 1) from err
        result = Response(resp.status, resp.reason or "", _header_map(resp), data)
        if resp.status in accept:
            return result
        raise self.status_error(op, result)

    def list_all(
        self, op: Op, path: str, query: Mapping[str, str] | None = None, *, page_size: int = 500,
        each_page: Callable[[list[Obj], str], list[Obj]] | None = None,
    ) -> tuple[list[Obj], str, str] | None:
        """All items of a paged list, the list's resourceVersion and apiVersion; None on 404
        (the resource is not served: a CRD that is not installed).

        ``each_page(items, apiVersion)`` transforms every page as it arrives: the watch cache
        keeps lean objects, and a whole list of full ones never exists at once."""
        restarted = False
        items: list[Obj] = []
        token = ""
        tokens: set[str] = set()
        pages = 0
        version = api_version = ""
        while True:
            q = dict(query or {})
            q["limit"] = str(page_size)
            if token:
                q["continue"] = token
            resp = self.get(op, path, q, accept=(404, 410))
            if resp.status == 404:
                return None
            if resp.status == 410:
                # The continue token expired (the list took longer than the etcd compaction
                # window): start over once, from a fresh snapshot.
                if restarted or not token:
                    raise self.status_error(op, resp)
                restarted, items, token, tokens, pages = True, [], "", set(), 0
                continue
            doc = self.decode(op, resp.data)
            meta = doc.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            if not items:
                version = _text(meta.get("resourceVersion"))
                api_version = _text(doc.get("apiVersion"))
            page = doc.get("items")
            if page is not None and not isinstance(page, list):
                raise errors.bad_answer(self.server, op, "items that are not a list")
            page = page or []  # items that are not objects: prepare() drops them
            del doc
            items.extend(each_page(page, api_version) if each_page else page)
            pages += 1
            if self.on_page is not None:
                self.on_page(op.kind, pages, len(items))
            token = _text(meta.get("continue"))
            if not token:
                return items, version, api_version
            if token in tokens or pages >= self.max_pages:
                raise errors.bad_answer(
                    self.server, op, "a list whose pages never end (the continue token "
                    + ("repeats)" if token in tokens else f"still set after {pages} pages)"))
            tokens.add(token)

    def decode(self, op: Op, data: bytes) -> Obj:
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as err:
            raise errors.not_json(self.server, op, data) from err
        if not isinstance(doc, dict):
            raise errors.not_json(self.server, op, data)
        return doc

    def status_error(self, op: Op, resp: Response) -> LiveError:
        if resp.status == 401:
            return errors.unauthorized(self.server, op)
        if resp.status == 403:
            return errors.forbidden(self.server, op, resp.data)
        return errors.bad_status(self.server, op, resp.status, resp.reason, resp.data)

    # -- plumbing ---------------------------------------------------------------------------

    def _send(
        self, op: Op, path: str, query: Mapping[str, str] | None, *, stream: bool,
        read_timeout: float | None = None, method: str = "GET", body: bytes | None = None,
        content_type: str = "application/json",
    ) -> urllib3.BaseHTTPResponse:
        throttled = self._throttled
        if throttled is not None:
            if time.monotonic() < throttled[0]:
                raise errors.throttled_for(self.server, op, throttled[1])
            self._throttled = None
        down = self._down
        if down is not None:
            if time.monotonic() < down[0]:
                raise ApiUnreachable(down[1], server=self.server, op=op)
            self._down = None
        url = self._base + path + ("?" + urlencode(query) if query else "")
        timeout = urllib3.Timeout(connect=self.timeout, read=read_timeout or self.timeout)
        self.count(path, requests=1)
        headers = self.headers()
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            resp = self._pool.request(
                method, url, headers=headers, body=body, timeout=timeout, retries=False,
                redirect=False, preload_content=False,
            )
            self._tally(self._stats.by_code, op.verb, str(resp.status))
            self._note_date(resp)
            return resp
        except _DROPPED:
            self._tally(self._stats.by_code, op.verb, "error")
            raise
        except u3.HTTPError as err:
            self._tally(self._stats.by_code, op.verb, "error")
            why, remember = self._why(err, read_timeout or self.timeout)
            if remember:
                self._down = (time.monotonic() + self.unreachable_ttl, why)
            raise ApiUnreachable(why, server=self.server, op=op) from err

    def _note_date(self, resp: urllib3.BaseHTTPResponse) -> None:
        date = resp.headers.get("date")
        if not date:
            return
        try:
            server_now = parsedate_to_datetime(date)
        except (TypeError, ValueError):
            return
        if server_now.tzinfo is None:
            server_now = server_now.replace(tzinfo=UTC)
        self.server_clock = (server_now, time.monotonic())

    def server_now(self) -> datetime | None:
        """The API server's clock (its Date header, advanced by the time since): ages of
        events and pods are measured against the clock that stamped them, not ours."""
        if self.server_clock is None:
            return None
        then, at = self.server_clock
        return then + timedelta(seconds=time.monotonic() - at)

    def _read(self, resp: urllib3.BaseHTTPResponse, path: str, op: Op,
              started: float | None = None) -> bytes:
        """The whole body, within ``timeout`` seconds of ``started`` (a body trickled a
        byte at a time never trips a per-read timeout) and ``MAX_RESPONSE`` bytes."""
        deadline = (time.monotonic() if started is None else started) + self.timeout
        declared = resp.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > MAX_RESPONSE:
            resp.close()
            raise errors.bad_answer(self.server, op, f"a body of {int(declared) >> 20} MB, "
                                    f"more than gpubot reads ({MAX_RESPONSE >> 20} MB)")
        chunks: list[bytes] = []
        size = 0
        done = False
        try:
            while True:
                if time.monotonic() > deadline:
                    raise errors.bad_answer(self.server, op, "a body that came too slowly "
                                            f"(not all there after {_secs(self.timeout)})")
                chunk = resp.read1(_CHUNK)  # returns after one receive: the clock is seen
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_RESPONSE:
                    raise errors.bad_answer(self.server, op, "a body larger than "
                                            f"{MAX_RESPONSE >> 20} MB")
                chunks.append(chunk)
            done = True
        except u3.ReadTimeoutError as err:
            raise ApiUnreachable(f"timed out after {_secs(self.timeout)} reading the answer",
                                 server=self.server, op=op) from err
        except u3.DecodeError as err:
            encoding = resp.headers.get("content-encoding", "?")
            raise errors.bad_answer(self.server, op, f"a body labelled {encoding!r} that is "
                                    "not") from err
        finally:
            if done:
                resp.release_conn()
            else:  # unread bytes would be the next request's answer: drop the connection
                resp.close()
        data = b"".join(chunks)
        self.count(path, nbytes=len(data))
        return data

    def _why(self, err: u3.HTTPError, read_timeout: float) -> tuple[str, bool]:
        """What went wrong, for the message; and whether the server counts as down."""
        if _NAME_RESOLUTION is not None and isinstance(err, _NAME_RESOLUTION):
            return "the host name does not resolve", True
        if isinstance(err, u3.NewConnectionError):
            text = str(err).lower()
            if "refused" in text:
                return "connection refused", True
            if "name or service not known" in text or "nodename nor servname" in text:
                return "the host name does not resolve", True
            return f"cannot connect: {_reason(err)}", True
        if isinstance(err, u3.ConnectTimeoutError):
            return f"connection timed out after {_secs(self.timeout)}", True
        if isinstance(err, u3.ReadTimeoutError):
            return f"timed out after {_secs(read_timeout)}", False
        if isinstance(err, u3.SSLError):
            return f"TLS failed: {_reason(err)}", True
        if isinstance(err, u3.ProxyError):
            return f"the proxy failed: {_reason(err)}", True
        return f"{type(err).__name__}: {_reason(err)}", False

    def _wait(self, path: str, delay: float, op: Op, reason: str) -> None:
        self.count(path, retries=1)
        self._tally(self._stats.retry_reasons, op.verb, reason)
        self._sleep(max(0.0, delay))


_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cycle collector while a big list is parsed and kept (any thread; nested
    and concurrent uses are counted). Parsed JSON is acyclic, freed by refcounting; left
    on, the collector rescans every kept object again and again: parsing 20,000 pods took
    1.5 s with it and 0.3 s without."""
    global _gc_depth, _gc_was_enabled
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()


def _header_map(resp: urllib3.BaseHTTPResponse) -> dict[str, str]:
    return {k.lower(): v for k, v in resp.headers.items()}


def _retry_after(resp: Response) -> float | None:
    """Seconds from a ``Retry-After`` header (seconds or an HTTP date), else from the
    Status body's ``details.retryAfterSeconds``."""
    value = resp.headers.get("retry-after")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
            except (TypeError, ValueError):
                pass
    try:
        doc = orjson.loads(resp.data)
    except orjson.JSONDecodeError:
        return None
    details = doc.get("details") if isinstance(doc, dict) else None
    seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    return float(seconds) if isinstance(seconds, int | float) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _secs(value: float) -> str:
    return f"{value:g}s"


def _reason(err: BaseException) -> str:
    text = str(getattr(err, "reason", None) or err)
    # urllib3 prefixes "HTTPSConnection(host=..., port=...): " - the server is named already.
    return text.split("): ", 1)[-1] if "Connection(host=" in text else text
