#!/usr/bin/env python3
"""Benchmark ``gpubot`` on a large ``kubectl cluster-info dump`` against plain ``json.load``.

    python bench/bench_snapshot.py [--data bench/data/dump] [--repeat 3]

Target (issue 2): on a 1,000-node / 30,000-pod dump, ``gpubot why-pending`` and
``gpubot doctor`` each take at most 2x the time of parsing the same files with ``json.load``.

Every timing is the wall time of a fresh process, interpreter start-up included:

- baseline: ``python -c`` that walks the dump and ``json.load()``s every ``.json`` file;
- ``gpubot why-pending ml-team/train-0 --snapshot DIR -o json``;
- ``gpubot doctor --snapshot DIR -o json``.

gpubot's modules are compiled to bytecode first, as an installed gpubot has them.

The best (min) of ``--repeat`` rounds is compared; rounds run the three commands in turn
so that drift (page cache, CPU frequency) hits all of them alike. Peak RSS comes from
``os.wait4``, and so does the CPU time (user + system), which other load on the machine
disturbs less than wall time. Also reported: the in-process ``json.load`` time (no start-up).

The last two lines are exactly ``why-pending/json.load: X.XX`` and ``doctor/json.load: Y.YY``.
Exit status is non-zero when a command failed (bad exit status, a traceback, output that is
not JSON), never because of the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DEFAULT_DATA = BENCH / "data" / "dump"
DEFAULT_TARGET = "ml-team/train-0"

# The baseline process also reports its own json.load time (no interpreter start-up), so the
# benchmark process itself never holds a parsed dump: a child's peak RSS (ru_maxrss) counts
# what it inherited at fork, and this keeps that small.
BASELINE_CODE = """\
import json, os, sys, time
t0 = time.perf_counter()
n = 0
for root, dirs, files in os.walk(sys.argv[1]):
    dirs.sort()
    for f in sorted(files):
        if f.endswith(".json"):
            with open(os.path.join(root, f), "rb") as fh:
                json.load(fh)
            n += 1
print(json.dumps({"files": n, "seconds": time.perf_counter() - t0}))
"""


@dataclass
class Run:
    seconds: float
    cpu_seconds: float  # user + system: less sensitive than wall time to other load
    maxrss_kb: int
    exit_code: int
    stdout: str
    stderr: str


@dataclass
class Result:
    name: str
    argv: list[str]
    runs: list[Run] = field(default_factory=list)
    failure: str = ""

    @property
    def best(self) -> float:
        return min(r.seconds for r in self.runs)

    @property
    def median(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def best_cpu(self) -> float:
        return min(r.cpu_seconds for r in self.runs)

    @property
    def median_cpu(self) -> float:
        return statistics.median(r.cpu_seconds for r in self.runs)

    @property
    def rss_mb(self) -> float:
        return max(r.maxrss_kb for r in self.runs) / 1024


def run_measured(argv: list[str], cwd: Path, env: dict[str, str]) -> Run:
    """Run ``argv`` to completion; wall time and peak RSS of that one child (os.wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: tell Popen
        out.seek(0)
        err.seek(0)
        return Run(
            seconds,
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss,
            proc.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )


def check(run: Run, ok_exit: set[int], want_json: bool) -> str:
    if run.exit_code < 0:
        return f"killed by signal {-run.exit_code}"
    if run.exit_code not in ok_exit:
        return f"exit status {run.exit_code}"
    if "Traceback (most recent call last)" in run.stderr:
        return "traceback on stderr"
    if want_json:
        try:
            json.loads(run.stdout)
        except ValueError as e:
            return f"stdout is not JSON ({e})"
    return ""


def finding_codes(doc: Any) -> list[str]:
    """Finding codes in a ``-o json`` document, wherever they sit (a sanity check only)."""
    out: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            code = x.get("code")
            if isinstance(code, str) and code.isupper() and ("severity" in x or "summary" in x):
                out.append(code)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    return list(dict.fromkeys(out))


def cli_command(explicit: str | None) -> list[str]:
    if explicit:
        return shlex.split(explicit)
    beside = Path(sys.executable).parent / "gpubot"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("gpubot")
    if found:
        return [found]
    return [sys.executable, "-m", "bot.cli"]


def ensure_data(data: Path, nodes: int, pods: int, seed: int, regen: bool) -> None:
    if (data / "nodes.json").exists() and not regen:
        return
    print(f"generating {data} ({nodes} nodes, {pods} pods, seed {seed}) ...", file=sys.stderr)
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            str(BENCH / "gen_snapshot.py"),
            str(data),
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--seed",
            str(seed),
        ],
        check=True,
    )
    print(f"generated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


def compile_bytecode() -> None:
    """Compile gpubot's modules as ``pip install`` does, so that no command compiles its
    source at start (~0.2 s): a checkout run with PYTHONDONTWRITEBYTECODE=1, as in this
    project's sandbox, would otherwise pay for that on every run."""
    import compileall

    for package in ("bot", "handlers"):
        compileall.compile_dir(str(REPO / package), quiet=1)


def warm_page_cache(files: list[Path]) -> None:
    """Read every file once so that no command pays for the first read from disk."""
    for f in files:
        with open(f, "rb") as fh:
            while fh.read(1 << 20):
                pass


# `python -m cProfile -m bot.cli` writes nothing: the CLI leaves through os._exit (it skips
# freeing the snapshot's heap), so profile main() in-process and dump the stats before exiting.
PROFILE_CODE = """\
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


def profile(name: str, argv_tail: list[str], out_dir: Path, env: dict[str, str], top: int) -> None:
    """Run one command under cProfile and print its hotspots (imports included)."""
    import pstats

    out_dir.mkdir(parents=True, exist_ok=True)
    prof = out_dir / f"{name}.prof"
    prof.unlink(missing_ok=True)
    argv = [sys.executable, "-c", PROFILE_CODE, str(prof), *argv_tail]
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, check=False)
    took = time.perf_counter() - t0
    if not prof.exists():
        print(f"\n=== cProfile {name}: no profile written ({shlex.join(argv[:2])} ...) ===")
        return
    print(f"\n=== cProfile {name} ({took:.2f} s under the profiler), {prof} ===")
    for key in ("cumulative", "tottime"):
        print(f"--- top {top} by {key} ---", flush=True)
        pstats.Stats(str(prof), stream=sys.stdout).sort_stats(key).print_stats(top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="dump directory (generated if missing)"
    )
    ap.add_argument(
        "--repeat", type=int, default=3, help="rounds; the best (min) of each command counts"
    )
    ap.add_argument("--nodes", type=int, default=1000, help="for generation")
    ap.add_argument("--pods", type=int, default=30000, help="for generation")
    ap.add_argument("--seed", type=int, default=1, help="for generation")
    ap.add_argument("--regen", action="store_true", help="regenerate the data even if present")
    ap.add_argument("--target", default=DEFAULT_TARGET, help="why-pending target")
    ap.add_argument(
        "--cli",
        help="command to run gpubot (default: gpubot beside this python, on PATH, "
        "or python -m bot.cli)",
    )
    ap.add_argument(
        "--ok-exit",
        default="0",
        help="exit statuses that count as success (gpubot: 0 a diagnosis was produced, "
        "1 target/snapshot not found, 2 usage); a traceback or non-JSON output "
        "fails regardless",
    )
    ap.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="afterwards, run each command once under cProfile, write DIR/<cmd>.prof "
        "and print the hotspots",
    )
    ap.add_argument("--top", type=int, default=30, help="rows per cProfile listing")
    a = ap.parse_args(argv)

    if a.profile and a.profile.exists() and not a.profile.is_dir():
        ap.error(f"--profile {a.profile}: exists and is not a directory")
    data = a.data.resolve()
    ensure_data(data, a.nodes, a.pods, a.seed, a.regen)
    files = sorted(data.rglob("*.json"))
    size = sum(f.stat().st_size for f in files)
    n_logs = sum(1 for _ in data.rglob("logs.txt"))
    ok_exit = {int(x) for x in a.ok_exit.split(",") if x.strip()}
    env = dict(os.environ)

    warm_page_cache(files)
    compile_bytecode()

    cli = cli_command(a.cli)
    snap = ["--snapshot", str(data), "-o", "json"]
    results = [
        Result("json.load (python -c)", [sys.executable, "-c", BASELINE_CODE, str(data)]),
        Result("why-pending", [*cli, "why-pending", a.target, *snap]),
        Result("doctor", [*cli, "doctor", *snap]),
    ]
    print(f"data: {data} ({len(files)} JSON files, {size / 1e6:.1f} MB, {n_logs} logs.txt)")
    print(f"cli: {shlex.join(cli)}")
    print(f"python: {sys.executable} {sys.version.split()[0]}; repeat {a.repeat}")
    for rnd in range(a.repeat):
        for res in results:
            if res.failure:
                continue
            run = run_measured(res.argv, REPO, env)
            res.runs.append(run)
            why = check(run, ok_exit if res is not results[0] else {0}, want_json=True)
            print(
                f"  round {rnd + 1}: {res.name:<24} {run.seconds:7.2f} s"
                f" (cpu {run.cpu_seconds:6.2f} s)  {run.maxrss_kb / 1024:7.0f} MB"
                f"  exit {run.exit_code}{'  FAILED: ' + why if why else ''}",
                file=sys.stderr,
            )
            if why:
                res.failure = why
                tail = "\n".join(run.stderr.strip().splitlines()[-25:])
                print(
                    f"--- {res.name} failed: {why}\n$ {shlex.join(res.argv)}\n{tail}\n---",
                    file=sys.stderr,
                )

    base = results[0]
    inproc = min(
        (json.loads(r.stdout)["seconds"] for r in base.runs if r.exit_code == 0),
        default=float("nan"),
    )
    print()
    print(
        f"{'command':<24}{'best s':>8}{'median s':>10}{'x base':>8}"
        f"{'best cpu s':>12}{'median cpu s':>14}{'x base':>8}{'peak RSS MB':>13}  exit"
    )
    print(f"{'json.load in-process':<24}{inproc:>8.2f}")
    for res in results:
        if not res.runs:
            print(f"{res.name:<24}{'-':>8}")
            continue
        ratio = res.best / base.best if base.runs else float("nan")
        cpu_ratio = res.best_cpu / base.best_cpu if base.runs else float("nan")
        codes = sorted({r.exit_code for r in res.runs})
        print(
            f"{res.name:<24}{res.best:>8.2f}{res.median:>10.2f}{ratio:>8.2f}"
            f"{res.best_cpu:>12.2f}{res.median_cpu:>14.2f}{cpu_ratio:>8.2f}{res.rss_mb:>13.0f}  "
            f"{','.join(map(str, codes))}{'  FAILED: ' + res.failure if res.failure else ''}"
        )
    # Medians against medians: on a busy host the best run can be a lucky one.
    for res in results[1:]:
        if res.runs and base.runs:
            print(f"{res.name} median/json.load median: wall {res.median / base.median:.2f}, "
                  f"cpu {res.median_cpu / base.median_cpu:.2f}")
    for res in results[1:]:
        if res.runs and not res.failure:
            try:
                found = finding_codes(json.loads(res.runs[-1].stdout))
            except ValueError:
                found = []
            print(f"{res.name} findings: {', '.join(found) if found else '(none found in output)'}")

    if a.profile:
        profile("why-pending", ["why-pending", a.target, *snap], a.profile, env, a.top)
        profile("doctor", ["doctor", *snap], a.profile, env, a.top)

    print()
    failed = [r for r in results if r.failure or not r.runs]
    for res in results[1:]:
        ratio = res.best / base.best if res.runs and base.runs else float("nan")
        print(f"{res.name}/json.load: {ratio:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
