"""Churn: the fake cluster changes the way a busy one does, for the live benchmark.

``pods_per_s`` pods a second get a new container status (a restart: ``restartCount`` up,
``lastState.terminated`` stamped) and every node's status heartbeat is renewed every
``node_period`` seconds, each change sent to watchers as a MODIFIED event. Changes are
spread over ticks of a tenth of a second, like a real cluster's steady stream.
"""

from __future__ import annotations

import random
import threading
import time

from .store import Store, now_rfc3339

TICK = 0.1


class Churn:
    def __init__(self, store: Store, *, pods_per_s: float, node_period: float,
                 seed: int = 1) -> None:
        self.store = store
        self.pods_per_s = pods_per_s
        self.node_period = node_period
        self.random = random.Random(seed)
        self.changes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()  # churn again after a stop
            self._thread = threading.Thread(target=self._run, daemon=True, name="fake-churn")
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _run(self) -> None:
        # Names only: decoding 150,000 pods here would hold the fake's GIL for seconds, and
        # the benchmark would time the fake's stall instead of the bot.
        pods = self.store.names("Pod")
        nodes = [name for _, name in self.store.names("Node")]
        pod_debt = node_debt = 0.0
        node_at = 0
        next_tick = time.monotonic()
        while not self._stop.is_set():
            pod_debt += self.pods_per_s * TICK
            node_debt += len(nodes) * TICK / self.node_period if self.node_period > 0 else 0
            while pod_debt >= 1 and pods:
                pod_debt -= 1
                self._restart(*self.random.choice(pods))
            while node_debt >= 1 and nodes:
                node_debt -= 1
                self._heartbeat(nodes[node_at % len(nodes)])
                node_at += 1
            next_tick += TICK
            self._stop.wait(max(0.0, next_tick - time.monotonic()))

    def _restart(self, namespace: str, name: str) -> None:
        pod = self.store.find("Pod", name, namespace)
        statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
        if pod is None or not statuses:
            return
        cs = statuses[0]
        cs["restartCount"] = int(cs.get("restartCount") or 0) + 1
        cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error",
                                          "finishedAt": now_rfc3339()}}
        self.store.put(pod)
        self.changes += 1

    def _heartbeat(self, name: str) -> None:
        node = self.store.find("Node", name)
        if node is None:
            return
        stamp = now_rfc3339()
        for cond in (node.get("status") or {}).get("conditions") or []:
            cond["lastHeartbeatTime"] = stamp
        self.store.put(node)
        self.changes += 1
