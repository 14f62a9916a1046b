"""Fault injection: make chosen requests slow, fail, be forbidden, throttled or dropped.

    fk.faults.latency(0.5)                                   # every request 0.5 s slower
    fk.faults.latency(2, resource="pods", verb="list")
    fk.faults.error("pods", code=500, times=2)               # the next 2 pod requests fail
    fk.faults.forbid("pods", verb="list", namespace="ml-team")
    fk.faults.throttle("nodes", retry_after=1, times=1)      # 429 + Retry-After
    fk.faults.drop("pods", verb="list")                      # close the socket, no response
    fk.faults.answer("pods", Raw(200, b"{...}", {"Content-Encoding": "gzip"}))  # a lie
    fk.faults.clear()

``answer`` sends its ``Raw`` response instead of the real one, then hangs up: a server
that lies about the encoding or the length, trickles its body (``trickle`` seconds
between bytes), or answers a list that never ends. ``misbehaving`` builds the usual ones.

Matching: ``resource`` is the plural, ``"pods/log"`` for a subresource, optionally
group-qualified (``"daemonsets.apps"``); None matches every request, discovery included.
``namespace`` None matches any scope, ``""`` only cluster-scope requests (cluster-scoped
resources and all-namespaces lists). ``times`` None means for ever; otherwise the fault
disarms after that many hits. Latency adds up with the other faults.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from . import status as st
from .resources import ResourceType

DEFAULT_USER = "system:serviceaccount:gpubot:gpubot"
_REASONS = {500: "InternalError", 502: "InternalError", 503: "ServiceUnavailable",
            504: "Timeout"}


@dataclass(frozen=True)
class RequestInfo:
    """What a fault matches a request on."""

    verb: str  # get list watch create update patch delete deletecollection
    rtype: ResourceType | None  # None for discovery and other non-resource paths
    subresource: str | None = None
    namespace: str | None = None  # None: cluster scope
    name: str | None = None

    @property
    def resource(self) -> str:
        if self.rtype is None:
            return ""
        return f"{self.rtype.plural}/{self.subresource}" if self.subresource else (
            self.rtype.plural)


@dataclass
class Raw:
    """A response sent as is. ``body`` may be a function of the hit count (a fresh
    continue token each page); ``length`` overrides the Content-Length sent."""

    status: int
    body: bytes | Callable[[int], bytes]
    headers: dict[str, str] = field(default_factory=dict)
    trickle: float = 0.0
    length: int | None = None

    def bytes_for(self, hit: int) -> bytes:
        return self.body(hit) if callable(self.body) else self.body


def misbehaving(how: str) -> Raw:
    """The misbehaving answers of a list that tests use by name."""
    def page(items: object, token: str = "") -> bytes:
        return json.dumps({"kind": "List", "apiVersion": "v1", "items": items,
                           "metadata": {"continue": token} if token else {}}).encode()

    return {
        "gzip-lie": Raw(200, page([]), {"Content-Encoding": "gzip"}),
        "length-lie": Raw(200, page([]), length=len(page([])) + 1000),
        "huge-length": Raw(200, b"{}", length=10 << 30),
        "items-not-list": Raw(200, page("abc")),
        "items-wrong-type": Raw(200, page([
            1, "x", None, {"metadata": "x"}, {"metadata": {"name": 5}},
            {"metadata": {"name": "bad-spec", "namespace": "default"},
             "spec": {"containers": "abc"}},
            {"metadata": {"name": "fine", "namespace": "default"}, "spec": {"containers": []}},
        ])),
        "same-token": Raw(200, page([], "again")),
        "endless-tokens": Raw(200, lambda hit: page([], f"token-{hit}")),
        "trickle": Raw(200, page([]), trickle=0.2),
    }[how]


@dataclass
class Fault:
    action: str  # latency | error | forbid | throttle | drop | answer
    resource: str | None = None
    verb: str | None = None
    namespace: str | None = None
    name: str | None = None
    times: int | None = None
    seconds: float = 0.0
    code: int = 500
    message: str | None = None
    retry_after: int = 1
    user: str = DEFAULT_USER
    raw: Raw | None = None
    hits: int = field(default=0)

    def matches(self, req: RequestInfo) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.resource is not None:
            rt = req.rtype
            if rt is None:
                return False
            res = req.resource
            qualified = f"{rt.plural}.{rt.group}" + (f"/{req.subresource}"
                                                      if req.subresource else "")
            if self.resource not in (res, qualified):
                return False
        if self.verb is not None and self.verb != req.verb:
            return False
        if self.namespace is not None and self.namespace != (req.namespace or ""):
            return False
        return self.name is None or self.name == req.name

    def error(self, req: RequestInfo) -> st.ApiError:
        if self.action == "throttle":
            return st.too_many_requests(self.retry_after)
        if self.action == "forbid" and req.rtype is not None:
            return st.forbidden(self.user, req.verb, req.rtype, req.subresource, req.name,
                                req.namespace)
        if self.action == "forbid":
            return st.ApiError(403, "Forbidden", f'forbidden: User "{self.user}" cannot '
                               f'{req.verb} path', {})
        if self.code == 500:
            return st.internal_error(self.message or "injected fault")
        reason = _REASONS.get(self.code, "InternalError")
        return st.ApiError(self.code, reason, self.message or f"injected fault ({self.code})")


@dataclass
class Verdict:
    delay: float = 0.0
    fault: Fault | None = None  # the failing fault, if any


class Faults:
    def __init__(self, user: str = DEFAULT_USER) -> None:
        self.user = user
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def _add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def latency(self, seconds: float, *, resource: str | None = None, verb: str | None = None,
                namespace: str | None = None, times: int | None = None) -> Fault:
        return self._add(Fault("latency", resource, verb, namespace, times=times,
                               seconds=seconds))

    def error(self, resource: str | None = None, *, code: int = 500, verb: str | None = None,
              namespace: str | None = None, name: str | None = None, times: int | None = None,
              message: str | None = None) -> Fault:
        return self._add(Fault("error", resource, verb, namespace, name, times, code=code,
                               message=message))

    def forbid(self, resource: str, *, verb: str | None = None, namespace: str | None = None,
               name: str | None = None, user: str | None = None,
               times: int | None = None) -> Fault:
        return self._add(Fault("forbid", resource, verb, namespace, name, times, code=403,
                               user=user or self.user))

    def throttle(self, resource: str | None = None, *, retry_after: int = 1,
                 verb: str | None = None, namespace: str | None = None,
                 times: int | None = None) -> Fault:
        return self._add(Fault("throttle", resource, verb, namespace, times=times, code=429,
                               retry_after=retry_after))

    def drop(self, resource: str | None = None, *, verb: str | None = None,
             namespace: str | None = None, times: int | None = None) -> Fault:
        return self._add(Fault("drop", resource, verb, namespace, times=times))

    def answer(self, resource: str | None, raw: Raw, *, verb: str | None = None,
               namespace: str | None = None, times: int | None = None) -> Fault:
        return self._add(Fault("answer", resource, verb, namespace, times=times, raw=raw))

    def remove(self, fault: Fault) -> None:
        with self._lock:
            self._faults = [f for f in self._faults if f is not fault]

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def __len__(self) -> int:
        return len(self._faults)

    def check(self, req: RequestInfo) -> Verdict:
        verdict = Verdict()
        with self._lock:
            for f in self._faults:
                if not f.matches(req):
                    continue
                if f.action == "latency":
                    f.hits += 1
                    verdict.delay += f.seconds
                elif verdict.fault is None:
                    f.hits += 1
                    verdict.fault = f
        return verdict
