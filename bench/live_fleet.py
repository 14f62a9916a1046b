"""Memory per cluster of a fleet (issue 26 item 1), for ``bench_live.py --clusters N``.

In the warm child, once its own measurements are done, clusters are opened through
``gpubot serve``'s real fleet opening (``bot.fleet.opening.open_fleet`` with
``bot.serve.open_cluster``: each its own ApiClient, watch cache and warm-up thread), each
synced and warmed: first one cluster, then ``N`` at once. The RSS each opening added,
divided by its clusters, is the figure per cluster; the ``N``'s over the one's is the ratio
(the code and what the warm child already holds are in neither).

The ``N`` clusters are ``N`` contexts of one kubeconfig on the one fake API server: the
bench machine then needs one fake's memory, not ``N`` (at 150,000 pods a fake takes
gigabytes), while the bot holds ``N`` full copies as it would of ``N`` clusters. One thing
is shared that distinct clusters would share less: short strings the caches intern (names,
timestamps, reasons) are stored once per process, and the clusters here have the same
ones; the warm child's own cache interned them first, so both figures are the clusters'
objects without those strings.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import yaml

_KEPT: list[Any] = []


def _mem_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1]) / 1024
    return float("nan")


def write_contexts(kubeconfig: str, names: list[str], out: Path) -> None:
    """A context per name, each the kubeconfig's current one (its cluster and user)."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    config["contexts"] = [*config["contexts"],
                          *({"name": name, "context": dict(current["context"])}
                            for name in names)]
    out.write_text(yaml.safe_dump(config, sort_keys=False))


def _warming() -> bool:
    return any(t.name == "gpubot-warm" and t.is_alive() for t in threading.enumerate())


def open_clusters(path: Path, names: list[str], *, timeout: float,
                  request_timeout: float) -> dict[str, Any]:
    """The clusters ``names`` (contexts of ``path``) opened as ``gpubot serve`` opens its
    fleet, until each is synced and warmed: the RSS they added, and how long it took. They
    are left open (the child exits without freeing them)."""
    from bot.fleet.config import ClusterConfig
    from bot.fleet.opening import open_fleet
    from bot.serve import open_cluster
    from bot.slack.config import Settings

    settings = Settings(kube_timeout=request_timeout, clusters=tuple(
        ClusterConfig(name=name, context=name, kubeconfig=str(path)) for name in names))
    before = _mem_mb()
    t0 = time.perf_counter()
    fleet = open_fleet(settings, lambda one: open_cluster(one, settle=False))
    _KEPT.append(fleet)  # open until the child exits, as the bot keeps it
    deadline = time.monotonic() + timeout
    done = False
    while not done and time.monotonic() < deadline:
        done = all(h.probe is not None and h.probe() for h in fleet) and not _warming()
        if not done:
            time.sleep(0.5)
    return {"clusters": len(names), "synced": done, "seconds": time.perf_counter() - t0,
            "before_mb": before, "after_mb": _mem_mb()}


def fleet_run(kubeconfig: str, n: int, work: Path, *, timeout: float,
              request_timeout: float) -> dict[str, Any]:
    """One cluster opened through the fleet opening, then ``n`` more at once: what each
    added (``one``, ``many``)."""
    path = work / "kubeconfig-fleet"
    names = [f"c{i}" for i in range(n + 1)]
    write_contexts(kubeconfig, names, path)
    one = open_clusters(path, names[:1], timeout=timeout, request_timeout=request_timeout)
    many = open_clusters(path, names[1:], timeout=timeout, request_timeout=request_timeout)
    return {"one": one, "many": many}


def _added(run: dict[str, Any]) -> float:
    return float(run["after_mb"] - run["before_mb"]) / int(run["clusters"])


def report(result: dict[str, Any]) -> list[str]:
    one, many = result["one"], result["many"]
    n = int(many["clusters"])
    if not (one["synced"] and many["synced"]):
        return [f"fleet: {n} clusters not synced and warmed within "
                f"{max(one['seconds'], many['seconds']):.0f} s"]
    each, single = _added(many), _added(one)
    ratio = each / single if single > 0 else float("nan")
    return [f"fleet: {n} clusters, {each:.0f} MB each ({ratio:.2f}x one cluster's "
            f"{single:.0f} MB, opened the same way; {n} synced and warmed in "
            f"{many['seconds']:.1f} s; RSS {one['before_mb']:.0f} -> {one['after_mb']:.0f} "
            f"-> {many['after_mb']:.0f} MB)",
            "  contexts on the one fake API server, opened by gpubot serve's fleet opening "
            "after the warm child's own cluster; short strings its cache interned are shared "
            "(bench/live_fleet.py)"]
