#!/usr/bin/env python3
"""Benchmark live-mode ``gpubot`` against the fake API server on a 5,000-node cluster (issue 3).

    python bench/bench_live.py [--data DIR] [--repeat 3] [--warm-runs 20] [--profile DIR]

Targets (issue 3): on 5,000 nodes (1,000 with GPUs) / 150,000 pods served by the fake API
server, cold ``gpubot why-pending`` takes at most 0.6x the baseline's time with a peak RSS of
at most 600 MB, and why-pending on a warm watch cache has a median under 100 ms.

One run:

1. generates the cluster if missing (``bench/gen_snapshot.py --gpu-nodes``; cached under
   ``bench/data/``);
2. starts the fake API server on it in a subprocess and waits for its ``ready`` line;
3. baseline: ``kubectl get nodes,pods -A -o json`` through the fake, then ``json.loads`` of
   its output, in one child process (without kubectl: a Python child that pages
   ``/api/v1/nodes`` and ``/api/v1/pods`` with ``limit=500`` and ``json.loads`` each page);
4. cold ``gpubot why-pending TARGET --kubeconfig K -o json``; 5. cold ``gpubot doctor``:
   wall time, peak RSS (``os.wait4``), API requests (the fake's request log between marks)
   and response bytes (the log has no sizes: each logged GET is replayed once and its
   ``Content-Length`` summed); best of ``--repeat``;
6. warm, in one child process: ``open_live_view`` + ``view.watch(...)``, ``wait_synced``,
   then ``handlers.why_pending.run(Reader(view), TARGET)`` ``--warm-runs`` times: p50/p95,
   requests made during those runs (list calls must be 0, but for lists refused with 403:
   the bot asks once and remembers the refusal), the cache's ``stats()``;
7. a table, and as the last line exactly
   ``why-pending cold/baseline: X.XX  warm p50 ms: Y  peak MB: Z``.

Exit status 1 when a command failed (exit status, traceback, non-JSON output, warm cache not
synced or list calls while warm), 0 otherwise: missing a target does not fail the run.
Every process started is killed on the way out, Ctrl-C and SIGTERM included.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import select
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

# Shared with the snapshot benchmark beside this file (the script's directory is on sys.path).
import bench_snapshot as snapshot
import live_fleet
import live_sentinel
from bench_snapshot import cli_command, finding_codes

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DEFAULT_NODES, DEFAULT_GPU_NODES, DEFAULT_PODS, DEFAULT_SEED = 5000, 1000, 150_000, 1
DEFAULT_TARGET = "ml-team/train-0"
TRUE = ("1", "true", "True")


def default_data(nodes: int, pods: int, gpu_nodes: int, seed: int) -> Path:
    suffix = (
        "" if (gpu_nodes, seed) == (DEFAULT_GPU_NODES, DEFAULT_SEED) else f"-{gpu_nodes}gpu-s{seed}"
    )
    return BENCH / "data" / f"cluster-{nodes}n-{pods}p{suffix}"


# -- child processes --------------------------------------------------------------------------

_CHILDREN: list[subprocess.Popen[bytes]] = []  # every process started, killed in cleanup()


def spawn(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
    """Start a child in its own session (Ctrl-C reaches only us; cleanup() kills its group)."""
    proc = subprocess.Popen(argv, start_new_session=True, **kw)
    _CHILDREN.append(proc)
    return proc


def kill_group(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the child's process group (it leads it: start_new_session), SIGKILL after
    ``grace`` seconds. Only groups we created are signalled."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    else:  # the leader is gone: its group may still hold children (kubectl under python)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def cleanup() -> None:
    for proc in reversed(_CHILDREN):
        kill_group(proc)
    _CHILDREN.clear()


@dataclass
class Run(snapshot.Run):
    requests: list[str] = field(default_factory=list)  # request-log lines between the marks
    timed_out: bool = False


def run_measured(
    argv: list[str], env: dict[str, str], timeout: float, log: RequestLogFile | None = None
) -> Run:
    """Run ``argv`` to completion: wall time, CPU time and peak RSS of that child
    (``os.wait4``), its output, and the request-log lines written while it ran."""
    mark = log.mark() if log else 0
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = spawn(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        fired = threading.Event()

        def on_timeout() -> None:
            fired.set()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, on_timeout)
        timer.daemon = True
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped already: tell Popen
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything it left behind in its group
        _CHILDREN.remove(proc)
        out.seek(0)
        err.seek(0)
        return Run(
            seconds,
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss,
            proc.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            log.lines_since(mark) if log else [],
            fired.is_set(),
        )


def check(run: Run, ok_exit: set[int], want_json: bool) -> str:
    return "timed out (killed)" if run.timed_out else snapshot.check(run, ok_exit, want_json)


# -- the fake API server ----------------------------------------------------------------------


class RequestLogFile:
    """The fake's ``--log-requests`` file: one flushed line per request, appended."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def lines_since(self, mark: int) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(mark)
                data = f.read()
        except FileNotFoundError:
            return []
        return [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]


@dataclass
class Req:
    method: str
    path: str  # with the query
    status: str
    verb: str  # list | watch | get | log | discovery | other
    resource: str
    namespace: str | None
    query: dict[str, str]


def parse_request(line: str) -> Req:
    """One request-log line: ``METHOD PATH STATUS[ body:dryRun=All]``."""
    parts = line.split(" ")
    method, path = parts[0], parts[1] if len(parts) > 1 else ""
    status = parts[2] if len(parts) > 2 else "-"
    u = urlsplit(path)
    q = dict(parse_qsl(u.query, keep_blank_values=True))
    segs = [s for s in u.path.split("/") if s]
    if segs[:2] == ["api", "v1"]:
        rest = segs[2:]
    elif segs[:1] == ["apis"] and len(segs) >= 3:
        rest = segs[3:]
    else:
        return Req(method, path, status, "discovery", u.path, None, q)
    if not rest:
        return Req(method, path, status, "discovery", u.path, None, q)
    legacy_watch = rest[0] == "watch"
    if legacy_watch:
        rest = rest[1:]
    ns = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    resource = rest[0] if rest else ""
    if method != "GET":
        verb = method.lower()
    elif len(rest) >= 3 and rest[2] == "log":
        verb, resource = "log", f"{resource}/log"
    elif len(rest) == 1:
        verb = "watch" if legacy_watch or q.get("watch") in TRUE else "list"
    else:
        verb = "watch" if legacy_watch else "get"
    return Req(method, path, status, verb, resource, ns, q)


def summarize(lines: list[str]) -> dict[str, Any]:
    """Counts per verb, and list requests grouped by resource/scope/selectors (pages of one
    list count as requests, and once as a list)."""
    reqs = [parse_request(ln) for ln in lines]
    verbs = Counter(r.verb for r in reqs)
    groups: Counter[str] = Counter()
    lists: Counter[str] = Counter()
    for r in reqs:
        if r.verb not in ("list", "get", "log", "watch"):
            continue
        sel = []
        for key in ("fieldSelector", "labelSelector"):
            if r.query.get(key):
                fields = sorted(
                    {part.split("=")[0].rstrip("!") for part in r.query[key].split(",")}
                )
                sel.append(f"{key}({','.join(fields)})")
        scope = "all namespaces" if r.namespace is None else "one namespace"
        if r.verb in ("get", "log"):
            scope = "by name"
        key = f"{r.verb} {r.resource} [{scope}{'; ' + ' '.join(sel) if sel else ''}]"
        if r.status not in ("200", "201"):
            key += f" -> {r.status}"
        groups[key] += 1
        if r.verb == "list" and not r.query.get("continue"):
            lists[key] += 1
    bad = [r for r in reqs if r.status not in ("200", "201")]
    return {
        "total": len(reqs),
        "verbs": dict(verbs),
        # a refused list is asked once and then remembered (LiveView.refused_ttl)
        "served_lists": sum(r.verb == "list" and r.status != "403" for r in reqs),
        "groups": groups,
        "lists": lists,
        "non_200": len(bad),
        "reqs": reqs,
    }


def replay_bytes(base_url: str, lines: list[str], timeout: float) -> tuple[int, int]:
    """Response bytes of the logged requests, which the log does not record: each logged
    GET (watches aside) is sent again and its ``Content-Length`` taken from the headers,
    the body left unread. Returns (bytes, requests replayed)."""
    u = urlsplit(base_url)
    total = n = 0
    for ln in lines:
        r = parse_request(ln)
        if r.method != "GET" or r.verb == "watch" or r.status == "-":
            continue
        conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=timeout)
        try:
            conn.request("GET", r.path, headers={"Accept": "application/json"})
            resp = conn.getresponse()
            length = resp.getheader("Content-Length")
            if length is not None:
                total += int(length)
            else:  # chunked: read it
                while chunk := resp.read(1 << 20):
                    total += len(chunk)
            n += 1
        finally:
            conn.close()
    return total, n


@dataclass
class Fake:
    proc: subprocess.Popen[bytes]
    url: str
    kubeconfig: Path
    log: RequestLogFile
    seconds: float
    stderr_path: Path


def start_fake(data: Path, work: Path, timeout: float, churn: list[str] | None = None) -> Fake:
    kubeconfig = work / "kubeconfig"
    log_path = work / "requests.log"
    stderr_path = work / "fake.stderr"
    argv = [sys.executable, "-m", "tests.fake_kube", "--snapshot", str(data),
            "--kubeconfig-out", str(kubeconfig), "--log-requests", str(log_path),
            *(churn or [])]
    print(f"starting the fake API server on {data} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    with open(stderr_path, "wb") as err:
        proc = spawn(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        if proc.poll() is not None:
            tail = stderr_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(
                f"the fake API server exited ({proc.returncode}) before ready:\n{tail}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the fake API server was not ready after {timeout:.0f} s (--server-timeout)"
            )
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                continue
            buf += chunk
    line = buf.split(b"\n", 1)[0].decode().strip()
    if not line.startswith("ready "):
        raise RuntimeError(f"unexpected first line from the fake API server: {line!r}")
    seconds = time.perf_counter() - t0
    return Fake(
        proc, line.split(" ", 1)[1], kubeconfig, RequestLogFile(log_path), seconds, stderr_path
    )


def proc_mem_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB, NaN when unreadable."""
    rss = hwm = float("nan")
    with contextlib.suppress(OSError):
        for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
            if ln.startswith("VmRSS:"):
                rss = int(ln.split()[1]) / 1024
            elif ln.startswith("VmHWM:"):
                hwm = int(ln.split()[1]) / 1024
    return rss, hwm


def mem_available_mb() -> float:
    with contextlib.suppress(OSError):
        for ln in Path("/proc/meminfo").read_text().splitlines():
            if ln.startswith("MemAvailable:"):
                return int(ln.split()[1]) / 1024
    return float("nan")


# -- baselines (each in one child process, which never shares memory with us) ---------------

KUBECTL_BASELINE = r"""
import json, os, resource, subprocess, sys, time
kubectl, kubeconfig, cache_dir = sys.argv[1:4]
t0 = time.perf_counter()
p = subprocess.Popen([kubectl, "get", "nodes,pods", "-A", "-o", "json",
                      "--kubeconfig", kubeconfig, "--cache-dir", cache_dir],
                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
out = p.stdout.read()
code = p.wait()
t1 = time.perf_counter()
if code != 0:
    sys.exit(f"kubectl exited {code}")
doc = json.loads(out)
t2 = time.perf_counter()
kinds = {}
for it in doc.get("items", []):
    kinds[it.get("kind", "?")] = kinds.get(it.get("kind", "?"), 0) + 1
print(json.dumps({"kubectl_s": t1 - t0, "loads_s": t2 - t1, "output_bytes": len(out),
                  "kinds": kinds,
                  "kubectl_maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
sys.stdout.flush()
os._exit(0)
"""

PYTHON_BASELINE = r"""
import http.client, json, os, sys, time
from urllib.parse import quote, urlsplit
u = urlsplit(sys.argv[1])
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
t0 = time.perf_counter()
kinds, pages, nbytes, items = {}, 0, 0, []
for kind, path in (("Node", "/api/v1/nodes"), ("Pod", "/api/v1/pods")):
    cont = ""
    while True:
        url = f"{path}?limit=500" + (f"&continue={quote(cont)}" if cont else "")
        conn.request("GET", url, headers={"Accept": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            sys.exit(f"GET {url}: {resp.status} {body[:300]!r}")
        page = json.loads(body)
        pages += 1
        nbytes += len(body)
        items.extend(page.get("items", []))
        kinds[kind] = kinds.get(kind, 0) + len(page.get("items", []))
        cont = (page.get("metadata") or {}).get("continue") or ""
        if not cont:
            break
print(json.dumps({"seconds": time.perf_counter() - t0, "pages": pages, "bytes": nbytes,
                  "kinds": kinds}))
sys.stdout.flush()
os._exit(0)
"""

# cProfile of bot.cli.main() in-process: the CLI leaves through os._exit, so dump first.
PROFILE_CODE = r"""
import cProfile, os, sys
prof = cProfile.Profile()
prof.enable()
from bot.cli import main
code = main(sys.argv[2:])
prof.disable()
prof.dump_stats(sys.argv[1])
sys.stdout.flush()
os._exit(code)
"""


# kubectl -o json holds every object as map[string]interface{} before printing: its live Go
# heap measured about 3.7x the size of the dump's (indented) nodes.json + pods.json files, and
# with the default GOGC=100 its RSS about 9.5x (24 GB at 150,000 pods: more than this
# machine). A GOMEMLIMIT well above the live heap keeps the RSS near the limit at about the
# same speed (measured: 1.5x the live heap, no slowdown).
KUBECTL_LIVE_PER_BYTE = 3.7
KUBECTL_RSS_PER_BYTE = 9.5
HEADROOM_MB = 3072


def kubectl_memory_plan(setting: str, data: Path) -> tuple[str | None, str]:
    """(GOMEMLIMIT to give kubectl or None, what was decided and why). "skip" as the limit
    means not enough memory for kubectl at all."""
    size = sum(f.stat().st_size for f in data.glob("*/pods.json"))
    with contextlib.suppress(OSError):
        size += (data / "nodes.json").stat().st_size
    live = size * KUBECTL_LIVE_PER_BYTE / 2**20
    peak = size * KUBECTL_RSS_PER_BYTE / 2**20
    avail = mem_available_mb()
    est = (
        f"estimated kubectl live heap {live / 1024:.1f} GB, RSS with default GC "
        f"{peak / 1024:.1f} GB; MemAvailable {avail / 1024:.1f} GB"
    )
    if setting == "off":
        return None, f"GOMEMLIMIT not set (--kubectl-memlimit off); {est}"
    if setting != "auto":
        return setting, f"GOMEMLIMIT={setting} (--kubectl-memlimit); {est}"
    if peak + HEADROOM_MB <= avail:
        return None, f"GOMEMLIMIT not needed; {est}"
    limit = avail - HEADROOM_MB
    if limit < 1.4 * live:
        return "skip", f"not enough memory for kubectl; {est}"
    return (
        f"{int(limit)}MiB",
        f"GOMEMLIMIT={int(limit)}MiB so that kubectl fits ({est}; "
        f"limit = MemAvailable - {HEADROOM_MB} MB)",
    )


def find_kubectl(explicit: str | None) -> str | None:
    if explicit:
        return explicit if explicit != "none" else None
    if os.access("/usr/bin/kubectl", os.X_OK):
        return "/usr/bin/kubectl"
    return shutil.which("kubectl")


# -- warm: a child process holding the watch cache --------------------------------------------


def warm_child(a: argparse.Namespace) -> int:
    """``--_warm-child``: sync a watch cache, time why-pending on it, print one JSON line."""
    from bot.live import open_live_view
    from bot.render import render_json
    from handlers import why_pending
    from handlers.target import parse_target
    from handlers.view import Reader

    log = RequestLogFile(Path(a.request_log))
    out: dict[str, Any] = {"rss_start_mb": proc_mem_mb(os.getpid())[0]}
    t0 = time.perf_counter()
    view = open_live_view(a.kubeconfig, None, timeout=a.request_timeout)
    try:
        cache = view.watch()  # the kinds `gpubot serve` watches
        synced = cache.wait_synced(a.sync_timeout)
        out["sync_s"] = time.perf_counter() - t0
        out["synced"] = synced
        out["rss_after_sync_mb"] = proc_mem_mb(os.getpid())[0]
        if not synced:
            out["cache"] = cache.stats()
            print(json.dumps(out, default=str))
            return 3
        from handlers.warm import warm

        t1 = time.perf_counter()
        warmed = warm(Reader(view))  # as `gpubot serve` does once synced
        out["warmed_nodes"], out["warmed_pending"] = warmed.gpu_nodes, warmed.pending
        from bot.live.cache import settle_gc

        settle_gc()
        out["warm_up_s"] = time.perf_counter() - t1
        out["rss_after_warm_mb"] = proc_mem_mb(os.getpid())[0]
        import gc

        gc_ms: list[float] = []
        gc_start: list[float] = []

        def on_gc(phase: str, info: dict[str, int]) -> None:  # time in the cycle collector
            if phase == "start":
                gc_start[:] = [time.perf_counter()]
            elif gc_start and gc_ms:
                gc_ms[-1] += (time.perf_counter() - gc_start[0]) * 1000

        gc.callbacks.append(on_gc)
        mark = log.mark()
        before = view.stats
        times: list[float] = []
        diag = None
        prof: Any = None
        for i in range(a.warm_runs):
            gc_ms.append(0.0)
            if a.warm_profile and i in (0, 1):  # the first run alone, then all the others
                import cProfile

                if prof is not None:
                    prof.dump_stats(str(Path(a.warm_profile) / "warm-first.prof"))
                prof = cProfile.Profile()
                prof.enable()
            t = time.perf_counter()
            with view.reading():  # as the bot's diagnoses do
                diag = why_pending.run(Reader(view), parse_target(a.target))
            times.append((time.perf_counter() - t) * 1000)
        gc.callbacks.remove(on_gc)
        if prof is not None:
            prof.disable()
            prof.dump_stats(str(Path(a.warm_profile) / "warm-rest.prof"))
        after = view.stats
        time.sleep(0.2)  # the log line of a request is written before its answer: settled
        lines = log.lines_since(mark)
        s = summarize(lines)
        assert diag is not None
        doc = json.loads(render_json(diag, source=view.source))
        cstats = cache.stats()
        out.update(
            {
                "times_ms": times,
                "gc_ms": gc_ms,
                "log_requests": s["total"],
                "log_verbs": s["verbs"],
                "served_lists": s["served_lists"],
                "log_groups": dict(s["groups"]),
                "view_requests": after["requests"] - before["requests"],
                "view_bytes": after["bytes"] - before["bytes"],
                "cache_reads": after.get("cache_reads", 0) - before.get("cache_reads", 0),
                "codes": finding_codes(doc),
                "cache_objects": cstats["objects"],
                "cache_bytes": cstats["bytes"],
                "cache_kinds": {
                    k: {
                        "objects": v["objects"],
                        "bytes": v["bytes"],
                        "evicted": v["evicted"],
                        "lists": v["lists"],
                    }
                    for k, v in cstats["kinds"].items()
                },
                "sync_requests": cstats["requests"]["requests"],
                "sync_bytes": cstats["requests"]["bytes"],
                "rss_mb": proc_mem_mb(os.getpid())[0],
            }
        )
        out["new_pod"] = new_pod_first(view, a)
        if a.card_runs:
            out["card"] = card_split(view, a.target, a.card_runs)
        if a.churn_seconds and a.fake_pid:
            out["churn"] = churn_run(view, cache, a)
        if a.sentinel_seconds >= 0:  # after issue 12's churn run, which it would change
            out["sentinel"] = live_sentinel.sentinel_run(
                view, cache, a.target, warm_runs=a.warm_runs, seconds=a.sentinel_seconds,
                block=a.sentinel_block, fake_pid=a.fake_pid)
        if a.fake_pid:
            out["relist"] = relist_run(cache, a)
        if a.clusters > 1:  # last: the clusters it opens stay open until the child exits
            out["fleet"] = live_fleet.fleet_run(
                a.kubeconfig, a.clusters, Path(a.request_log).parent,
                timeout=a.sync_timeout, request_timeout=a.request_timeout)
        print(json.dumps(out, default=str))
        sys.stdout.flush()
        return 0
    finally:
        with contextlib.suppress(Exception):
            view.close()
        sys.stdout.flush()
        os._exit(0 if out.get("times_ms") else 3)  # skip freeing a big cache at exit


def new_pod_first(view: Any, a: argparse.Namespace) -> dict[str, Any] | None:
    """The first diagnosis of a pod that became pending after the warm-up (which diagnosed
    the pods pending then): what a new pod's first diagnosis costs on a warm bot, its node
    verdicts new. The pod is the target's copy with one more toleration (a kind of its own),
    created through the API server, diagnosed once it is cached, then deleted."""
    import kubernetes

    from handlers import why_pending
    from handlers.target import parse_target
    from handlers.view import Reader

    ns, _, name = a.target.rpartition("/")
    ns = ns or "default"
    mine = view.get("Pod", name, ns)
    if mine is None:
        return None
    new = f"{name}-new"
    spec = {k: v for k, v in mine["spec"].items() if k != "nodeName"}
    spec["tolerations"] = [*(spec.get("tolerations") or []),
                           {"key": "bench.gpubot.io/new", "operator": "Exists"}]
    body: Any = {"apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": new, "namespace": ns,
                         "labels": mine["metadata"].get("labels") or {}}}
    client = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(a.kubeconfig))
    api = kubernetes.client.CoreV1Api(client)
    api.create_namespaced_pod(ns, body, _request_timeout=a.request_timeout)
    try:
        deadline = time.monotonic() + 30
        while not view.list("Pod", ns, field_selector=f"metadata.name={new}"):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)
        t = time.perf_counter()
        with view.reading():
            why_pending.run(Reader(view), parse_target(f"{ns}/{new}"))
        return {"pod": f"{ns}/{new}", "ms": (time.perf_counter() - t) * 1000}
    finally:
        api.delete_namespaced_pod(new, ns, grace_period_seconds=0,
                                  _request_timeout=a.request_timeout)


def card_split(view: Any, target: str, runs: int) -> dict[str, list[float]]:
    """A warm ``/gpu why-pending`` answer, split (ms per run): the diagnosis, rendering the
    Block Kit messages, posting the card to the fake Slack on loopback, then its thread
    (the steps of ``Diagnoses.post_answer``); ``card`` is when the card is posted, from the
    diagnosis' start."""
    sys.path.insert(0, str(REPO))
    from bot.slack.app import SlackBot
    from bot.slack.commands import parse
    from bot.slack.config import Settings
    from bot.slack.request import Request
    from handlers import why_pending
    from handlers.target import parse_target
    from handlers.view import Reader
    from tests.fake_slack import FakeSlack

    split: dict[str, list[float]] = {
        "diagnosis": [], "render": [], "card post": [], "thread": [], "card": []}
    with FakeSlack() as slack:
        settings = Settings(mode="http", bot_token="xoxb-bench", signing_secret="bench-secret",
                            api_url=slack.api_url, watch=False)
        bot = SlackBot(settings, view)
        try:
            cmd = parse(f"why-pending {target}")
            for i in range(runs):
                req = Request("U0BENCH", "C0BENCH", "bench", slack.response_url(f"r{i}"),
                              time.monotonic())
                t0 = time.perf_counter()
                diag = why_pending.run(Reader(view), parse_target(target))
                t1 = time.perf_counter()
                rendered = bot.diagnoses.render(cmd, diag, req)
                t2 = time.perf_counter()
                ts = bot.poster.post(req.channel, rendered.card, unfurl=False)
                t3 = time.perf_counter()
                bot.diagnoses.post_thread(req.channel, ts, rendered, cmd, diag)
                t4 = time.perf_counter()
                for key, sec in (("diagnosis", t1 - t0), ("render", t2 - t1),
                                 ("card post", t3 - t2), ("thread", t4 - t3), ("card", t3 - t0)):
                    split[key].append(sec * 1000)
        finally:
            bot.close(0)
    return split


def churn_run(view: Any, cache: Any, a: argparse.Namespace) -> dict[str, Any]:
    """The fake churns (SIGUSR1) for ``--churn-seconds``: why-pending every half second,
    the process's RSS every ten; the drift is measured from the end of the first minute
    (when the cache has seen a round of every node's heartbeats) to the end."""
    from handlers import why_pending
    from handlers.target import parse_target
    from handlers.view import Reader

    os.kill(a.fake_pid, signal.SIGUSR1)
    start = time.monotonic()
    times: list[float] = []
    cpu: list[float] = []  # the diagnosing thread's own CPU time: wall minus waiting
    rss: list[tuple[float, float]] = [(0.0, proc_mem_mb(os.getpid())[0])]
    next_rss = 10.0
    stats0 = cache.stats()
    changes0 = sum(k["changes"] for k in stats0["kinds"].values())
    try:
        while (elapsed := time.monotonic() - start) < a.churn_seconds:
            t, c = time.perf_counter(), time.thread_time()
            with view.reading():  # as the bot's diagnoses do
                why_pending.run(Reader(view), parse_target(a.target))
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.thread_time() - c) * 1000)
            if elapsed >= next_rss:
                rss.append((elapsed, proc_mem_mb(os.getpid())[0]))
                next_rss += 10.0
            time.sleep(max(0.0, 0.5 - (time.perf_counter() - t)))
    finally:
        os.kill(a.fake_pid, signal.SIGUSR2)
    rss.append((time.monotonic() - start, proc_mem_mb(os.getpid())[0]))
    stats1 = cache.stats()
    changes = sum(k["changes"] for k in stats1["kinds"].values()) - changes0
    settled = next((m for t, m in rss if t >= min(60.0, a.churn_seconds / 2)), rss[0][1])
    half = next((m for t, m in rss if t >= a.churn_seconds / 2), rss[-1][1])
    # What the cluster itself added: a pod's first restart stamps a lastState it lacked.
    return {"seconds": a.churn_seconds, "times_ms": times, "cpu_ms": cpu, "rss": rss,
            "watch_changes": changes, "drift_mb": rss[-1][1] - settled,
            "late_drift_mb": rss[-1][1] - half,
            "content_mb": (stats1["bytes"] - stats0["bytes"]) / 1e6}


def sentinel_target(s: dict[str, float]) -> str:
    """Issue 24: the detectors add under 5% CPU; warm why-pending's p50 does not move."""
    quiet = s["quiet_on_p50"] / s["quiet_off_p50"]
    line = (f"targets (issue 24): warm why-pending p50 with the sentinel on/off "
            f"{s['quiet_on_p50']:.0f}/{s['quiet_off_p50']:.0f} ms = {quiet:.2f}x")
    if "share" not in s:
        return line + ", CPU share not measured (no churn: --sentinel-seconds 0)"
    churn = s["churn_on_p50"] / s["churn_off_p50"]
    return (line + f", under churn {s['churn_on_p50']:.0f}/{s['churn_off_p50']:.0f} ms = "
            f"{churn:.2f}x; sentinel CPU share {100 * s['share']:.2f}% < 5% "
            f"{'met' if s['share'] < 0.05 else 'MISSED'}")


def cache_mb(warm: dict[str, Any]) -> float:
    """What the synced cache added to the warm child's RSS."""
    return float(warm["rss_after_sync_mb"] - warm.get("rss_start_mb", 0.0))


def relist_target(warm: dict[str, Any]) -> str:
    """Two copies of every kind during a re-list would add what the synced cache took."""
    relist = warm.get("relist") or {}
    if not relist.get("synced"):
        return ", re-list not run" if not relist else ", re-list MISSED (not synced again)"
    grew = relist["peak_mb"] - relist["before_mb"]
    half = cache_mb(warm) / 2
    return f", re-list peak +{grew:.0f} MB < {half:.0f} MB {'met' if grew < half else 'MISSED'}"


def relist_run(cache: Any, a: argparse.Namespace) -> dict[str, Any]:
    """The fake compacts its watch history (SIGHUP): every watch ends with 410 Gone and each
    kind is listed again while the old objects are still served. The RSS peak is taken
    during the re-list alone (``clear_refs`` resets VmHWM): holding two copies of the pods
    would add about what the cache took to sync."""
    def lists() -> dict[str, int]:
        return {kind: k["lists"] for kind, k in cache.stats()["kinds"].items()}

    # the kinds being watched (not those refused or not served: they have no watch to end)
    watched = [kind for kind, k in cache.stats()["kinds"].items()
               if k["synced"] and not k["missing"]]
    before = lists()

    def relisted() -> bool:
        now = lists()
        return all(now[kind] > before[kind] for kind in watched)

    rss0 = proc_mem_mb(os.getpid())[0]
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    t = time.monotonic()
    os.kill(a.fake_pid, signal.SIGHUP)
    while not relisted() and time.monotonic() - t < a.sync_timeout:
        time.sleep(0.05)
    seconds = time.monotonic() - t
    if not cache.wait_synced(max(0.0, a.sync_timeout - seconds)):
        return {"synced": False, "seconds": seconds}
    rss, peak = proc_mem_mb(os.getpid())
    return {"synced": relisted(), "seconds": time.monotonic() - t,
            "before_mb": rss0, "peak_mb": peak, "after_mb": rss}


# -- report -----------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    argv: list[str]
    runs: list[Run] = field(default_factory=list)
    failure: str = ""
    bytes: int | None = None
    note: str = ""

    @property
    def ok_runs(self) -> list[Run]:
        return [r for r in self.runs if not r.timed_out]

    @property
    def best(self) -> float:
        return min((r.seconds for r in self.runs), default=float("nan"))

    @property
    def median(self) -> float:
        return statistics.median(r.seconds for r in self.runs) if self.runs else float("nan")

    @property
    def best_cpu(self) -> float:
        return min((r.cpu_seconds for r in self.runs), default=float("nan"))

    @property
    def rss_mb(self) -> float:
        return max((r.maxrss_kb for r in self.runs), default=0) / 1024


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def fmt_verbs(verbs: dict[str, int]) -> str:
    order = ("list", "get", "log", "watch", "discovery")
    parts = [f"{verbs[v]} {v}" for v in order if verbs.get(v)]
    parts += [f"{n} {v}" for v, n in sorted(verbs.items()) if v not in order and n]
    return ", ".join(parts) or "none"


def print_requests(name: str, lines: list[str], top: int) -> None:
    s = summarize(lines)
    bad = f"; {s['non_200']} not 200" if s["non_200"] else ""
    print(f"\n{name}: {s['total']} requests ({fmt_verbs(s['verbs'])}){bad}")
    for key, n in s["groups"].most_common(top):
        lists = s["lists"].get(key)
        print(
            f"  {n:6d}  {key}"
            + (f"  ({lists} list{'s' if lists != 1 else ''})" if lists and lists != n else "")
        )
    if len(s["groups"]) > top:
        print(f"  ... {len(s['groups']) - top} more groups")


def print_profile(title: str, prof: Path, top: int) -> None:
    import pstats

    print(f"\n=== {title}, {prof} ===")
    for key in ("cumulative", "tottime"):
        print(f"--- top {top} by {key} ---", flush=True)
        pstats.Stats(str(prof), stream=sys.stdout).sort_stats(key).print_stats(top)


def profile_warm(
    argv: list[str], out_dir: Path, env: dict[str, str], top: int, timeout: float
) -> None:
    """A second warm child (its own watch cache) profiling the first why-pending on the
    synced cache alone, then the next three together."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in ("warm-first.prof", "warm-rest.prof"):
        (out_dir / name).unlink(missing_ok=True)
    run = run_measured([*argv, "--warm-runs", "4", "--_warm-profile", str(out_dir)], env, timeout)
    for name, title in (
        ("warm-first.prof", "cProfile warm why-pending, first run"),
        ("warm-rest.prof", "cProfile warm why-pending, runs 2-4"),
    ):
        if (out_dir / name).exists():
            print_profile(title, out_dir / name, top)
        else:
            print(f"\n=== {title}: no profile written (exit {run.exit_code}) ===")


def profile(
    name: str, tail: list[str], out_dir: Path, env: dict[str, str], top: int, timeout: float
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    prof = out_dir / f"{name}.prof"
    prof.unlink(missing_ok=True)
    run = run_measured([sys.executable, "-c", PROFILE_CODE, str(prof), *tail], env, timeout)
    if not prof.exists():
        print(f"\n=== cProfile {name}: no profile written (exit {run.exit_code}) ===")
        return
    print_profile(
        f"cProfile {name} ({run.seconds:.2f} s under the profiler, {run.maxrss_kb / 1024:.0f} MB)",
        prof,
        top,
    )


def ensure_data(a: argparse.Namespace, data: Path) -> None:
    if (data / "nodes.json").exists() and not a.regen:
        return
    print(
        f"generating {data} ({a.nodes} nodes, {a.gpu_nodes} GPU; {a.pods} pods; "
        f"seed {a.seed}; about 90 s, 3 GB) ...",
        file=sys.stderr,
        flush=True,
    )
    t0 = time.perf_counter()
    proc = spawn(
        [
            sys.executable,
            str(BENCH / "gen_snapshot.py"),
            str(data),
            "--nodes",
            str(a.nodes),
            "--gpu-nodes",
            str(a.gpu_nodes),
            "--pods",
            str(a.pods),
            "--seed",
            str(a.seed),
        ],
        stdout=subprocess.DEVNULL,
    )
    code = proc.wait()
    _CHILDREN.remove(proc)
    if code != 0:
        raise RuntimeError(f"gen_snapshot.py exited {code}")
    print(f"generated in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data",
        type=Path,
        help="cluster-info dump to serve (default: "
        "bench/data/cluster-<nodes>n-<pods>p, generated if missing)",
    )
    ap.add_argument("--nodes", type=int, default=DEFAULT_NODES, help="for generation")
    ap.add_argument("--gpu-nodes", type=int, default=DEFAULT_GPU_NODES, help="for generation")
    ap.add_argument("--pods", type=int, default=DEFAULT_PODS, help="for generation")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="for generation")
    ap.add_argument("--regen", action="store_true", help="regenerate the data even if present")
    ap.add_argument("--target", default=DEFAULT_TARGET, help="why-pending target")
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="rounds of cold why-pending and doctor; the best (min) counts",
    )
    ap.add_argument(
        "--baseline-repeat",
        type=int,
        default=1,
        help="rounds of the baseline (slow: about a minute each at full size)",
    )
    ap.add_argument(
        "--baseline",
        choices=("auto", "kubectl", "python", "both", "none"),
        default="auto",
        help="auto: kubectl when found, else the Python pager; "
        "both: kubectl (the ratio's) and the pager as an extra row; none: skip",
    )
    ap.add_argument("--kubectl", help="kubectl binary (default /usr/bin/kubectl, then PATH)")
    ap.add_argument(
        "--kubectl-memlimit",
        default="auto",
        metavar="auto|off|SIZE",
        help="GOMEMLIMIT for kubectl (auto: only when its estimated peak does not "
        "fit in MemAvailable; then the kubectl baseline is skipped if even a "
        "limit cannot make it fit)",
    )
    ap.add_argument("--warm-runs", type=int, default=20)
    ap.add_argument("--card-runs", type=int, default=10,
                    help="warm /gpu why-pending cards posted to a fake Slack (0: skip)")
    ap.add_argument("--churn-seconds", type=float, default=0,
                    help="after the warm runs, churn the cluster this long (issue 12: 600)")
    ap.add_argument("--churn-pods", type=float, default=0,
                    help="pod changes a second while churning (default: 1%% of the pods served)")
    ap.add_argument("--churn-node-period", type=float, default=10.0,
                    help="seconds between two status updates of a node while churning")
    ap.add_argument("--sentinel-seconds", type=float, default=120,
                    help="churn with the sentinel on and off in turns this long (issue 24; "
                    "0: only its first scan and quiet runs)")
    ap.add_argument("--sentinel-block", type=float, default=20,
                    help="seconds of each sentinel-on or -off block while churning")
    ap.add_argument("--no-sentinel", action="store_true",
                    help="skip the sentinel's measurement")
    ap.add_argument("--clusters", type=int, default=1, metavar="N",
                    help="N > 1: the warm child also opens N clusters through gpubot serve's "
                         "fleet opening (N contexts on the one fake server) and prints the "
                         "RSS each adds, against its own one (bench/live_fleet.py)")
    ap.add_argument("--no-warm", action="store_true", help="skip the warm measurement")
    ap.add_argument("--no-doctor", action="store_true", help="skip cold doctor")
    ap.add_argument(
        "--server-timeout",
        type=float,
        default=600,
        help="seconds to wait for the fake's ready line",
    )
    ap.add_argument(
        "--cmd-timeout", type=float, default=900, help="seconds before a measured command is killed"
    )
    ap.add_argument(
        "--sync-timeout", type=float, default=600, help="seconds for the warm watch cache to sync"
    )
    ap.add_argument(
        "--request-timeout", type=float, default=60, help="per-request timeout of the warm view"
    )
    ap.add_argument(
        "--cli",
        help="command to run gpubot (default: gpubot beside this "
        "python, on PATH, or python -m bot.cli)",
    )
    ap.add_argument("--ok-exit", default="0", help="gpubot exit statuses that count as success")
    ap.add_argument(
        "--no-bytes",
        action="store_true",
        help="do not replay logged requests to count response bytes",
    )
    ap.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="afterwards, cProfile cold why-pending and doctor into DIR/*.prof "
        "and print the hotspots",
    )
    ap.add_argument("--top", type=int, default=25, help="rows per listing")
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the work directory (kubeconfig, request log, outputs)",
    )
    # internal: the warm measurement's child process
    ap.add_argument("--_warm-child", dest="warm_child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--_kubeconfig", dest="kubeconfig", help=argparse.SUPPRESS)
    ap.add_argument("--_request-log", dest="request_log", help=argparse.SUPPRESS)
    ap.add_argument("--_warm-profile", dest="warm_profile", help=argparse.SUPPRESS)
    ap.add_argument("--_fake-pid", dest="fake_pid", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.warm_child:
        return warm_child(a)

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignoring it
    work = Path(tempfile.mkdtemp(prefix="gpubot-bench-live-"))
    try:
        return bench(a, work)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping every process started", file=sys.stderr)
        return 130
    except RuntimeError as err:
        print(f"bench_live: {err}", file=sys.stderr)
        return 1
    finally:
        cleanup()
        if a.keep:
            print(f"work directory kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def bench(a: argparse.Namespace, work: Path) -> int:
    t_start = time.perf_counter()
    data = (a.data or default_data(a.nodes, a.pods, a.gpu_nodes, a.seed)).resolve()
    if a.data is None or not (data / "nodes.json").exists():
        ensure_data(a, data)
    ok_exit = {int(x) for x in a.ok_exit.split(",") if x.strip()}
    env = dict(os.environ)
    cli = cli_command(a.cli)

    kubectl = find_kubectl(a.kubectl) if a.baseline in ("auto", "kubectl", "both") else None
    if a.baseline == "kubectl" and kubectl is None:
        raise RuntimeError("--baseline kubectl: no kubectl found (--kubectl PATH)")
    if a.baseline in ("auto", "both") and kubectl is None:
        print(
            "kubectl not found (/usr/bin/kubectl, PATH): skipping the kubectl baseline; "
            "using the Python baseline (pages /api/v1/nodes and /api/v1/pods with "
            "limit=500, json.loads per page)",
            file=sys.stderr,
        )

    churn_pods = str(a.churn_pods) if a.churn_pods else "1%"  # of the pods served
    churn_args = (["--churn-pods", churn_pods, "--churn-node-period", str(a.churn_node_period)]
                  if a.churn_seconds or (a.sentinel_seconds > 0 and not a.no_sentinel) else [])
    fake = start_fake(data, work, a.server_timeout, churn_args)
    fake_rss, fake_hwm = proc_mem_mb(fake.proc.pid)
    print(
        f"fake API server {fake.url} ready in {fake.seconds:.0f} s "
        f"(RSS {fake_rss:.0f} MB, peak {fake_hwm:.0f} MB)",
        file=sys.stderr,
        flush=True,
    )
    kc = str(fake.kubeconfig)

    base_env = env
    memory_note = ""
    if kubectl:
        limit, memory_note = kubectl_memory_plan(a.kubectl_memlimit, data)
        if limit == "skip" and a.baseline in ("auto", "both"):
            print(
                f"skipping the kubectl baseline: {memory_note}; using the Python baseline "
                "instead (--baseline kubectl --kubectl-memlimit SIZE to force)",
                file=sys.stderr,
            )
            kubectl = None
        elif limit and limit != "skip":
            base_env = {**env, "GOMEMLIMIT": limit}
    bases: list[Result] = []
    labels: list[str] = []
    if kubectl:
        bases.append(
            Result(
                "baseline: kubectl+json.loads",
                [sys.executable, "-c", KUBECTL_BASELINE, kubectl, kc, str(work / "kubectl-cache")],
            )
        )
        labels.append(
            f"kubectl get nodes,pods -A -o json ({kubectl}) + json.loads of its "
            f"output, in one child process; {memory_note}"
        )
    if a.baseline != "none" and (not kubectl or a.baseline == "both"):
        bases.append(
            Result("baseline: python pager", [sys.executable, "-c", PYTHON_BASELINE, fake.url])
        )
        why = (
            "an extra row"
            if kubectl
            else ("kubectl not used" if a.baseline == "python" else "kubectl absent or skipped")
        )
        labels.append(
            "Python: GET /api/v1/nodes and /api/v1/pods, limit=500 pages, "
            f"json.loads per page ({why})"
        )
    base = bases[0] if bases else Result("baseline: none", [])
    base_label = "; ".join(labels) if labels else "none (--baseline none): no ratio"
    cold = [
        Result(
            "why-pending (cold)", [*cli, "why-pending", a.target, "--kubeconfig", kc, "-o", "json"]
        )
    ]
    if not a.no_doctor:
        cold.append(Result("doctor (cold)", [*cli, "doctor", "--kubeconfig", kc, "-o", "json"]))

    print(f"data: {data}")
    print(
        f"server: fake API server at {fake.url}, seeded in {fake.seconds:.0f} s, "
        f"RSS {fake_rss:.0f} MB"
    )
    print(f"baseline: {base_label}")
    print(
        f"cli: {shlex.join(cli)}; python {sys.version.split()[0]}; repeat {a.repeat}, "
        f"baseline repeat {a.baseline_repeat}; MemAvailable {mem_available_mb():.0f} MB"
    )

    rounds = max(a.repeat, a.baseline_repeat)
    for rnd in range(rounds):
        todo = (bases if rnd < a.baseline_repeat else []) + (cold if rnd < a.repeat else [])
        for res in todo:
            if res.failure:
                continue
            run = run_measured(
                res.argv, base_env if bases and res is bases[0] else env, a.cmd_timeout,
                fake.log,
            )
            res.runs.append(run)
            why = check(run, {0} if res in bases else ok_exit, want_json=True)
            s = summarize(run.requests)
            print(
                f"  round {rnd + 1}: {res.name:<30} {run.seconds:8.2f} s"
                f" (cpu {run.cpu_seconds:7.2f} s) {run.maxrss_kb / 1024:7.0f} MB"
                f"  {s['total']:5d} requests  exit {run.exit_code}"
                f"{'  FAILED: ' + why if why else ''}",
                file=sys.stderr,
                flush=True,
            )
            if why:
                res.failure = why
                tail = "\n".join(run.stderr.strip().splitlines()[-25:])
                print(
                    f"--- {res.name} failed: {why}\n$ {shlex.join(res.argv)[:300]}\n{tail}\n---",
                    file=sys.stderr,
                )

    # bytes of the last round's requests (the ones the table shows): the log has no sizes
    if not a.no_bytes:
        for res in [*bases, *cold]:
            if res.runs and not res.failure:
                res.bytes, _ = replay_bytes(fake.url, res.runs[-1].requests, a.request_timeout)

    # the baseline's own split: kubectl vs json.loads, or the pager's pages
    base_details: list[str] = []
    for res in bases:
        good = [r for r in res.runs if r.exit_code == 0]
        if not good:
            continue
        with contextlib.suppress(ValueError, KeyError):
            d = json.loads(min(good, key=lambda r: r.seconds).stdout)
            if "kubectl_s" in d:
                base_details.append(
                    f"kubectl {d['kubectl_s']:.1f} s (peak {d['kubectl_maxrss_kb'] / 1024:.0f}"
                    f" MB, output {d['output_bytes'] / 1e6:.0f} MB) + json.loads "
                    f"{d['loads_s']:.1f} s; items {d['kinds']}"
                )
            else:
                base_details.append(
                    f"pager: {d['pages']} pages, {d['bytes'] / 1e6:.0f} MB, "
                    f"{d['seconds']:.1f} s in-process; items {d['kinds']}"
                )

    warm: dict[str, Any] = {}
    warm_failure = ""
    warm_argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--_warm-child",
        "--_kubeconfig",
        kc,
        "--_request-log",
        str(fake.log.path),
        "--target",
        a.target,
        "--sync-timeout",
        str(a.sync_timeout),
        "--request-timeout",
        str(a.request_timeout),
        "--card-runs",
        str(a.card_runs),
        "--churn-seconds",
        str(a.churn_seconds),
        "--sentinel-seconds",
        str(-1 if a.no_sentinel else a.sentinel_seconds),
        "--sentinel-block",
        str(a.sentinel_block),
        "--clusters",
        str(a.clusters),
        "--_fake-pid",
        str(fake.proc.pid),
    ]
    if not a.no_warm:
        print(
            "warm: syncing a watch cache (the kinds gpubot serve watches) in a child process ...",
            file=sys.stderr,
            flush=True,
        )
        run = run_measured(
            [*warm_argv, "--warm-runs", str(a.warm_runs)], env,
            a.sync_timeout + a.cmd_timeout + a.churn_seconds + max(a.sentinel_seconds, 0)
            + (2 * a.sync_timeout if a.clusters > 1 else 0),
        )
        try:
            warm = json.loads(run.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            warm = {}
        warm["maxrss_mb"] = run.maxrss_kb / 1024
        if run.timed_out or run.exit_code != 0 or not warm.get("times_ms"):
            warm_failure = (
                f"exit {run.exit_code}"
                + (", timed out" if run.timed_out else "")
                + ("" if warm.get("synced", True) else ", cache not synced")
            )
            print(
                f"--- warm failed: {warm_failure}\n"
                f"{chr(10).join(run.stderr.strip().splitlines()[-25:])}\n---",
                file=sys.stderr,
            )
        elif warm.get("served_lists"):
            warm_failure = f"{warm['served_lists']} list calls during the warm runs"

    fake_rss, fake_hwm = proc_mem_mb(fake.proc.pid)

    # -- table ---------------------------------------------------------------------------
    print()
    print(
        f"{'command':<32}{'best s':>9}{'median s':>10}{'x base':>8}{'best cpu s':>11}"
        f"{'peak MB':>9}{'requests':>10}{'bytes MB':>10}  exit"
    )
    for res in [*bases, *cold]:
        if not res.runs:
            print(f"{res.name:<32}{'-':>9}  not run")
            continue
        ratio = res.best / base.best if base.runs else float("nan")
        s = summarize(res.runs[-1].requests)
        nbytes = f"{res.bytes / 1e6:.1f}" if res.bytes is not None else "-"
        codes = ",".join(map(str, sorted({r.exit_code for r in res.runs})))
        print(
            f"{res.name:<32}{res.best:>9.2f}{res.median:>10.2f}{ratio:>8.2f}"
            f"{res.best_cpu:>11.2f}{res.rss_mb:>9.0f}{s['total']:>10}{nbytes:>10}  {codes}"
            f"{'  FAILED: ' + res.failure if res.failure else ''}"
        )
    for detail in base_details:
        print(f"  baseline detail: {detail}")
    print(
        "  requests: from the fake's request log between marks (last round); bytes: the log "
        "has no sizes, so the last round's GETs were sent again and their Content-Length summed"
        if not a.no_bytes
        else "  requests: from the fake's request log; bytes not counted "
        "(--no-bytes; the log has no sizes)"
    )
    if warm.get("times_ms"):
        t = warm["times_ms"]
        print(
            f"{'why-pending (warm, in-process)':<32}  p50 {pct(t, 50):.1f} ms  "
            f"p95 {pct(t, 95):.1f} ms  min {min(t):.1f}  max {max(t):.1f}  "
            f"({len(t)} runs)"
        )
        print(f"  run times ms: {' '.join(f'{x:.0f}' for x in t)}")
        if warm.get("gc_ms"):
            print(
                f"  of which in the cycle collector (gc.callbacks): "
                f"{' '.join(f'{x:.0f}' for x in warm['gc_ms'])}"
            )
        print(
            f"  during the warm runs: {warm['log_requests']} requests in the fake's log "
            f"({fmt_verbs(warm['log_verbs'])}); LiveView made {warm['view_requests']} "
            f"({warm['view_bytes'] / 1e3:.0f} KB), {warm['cache_reads']} reads from the cache"
        )
        for key, n in sorted(warm.get("log_groups", {}).items(), key=lambda kv: -kv[1])[:8]:
            print(f"    {n:5d}  {key}")
        kinds = ", ".join(
            f"{k} {v['objects']}" + (f" (+{v['evicted']} evicted)" if v.get("evicted") else "")
            for k, v in warm["cache_kinds"].items()
        )
        print(
            f"  cache: synced in {warm['sync_s']:.1f} s with {warm['sync_requests']} requests "
            f"({warm['sync_bytes'] / 1e6:.0f} MB); {warm['cache_objects']} objects, "
            f"{warm['cache_bytes'] / 1e6:.0f} MB as JSON (cache.stats()); process RSS "
            f"{warm['rss_mb']:.0f} MB, peak {warm['maxrss_mb']:.0f} MB"
        )
        print(f"  cache objects: {kinds}")
        t = warm["times_ms"]
        print(
            f"  synced bot: RSS {warm['rss_after_sync_mb']:.0f} MB after sync, "
            f"{warm['rss_after_warm_mb']:.0f} MB after warming {warm['warmed_nodes']} GPU "
            f"nodes and {len(warm['warmed_pending'])} kinds of pending pod in "
            f"{warm['warm_up_s']:.2f} s; first diagnosis {t[0]:.0f} ms"
        )
        new_pod = warm.get("new_pod")
        if new_pod:
            print(f"  a pod pending since the warm-up ({new_pod['pod']}): first diagnosis "
                  f"{new_pod['ms']:.0f} ms (its node verdicts are new)")
        card = warm.get("card")
        if card:
            print(
                "  warm card split, p50 ms: "
                + ", ".join(f"{k} {pct(v, 50):.1f}" for k, v in card.items())
                + f" ({len(card['card'])} answers to the fake Slack)"
            )
        churn = warm.get("churn")
        if churn:
            ct = churn["times_ms"]
            print(
                f"  churn {churn['seconds']:.0f} s, {churn['watch_changes']} watch changes: "
                f"why-pending p50 {pct(ct, 50):.1f} ms, p95 {pct(ct, 95):.1f} ms "
                f"({len(ct)} runs); RSS drift {churn['drift_mb']:+.0f} MB "
                f"({' '.join(f'{m:.0f}' for _, m in churn['rss'])})"
            )
            if "late_drift_mb" in churn:
                print(f"  churn memory: the cached objects' JSON grew "
                      f"{churn['content_mb']:+.1f} MB (a pod's first restart stamps its "
                      f"lastState); RSS over the second half {churn['late_drift_mb']:+.0f} MB")
            cc = churn.get("cpu_ms") or []
            print(f"  churn run times ms: {' '.join(f'{x:.0f}' for x in ct[:80])}")
            if cc:  # the rest of the wall time waited: the API server, the watch threads
                minutes = [(ct[i:i + 120], cc[i:i + 120]) for i in range(0, len(ct), 120)]
                split = " ".join(f"{pct(w, 50):.0f}/{pct(c, 50):.0f}" for w, c in minutes)
                print(f"  churn thread CPU p50 {pct(cc, 50):.1f} ms; per 120 runs (a minute "
                      f"at two a second), wall/CPU p50 ms: {split}")
        if warm.get("sentinel"):
            for line in live_sentinel.report(warm["sentinel"], pct):
                print(line)
        relist = warm.get("relist")
        if relist and relist.get("synced"):
            print(
                f"  re-list after 410 Gone (every kind): {relist['seconds']:.1f} s; RSS "
                f"{relist['before_mb']:.0f} MB before, peak {relist['peak_mb']:.0f} MB "
                f"({relist['peak_mb'] - relist['before_mb']:+.0f}), {relist['after_mb']:.0f} MB "
                f"after; the synced cache took {cache_mb(warm):.0f} MB"
            )
        elif relist:
            print(f"  re-list after 410 Gone: not synced again in {relist['seconds']:.0f} s")
        if warm.get("fleet"):
            for line in live_fleet.report(warm["fleet"]):
                print(line)
    elif not a.no_warm:
        print(f"{'why-pending (warm, in-process)':<32}  FAILED: {warm_failure}")
    print(
        f"fake API server: RSS {fake_rss:.0f} MB (peak {fake_hwm:.0f} MB); "
        f"bench wall time {time.perf_counter() - t_start:.0f} s"
    )

    # findings agree?
    cold_codes: list[str] = []
    for res in cold:
        if res.runs and not res.failure:
            with contextlib.suppress(ValueError):
                found = finding_codes(json.loads(res.runs[-1].stdout))
                if res is cold[0]:
                    cold_codes = found
                print(f"{res.name} findings: {', '.join(found) or '(none)'}")
    if warm.get("codes") is not None:
        same = "same as cold" if warm["codes"] == cold_codes else "DIFFERENT from cold"
        print(f"why-pending (warm) findings: {', '.join(warm['codes']) or '(none)'} ({same})")

    for res in [*bases, *cold]:
        if res.runs:
            print_requests(res.name, res.runs[-1].requests, a.top)

    if a.profile:
        wp_args = ["why-pending", a.target, "--kubeconfig", kc, "-o", "json"]
        profile("why-pending", wp_args, a.profile, env, a.top, a.cmd_timeout)
        if not a.no_doctor:
            profile(
                "doctor",
                ["doctor", "--kubeconfig", kc, "-o", "json"],
                a.profile,
                env,
                a.top,
                a.cmd_timeout,
            )
        if not a.no_warm:
            profile_warm(warm_argv, a.profile, env, a.top, a.sync_timeout + a.cmd_timeout)

    failed = [r.name for r in [*bases, *cold] if r.failure or not r.runs]
    if warm_failure:
        failed.append(f"warm ({warm_failure})")
    wp = cold[0]
    ratio = wp.best / base.best if wp.runs and base.runs else float("nan")
    p50 = pct(warm.get("times_ms") or [], 50)
    print()
    if failed:
        print(f"FAILED: {'; '.join(failed)}")
    targets = (
        f"targets: cold/baseline <= 0.6 {'met' if ratio <= 0.6 else 'MISSED'}, "
        f"peak <= 600 MB {'met' if wp.rss_mb <= 600 else 'MISSED'}, warm p50 < 100 ms "
        f"{'met' if p50 < 100 else 'MISSED'}"
    )
    print(targets)
    if warm.get("times_ms"):
        rss = warm["rss_after_warm_mb"]
        card_p50 = pct((warm.get("card") or {}).get("card") or [], 50)
        churn = warm.get("churn") or {}
        churn_p50 = pct(churn.get("times_ms") or [], 50)
        print(
            f"targets (issue 12): synced RSS <= 1200 MB {'met' if rss <= 1200 else 'MISSED'}, "
            f"first diagnosis {warm['times_ms'][0]:.0f} ms, card p50 < 250 ms "
            f"{'met' if card_p50 < 250 else 'MISSED' if card_p50 == card_p50 else 'not run'}, "
            f"churn p50 < 100 ms "
            f"{'met' if churn_p50 < 100 else 'MISSED' if churn_p50 == churn_p50 else 'not run'}"
            + (f", churn drift {churn['drift_mb']:+.0f} MB (second half "
               f"{churn.get('late_drift_mb', float('nan')):+.0f} MB)" if churn else "")
            + relist_target(warm)
        )
    if warm.get("sentinel"):
        print(sentinel_target(live_sentinel.summary(warm["sentinel"], pct)))
    print(
        f"why-pending cold/baseline: {ratio:.2f}  warm p50 ms: {p50:.0f}  peak MB: {wp.rss_mb:.0f}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
