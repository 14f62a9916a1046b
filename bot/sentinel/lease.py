"""Which replica posts the sentinel's cards: a ``coordination.k8s.io/v1`` Lease in the store's
namespace, as client-go's leader election keeps one.

    lease = KubeLease(api_client, "gpubot")   # the Kubernetes store; SQLite: service.Always
    lease.start()                             # a thread: take the lease, keep it renewed
    lease.is_leader()                         # the sentinel asks before each tick
    lease.stop()                              # shutdown: hand it back, the next takes it now

Each round reads the Lease and writes it back with its ``resourceVersion`` (a replica that
wrote first makes the other's write 409: only one holds it). A replica takes the Lease when
nobody holds it, when its holder handed it back, or when its record has not changed for
``leaseDurationSeconds`` by this replica's own clock since it first saw that record (no
clocks are compared across machines). The holder renews every ``retry`` seconds and stops
leading when it could not renew for ``renew_deadline`` (shorter than the duration, so it has
stopped before anyone else may start).

Requests go through ``bot.live``'s ``Transport`` on the bot's ApiClient, each with its own
timeout. RBAC: ``leases`` get, create, update in the bot's namespace
(``deploy/components/kubernetes-store/rbac.yaml``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from bot.live.errors import LiveError, Op
from bot.live.transport import RetryPolicy, Transport

log = logging.getLogger("gpubot.sentinel")

NAME = "gpubot-sentinel"
API = "coordination.k8s.io/v1"


def _micro_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def identity() -> str:
    """This replica: its pod name (the hostname in a pod) and a random part, so that a
    restarted pod is a new holder."""
    host = os.environ.get("HOSTNAME") or socket.gethostname() or "gpubot"
    return f"{host}_{uuid.uuid4().hex[:8]}"


class KubeLease:
    def __init__(self, api_client: Any, namespace: str, *, name: str = NAME,
                 holder: str | None = None, duration: float = 15.0,
                 renew_deadline: float | None = None, retry: float | None = None,
                 timeout: float = 5.0, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.namespace = namespace
        self.name = name
        self.holder = holder or identity()
        self.duration = duration
        self.renew_deadline = renew_deadline if renew_deadline is not None else duration * 2 / 3
        self.retry = retry if retry is not None else duration / 5
        self.clock = clock
        self.wall = wall
        # One attempt a round: the next round is the retry.
        self.transport = Transport(api_client, timeout=timeout,
                                   retry=RetryPolicy(attempts=1))
        self._path = (f"/apis/{API}/namespaces/{quote(namespace, safe='')}/leases/"
                      f"{quote(name, safe='')}")
        self._renewed: float | None = None  # when this replica last wrote the lease as holder
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) seen last
        self._observed_at = 0.0
        self._failing = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- Leader --------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        renewed = self._renewed
        return renewed is not None and self.clock() - renewed < self.renew_deadline

    # -- one round -----------------------------------------------------------------------------

    def round(self) -> bool:
        """Take or renew the lease once; True when this replica holds it now. An API error
        is logged (once until it answers again) and counts as not holding it."""
        try:
            held = self._round()
        except LiveError as err:
            if not self._failing:
                log.warning("sentinel lease %s/%s: %s", self.namespace, self.name, err)
            self._failing = True
            return self.is_leader()
        if self._failing:
            log.info("sentinel lease %s/%s: the API server answers again", self.namespace,
                     self.name)
        self._failing = False
        if held and self._renewed is None:
            log.info("sentinel lease %s/%s: %s leads", self.namespace, self.name, self.holder)
        if not held and self._renewed is not None:
            log.info("sentinel lease %s/%s: %s no longer leads", self.namespace, self.name,
                     self.holder)
        # Held: renewed now. Not: another replica holds it (or wrote first): stop at once.
        self._renewed = self.clock() if held else None
        return held

    def _round(self) -> bool:
        op = Op("get", "Lease", "coordination.k8s.io", "leases", self.namespace, True,
                name=self.name)
        resp = self.transport.get(op, self._path, accept=(404,))
        now = self.wall()
        if resp.status == 404:
            return self._create(now)
        lease = self.transport.decode(op, resp.data)
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        duration = float(spec.get("leaseDurationSeconds") or self.duration)
        if holder and holder != self.holder and self.clock() - self._observed_at < duration:
            return False  # held, and renewed within its duration as far as we have seen
        mine = holder == self.holder
        new_spec = dict(spec)
        new_spec.update(holderIdentity=self.holder, leaseDurationSeconds=int(self.duration),
                        renewTime=_micro_time(now))
        if not mine:
            new_spec["acquireTime"] = _micro_time(now)
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        body = {"apiVersion": API, "kind": "Lease", "metadata": {
            "name": self.name, "namespace": self.namespace,
            "resourceVersion": (lease.get("metadata") or {}).get("resourceVersion")},
            "spec": new_spec}
        put = self.transport.send(Op("update", "Lease", "coordination.k8s.io", "leases",
                                     self.namespace, True, name=self.name),
                                  "PUT", self._path, body=body, accept=(409,))
        return put.status != 409  # 409: another replica wrote it first

    def _create(self, now: float) -> bool:
        body = {"apiVersion": API, "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": {"app.kubernetes.io/managed-by": "gpubot"}},
                "spec": {"holderIdentity": self.holder,
                         "leaseDurationSeconds": int(self.duration),
                         "acquireTime": _micro_time(now), "renewTime": _micro_time(now),
                         "leaseTransitions": 0}}
        base = self._path.rsplit("/", 1)[0]
        resp = self.transport.send(Op("create", "Lease", "coordination.k8s.io", "leases",
                                      self.namespace, True, name=self.name),
                                   "POST", base, body=body, accept=(409,))
        return resp.status != 409

    def release(self) -> None:
        """Hand the lease back (this replica stops): the next replica takes it at once."""
        if self._renewed is None:
            return
        self._renewed = None
        try:
            op = Op("get", "Lease", "coordination.k8s.io", "leases", self.namespace, True,
                    name=self.name)
            resp = self.transport.get(op, self._path, accept=(404,))
            if resp.status == 404:
                return
            lease = self.transport.decode(op, resp.data)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.holder:
                return
            spec = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1,
                    "renewTime": _micro_time(self.wall())}
            self.transport.send(Op("update", "Lease", "coordination.k8s.io", "leases",
                                   self.namespace, True, name=self.name), "PUT", self._path,
                                body={**lease, "spec": spec}, accept=(409,))
        except LiveError as err:  # it expires by itself: the next replica waits it out
            log.warning("sentinel lease %s/%s: not handed back: %s", self.namespace,
                        self.name, err)

    # -- the thread ----------------------------------------------------------------------------

    def start(self) -> KubeLease:
        self._thread = threading.Thread(target=self._run, name="gpubot-sentinel-lease",
                                        daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.round()
            self._stop.wait(self.retry)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.release()
