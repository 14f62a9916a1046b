"""The sentinel's cost on the live benchmark's warm cache (issue 24 item 6), for ``bench_live.py``.

The real ``Sentinel`` (``Watcher`` over the warm child's view, ``IncidentBook`` on a SQLite
store in a temporary directory, ``TerminalPublisher`` printing into a buffer) listens to the
same ``WatchCache`` as the diagnoses, as ``gpubot serve`` wires it (``bot/sentinel/wiring.py``):

0. ``warm_runs`` why-pending runs before the sentinel exists: the quiet baseline.
1. **First scan**: the sentinel's thread starts on the synced cache; its first tick evaluates
   every Node, Pod and ResourceSlice once and opens the incidents already due (the planted
   crash-looping plugins, the lost GPUs, the long-pending pods).
2. **Quiet**: as many why-pending runs with the sentinel on.
3. **Churn**, ``seconds`` long, in blocks of ``block`` seconds that alternate sentinel off and
   on (off first): the fake churns (SIGUSR1), why-pending runs every half second as in the
   churn run, and each block takes the process's CPU time (``time.process_time``: every
   thread, the watch threads' decoding and the diagnoses included) and, when on, the
   sentinel's own (``Sentinel.seconds``: thread CPU time of its ticks, store and publisher
   included). Off means what a bot without the sentinel runs: its thread is stopped and the
   cache's listener drops the changes (the call itself stays, a few hundred nanoseconds).
   Alternating blocks share the drift of the churn (each pod's first restart makes the
   cluster bigger) alike.

The share is the sentinel's CPU over the process's in the "on" blocks; the target is under
5%. The why-pending p50 (wall and thread CPU) of the "on" blocks is printed against the "off"
blocks', and the process's CPU per second on against off.

The cycle collector runs in whichever thread's allocation crosses its threshold, so a
collection the sentinel's thread happens to trigger (a full one walks every object allocated
since the cache froze its own: a second at full size) counts as the sentinel's CPU: each
block also reports the collections its thread ran and their time (``SentinelGC``).

``GPUBOT_BENCH_SENTINEL_PROFILE=FILE`` cProfiles the sentinel's thread in the churn's "on"
blocks into FILE (``python -m pstats FILE``): where its share goes.
"""

from __future__ import annotations

import io
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any


class Gate:
    """The cache's listener: hands changes to the sentinel while ``on``, else drops them."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.on = True

    def changed(self, kind: str, namespace: str, name: str) -> None:
        if self.on:
            self.target.changed(kind, namespace, name)

    def relisted(self, kind: str) -> None:
        if self.on:
            self.target.relisted(kind)


def _why_pending(view: Any, target: str) -> tuple[float, float]:
    """One warm why-pending: (wall ms, this thread's CPU ms)."""
    from handlers import why_pending
    from handlers.target import parse_target
    from handlers.view import Reader

    t, c = time.perf_counter(), time.thread_time()
    with view.reading():  # as the bot's diagnoses do
        why_pending.run(Reader(view), parse_target(target))
    return (time.perf_counter() - t) * 1000, (time.thread_time() - c) * 1000


class SentinelGC:
    """The cycle collections run on the sentinel's thread: how many of each generation,
    and their time (a collection holds the GIL: its wall time is its CPU time)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.runs = [0, 0, 0]
        self._started: float | None = None

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if threading.current_thread().name != "gpubot-sentinel":
            return
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self.runs[info["generation"]] += 1
            self._started = None


class Running:
    """The sentinel's thread, started and stopped between blocks (``Sentinel.run`` again);
    with ``profile`` (a ``cProfile.Profile``), run under it."""

    def __init__(self, sentinel: Any) -> None:
        self.sentinel = sentinel
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.profile: Any = None

    def start(self) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(self.stop,),
                                       daemon=True, name="gpubot-sentinel")
        self.thread.start()

    def _run(self, stop: threading.Event) -> None:
        if self.profile is None:
            self.sentinel.run(stop)
        else:
            self.profile.runcall(self.sentinel.run, stop)

    def halt(self) -> None:
        if self.thread is not None:
            self.stop.set()
            self.sentinel.wake()
            self.thread.join(60)
            self.thread = None


def sentinel_run(view: Any, cache: Any, target: str, *, warm_runs: int, seconds: float,
                 block: float, fake_pid: int | None) -> dict[str, Any]:
    from bot.sentinel.incidents import IncidentBook
    from bot.sentinel.printer import TerminalPublisher
    from bot.sentinel.service import Sentinel
    from bot.sentinel.watcher import Watcher
    from bot.store import open_store
    from handlers.sentinel.detectors import settings_defaults

    out: dict[str, Any] = {"quiet_off_ms": [_why_pending(view, target)[0]
                                            for _ in range(warm_runs)]}
    with tempfile.TemporaryDirectory(prefix="gpubot-bench-sentinel-") as tmp:
        store = open_store("sqlite", path=os.path.join(tmp, "incidents.db"))
        printed = io.StringIO()
        watcher = Watcher(view)
        book = IncidentBook(store, quiet_for=900.0)
        sentinel = Sentinel(watcher, book, TerminalPublisher(printed), settings_defaults(),
                            ready=cache.settled, interval=15.0)  # serve's defaults
        gate = Gate(sentinel)
        cache.listen(gate)
        running = Running(sentinel)
        try:
            # 1. the first tick scans everything
            t, p = time.perf_counter(), time.process_time()
            running.start()
            while sentinel.ticks < 1 and time.perf_counter() - t < 600:
                time.sleep(0.01)
            out["first_scan"] = {"wall_s": time.perf_counter() - t,
                                 "cpu_s": sentinel.seconds,
                                 "process_cpu_s": time.process_time() - p,
                                 "evaluated": watcher.stats.evaluated,
                                 "incidents": len(book.all())}
            # 2. quiet warm runs with the sentinel on
            out["quiet_on_ms"] = [_why_pending(view, target)[0] for _ in range(warm_runs)]
            # 3. churn, off and on blocks
            if seconds > 0 and fake_pid:
                import gc

                collected = SentinelGC()
                gc.callbacks.append(collected)
                profile_to = os.environ.get("GPUBOT_BENCH_SENTINEL_PROFILE")
                if profile_to:
                    import cProfile

                    running.profile = cProfile.Profile()
                try:
                    out["churn"] = _churn_blocks(view, target, running, gate, sentinel,
                                                 watcher, seconds, block, fake_pid, collected)
                finally:
                    gc.callbacks.remove(collected)
                if running.profile is not None:
                    running.profile.dump_stats(profile_to)
            out["incidents"] = len(book.all())
            out["open"] = len(book.open())
            out["printed_lines"] = printed.getvalue().count("\n")
            out["by_detector_s"] = dict(watcher.stats.by_detector)
            out["detector_runs"] = dict(watcher.stats.runs)
            out["errors"] = list(watcher.errors[:5])
        finally:
            running.halt()
            gate.on = False
            store.close()
    return out


def _churn_blocks(view: Any, target: str, running: Running, gate: Gate, sentinel: Any,
                  watcher: Any, seconds: float, block: float, fake_pid: int,
                  collected: SentinelGC) -> dict[str, Any]:
    running.halt()
    gate.on = False
    blocks: list[dict[str, Any]] = []
    os.kill(fake_pid, signal.SIGUSR1)
    start = time.monotonic()
    try:
        on = False
        while time.monotonic() - start < seconds:
            blocks.append(_block(view, target, running, gate, sentinel, watcher, collected,
                                 on, min(block, seconds - (time.monotonic() - start))))
            on = not on
    finally:
        os.kill(fake_pid, signal.SIGUSR2)
        running.halt()
        gate.on = False
    return {"seconds": seconds, "block": block, "blocks": blocks}


def _block(view: Any, target: str, running: Running, gate: Gate, sentinel: Any,
           watcher: Any, collected: SentinelGC, on: bool, seconds: float) -> dict[str, Any]:
    wall: list[float] = []
    cpu: list[float] = []
    g0, r0 = collected.seconds, list(collected.runs)
    s0, e0, n0 = sentinel.seconds, watcher.stats.seconds, watcher.stats.evaluated
    t0, p0 = time.monotonic(), time.process_time()
    if on:
        gate.on = True
        running.start()
    while time.monotonic() - t0 < seconds:
        w, c = _why_pending(view, target)
        wall.append(w)
        cpu.append(c)
        # every half second, not past the block's end
        time.sleep(max(0.0, min(0.5 - w / 1000, t0 + seconds - time.monotonic())))
    if on:
        gate.on = False
        running.halt()  # its last tick is counted in this block
    elapsed, process = time.monotonic() - t0, time.process_time() - p0
    return {"on": on, "seconds": elapsed, "process_cpu_s": process,
            "sentinel_cpu_s": sentinel.seconds - s0, "evaluate_cpu_s":
            watcher.stats.seconds - e0, "evaluated": watcher.stats.evaluated - n0,
            "gc_s": collected.seconds - g0,
            "gc_runs": [b - a for a, b in zip(r0, collected.runs, strict=True)],
            "times_ms": wall, "cpu_ms": cpu}


def summary(result: dict[str, Any], pct: Callable[[list[float], float], float]) -> dict[str, float]:
    """The figures the report and the last lines print."""
    out: dict[str, float] = {}
    out["quiet_off_p50"] = pct(result.get("quiet_off_ms") or [], 50)
    out["quiet_on_p50"] = pct(result.get("quiet_on_ms") or [], 50)
    blocks = (result.get("churn") or {}).get("blocks") or []
    ons = [b for b in blocks if b["on"]]
    offs = [b for b in blocks if not b["on"]]
    if ons and offs:
        def total(bs: list[dict[str, Any]], key: str) -> float:
            return float(sum(b[key] for b in bs))

        def joined(bs: list[dict[str, Any]], key: str) -> list[float]:
            return [x for b in bs for x in b[key]]

        out["share"] = total(ons, "sentinel_cpu_s") / total(ons, "process_cpu_s")
        out["evaluate_share"] = total(ons, "evaluate_cpu_s") / total(ons, "process_cpu_s")
        out["evaluated_per_s"] = total(ons, "evaluated") / total(ons, "seconds")
        out["sentinel_ms_per_s"] = 1000 * total(ons, "sentinel_cpu_s") / total(ons, "seconds")
        out["gc_ms_per_s"] = 1000 * total(ons, "gc_s") / total(ons, "seconds")
        out["process_on"] = total(ons, "process_cpu_s") / total(ons, "seconds")
        out["process_off"] = total(offs, "process_cpu_s") / total(offs, "seconds")
        out["churn_off_p50"] = pct(joined(offs, "times_ms"), 50)
        out["churn_on_p50"] = pct(joined(ons, "times_ms"), 50)
        out["churn_off_cpu_p50"] = pct(joined(offs, "cpu_ms"), 50)
        out["churn_on_cpu_p50"] = pct(joined(ons, "cpu_ms"), 50)
    return out


def report(result: dict[str, Any], pct: Callable[[list[float], float], float]) -> list[str]:
    """Lines for bench_live's table (indented under the warm rows)."""
    s = summary(result, pct)
    quiet_off_ms = result.get("quiet_off_ms") or []
    first = result["first_scan"]
    lines = [
        f"  sentinel first scan: {first['evaluated']} objects in {first['cpu_s']:.2f} s of its "
        f"thread's CPU ({first['wall_s']:.2f} s wall), {first['incidents']} incidents opened",
        f"  sentinel quiet: why-pending p50 {s['quiet_on_p50']:.1f} ms on / "
        f"{s['quiet_off_p50']:.1f} ms off = {s['quiet_on_p50'] / s['quiet_off_p50']:.2f}x "
        f"({len(result.get('quiet_on_ms') or [])} and {len(quiet_off_ms)} runs)",
    ]
    if "share" in s:
        churn = result["churn"]
        n_on = sum(b["on"] for b in churn["blocks"])
        lines += [
            f"  sentinel under churn ({churn['seconds']:.0f} s, {len(churn['blocks'])} blocks "
            f"of {churn['block']:.0f} s, {n_on} on): its CPU {s['sentinel_ms_per_s']:.1f} ms/s "
            f"= {100 * s['share']:.2f}% of the process's (detectors alone "
            f"{100 * s['evaluate_share']:.2f}%), {s['evaluated_per_s']:.0f} objects "
            f"evaluated/s; of its CPU, the cycle collector {s['gc_ms_per_s']:.1f} ms/s",
            f"  process CPU {s['process_on']:.3f} s/s on / {s['process_off']:.3f} s/s off "
            f"= {s['process_on'] / s['process_off']:.2f}x",
            f"  churn why-pending p50 {s['churn_on_p50']:.1f} ms on / {s['churn_off_p50']:.1f}"
            f" ms off = {s['churn_on_p50'] / s['churn_off_p50']:.2f}x; thread CPU p50 "
            f"{s['churn_on_cpu_p50']:.1f} / {s['churn_off_cpu_p50']:.1f} ms = "
            f"{s['churn_on_cpu_p50'] / s['churn_off_cpu_p50']:.2f}x",
            "  per block (on/off: process CPU s/s, sentinel ms/s, why-pending p50 ms; "
            "on: the sentinel thread's collections by generation and their ms): "
            + " ".join(
                f"{'on' if b['on'] else 'off'} {b['process_cpu_s'] / b['seconds']:.2f}/"
                f"{1000 * b['sentinel_cpu_s'] / b['seconds']:.0f}/{pct(b['times_ms'], 50):.0f}"
                + (f" [gc {'+'.join(map(str, b.get('gc_runs') or []))} "
                   f"{1000 * b.get('gc_s', 0.0):.0f}]" if b["on"] else "")
                for b in churn["blocks"]),
        ]
    per = result.get("by_detector_s") or {}
    runs = result.get("detector_runs") or {}
    if per:
        lines.append("  detectors' CPU (first scan included): " + ", ".join(
            f"{k} {v:.2f} s in {runs.get(k, 0)} evaluations" for k, v in sorted(per.items())))
    lines.append(f"  incidents: {result.get('incidents')} in the store "
                 f"({result.get('open')} open), {result.get('printed_lines')} lines printed"
                 + (f"; errors: {'; '.join(result['errors'])}" if result.get("errors") else ""))
    return lines
