"""``gpubot watch``: the sentinel on a terminal. Live through the fake API server (a node
that loses its GPUs opens an incident line, restoring them resolves it with its duration
and GPU-hours), and one look at a bundled snapshot."""

from __future__ import annotations

import argparse
import copy
import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bot.cli import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, build_parser, main
from bot.sentinel.incidents import COLLECTION, Incident
from bot.store import open_store
from bot.watch import main as watch_main
from tests.fake_kube import FakeKube

ROOT = Path(__file__).resolve().parents[1]
CRASH = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
HEALTHY = ROOT / "tests" / "scenarios" / "doctor_all_clear" / "snapshot"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(list(argv), out=out, err=err, environ={})
    except SystemExit as e:
        code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# -- one look ---------------------------------------------------------------------------------


def test_a_snapshot_is_looked_at_once_with_durations_from_the_objects() -> None:
    code, out, err = run("watch", "--snapshot", str(CRASH), "-o", "json")
    assert code == EXIT_OK, err
    seen = {o["detector"]: o for o in lines(out)}
    assert set(seen) == {"gpu-capacity-lost", "gpu-stack-down", "gpu-pending"}
    lost = seen["gpu-capacity-lost"]
    # A Node says what it is, not since when: no duration, no verdict.
    assert (lost["gpus"], lost["since"], lost["due"]) == (8.0, None, None)
    assert lost["diagnose"] == ["gpubot doctor ip-10-18-1-2.ec2.internal"]
    # The plugin's Ready condition and the pod's creation say since when.
    assert seen["gpu-stack-down"]["due"] is True
    pending = seen["gpu-pending"]
    assert pending["since"] == "2024-11-01T08:41:12Z" and pending["due"] is True
    # Under a longer threshold, the same pod is not an incident yet.
    _, out, _ = run("watch", "--snapshot", str(CRASH), "-o", "json", "--pending-after", "1h")
    assert {o["detector"]: o["due"] for o in lines(out)}["gpu-pending"] is False


def test_one_look_in_text_and_fail_on() -> None:
    code, out, _ = run("watch", "--snapshot", str(CRASH))
    assert code == EXIT_OK
    assert "OBSERVED  GPU capacity lost · pool gpu-a100-40: 8 GPUs" in out
    assert "since when unknown" in out
    assert "diagnose: gpubot why-pending ml-team/train-0" in out
    assert run("watch", "--snapshot", str(CRASH), "--fail-on", "warning")[0] == 3
    code, out, _ = run("watch", "--snapshot", str(HEALTHY), "--fail-on", "warning")
    assert code == EXIT_OK and out.startswith("Nothing wrong")


@pytest.mark.parametrize("argv", [
    ["watch", "--snapshot", str(CRASH), "--store-path", "x.db"],
    ["watch", "--snapshot", str(CRASH), "-o", "yaml"],
    ["watch", "--kubeconfig", "/nonexistent", "--fail-on", "critical"],
    ["watch", "--snapshot", str(CRASH), "--lost-after", "soon"],
])
def test_usage_errors(argv: list[str]) -> None:
    assert run(*argv)[0] == EXIT_USAGE


def test_a_missing_snapshot_exits_1() -> None:
    assert run("watch", "--snapshot", "/nonexistent/dump")[0] == EXIT_NOT_FOUND


# -- live, through the fake API server ----------------------------------------------------------


class Watching:
    """``gpubot watch`` in a thread, until ``stop``."""

    def __init__(self, argv: list[str]) -> None:
        self.out, self.err = io.StringIO(), io.StringIO()
        self.stop = threading.Event()
        self.args = build_parser().parse_args(argv)
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.code = watch_main(self.args, self.out, self.err, {}, stop=self.stop)

    def __enter__(self) -> Watching:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)

    def wait_for(self, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while what not in self.out.getvalue() + self.err.getvalue():
            assert self.thread.is_alive() or self.code is None, self.err.getvalue()
            assert time.monotonic() < deadline, (what, self.out.getvalue(),
                                                 self.err.getvalue())
            time.sleep(0.05)

    def events(self) -> list[dict[str, Any]]:
        return lines(self.out.getvalue())


def _set_gpus(fk: FakeKube, node: str, gpus: int) -> None:
    obj = copy.deepcopy(fk.store.find("Node", node))
    assert obj is not None
    obj["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus)
    obj["status"]["capacity"]["nvidia.com/gpu"] = str(gpus)
    fk.store.put(obj)


def test_a_node_losing_its_gpus_opens_a_line_and_its_return_resolves_it(
        tmp_path: Path) -> None:
    with FakeKube(HEALTHY) as fk:
        kc = str(fk.write_kubeconfig(tmp_path / "kc"))
        argv = ["watch", "--kubeconfig", kc, "--lost-after", "1s", "--interval", "0.2s",
                "-o", "json", "--store-path", str(tmp_path / "watch.db")]
        with Watching(argv) as w:
            w.wait_for("Watching.")
            assert w.events() == []  # a healthy cluster: nothing to say
            _set_gpus(fk, "gpu-a100-0", 0)
            w.wait_for('"event": "opened"')
            [opened] = w.events()
            assert opened["detector"] == "gpu-capacity-lost" and opened["gpus"] == 8.0
            assert opened["summaries"] == ["gpu-a100-0: 0 of 8 GPUs allocatable (8 lost)"]
            assert opened["diagnose"] == ["gpubot doctor gpu-a100-0"]
            time.sleep(1.0)
            _set_gpus(fk, "gpu-a100-0", 8)
            w.wait_for('"event": "resolved"')
        assert w.code == EXIT_OK
    resolved = w.events()[-1]
    assert resolved["key"] == opened["key"] and resolved["gpus"] == 0
    assert resolved["duration_s"] >= 2.0  # lost_after, then the second it stayed lost
    assert resolved["gpu_hours"] == pytest.approx(8 * resolved["duration_s"] / 3600, rel=0.6)
    assert "watching" in w.err.getvalue() and "lost_after 1s" in w.err.getvalue()
    # The incident stays in the store it named, resolved.
    [rec] = open_store("sqlite", path=str(tmp_path / "watch.db")).list(COLLECTION)
    assert Incident.from_record(rec).state == "resolved"


def test_text_lines_say_opened_and_resolved_with_gpu_hours(tmp_path: Path) -> None:
    with FakeKube(HEALTHY) as fk:
        kc = str(fk.write_kubeconfig(tmp_path / "kc"))
        with Watching(["watch", "--kubeconfig", kc, "--lost-after", "1s",
                       "--interval", "0.2s"]) as w:
            w.wait_for("Watching.")
            _set_gpus(fk, "gpu-l4-0", 2)
            w.wait_for("OPENED")
            _set_gpus(fk, "gpu-l4-0", 4)
            w.wait_for("RESOLVED")
    text = w.out.getvalue()
    assert "GPU capacity lost · nodes in no pool: 2 GPUs, 1 member" in text
    assert "gpu-l4-0: 2 of 4 GPUs allocatable (2 lost)" in text
    assert "GPU-hours lost" in text.splitlines()[-1] and "back after" in text


def test_once_on_a_live_cluster_and_the_bots_store_is_refused(tmp_path: Path) -> None:
    with FakeKube(CRASH) as fk:
        kc = str(fk.write_kubeconfig(tmp_path / "kc"))
        code, out, err = run("watch", "--once", "--kubeconfig", kc, "-o", "json")
        assert code == EXIT_OK, err
        assert {o["detector"] for o in lines(out)} == {
            "gpu-capacity-lost", "gpu-stack-down", "gpu-pending"}
        # A store whose incidents have Slack cards is the bot's: watch keeps off it.
        path = str(tmp_path / "bot.db")
        store = open_store("sqlite", path=path)
        store.create(COLLECTION, "k", {
            "detector": "gpu-pending", "group": "g", "title": "t", "state": "open",
            "opened": 1.0, "since": 1.0, "updated": 1.0, "members": {}, "members_total": 0,
            "gpus": 0.0, "peak": 0.0, "gpu_seconds": 0.0, "accounted": 1.0,
            "posted": {"rev": 1, "channel": "C1", "ts": "1.0"}})
        store.close()
        args = build_parser().parse_args(["watch", "--kubeconfig", kc, "--store-path", path])
        err_io = io.StringIO()
        assert watch_main(args, io.StringIO(), err_io, {}, stop=threading.Event()) == EXIT_USAGE
        assert "the Slack bot's store" in err_io.getvalue()


def test_thresholds_come_from_flags_then_the_environment() -> None:
    from bot.watch import settings

    args = build_parser().parse_args(["watch", "--lost-after", "2m"])
    got = settings(args, {"GPUBOT_LOST_AFTER": "10m", "GPUBOT_PENDING_AFTER": "1h"})
    assert (got["lost_after"], got["pending_after"], got["plugin_down_after"]) == (
        120.0, 3600.0, 300.0)
    assert got["quiet_for"] == 900.0 and got["sentinel_interval"] == 15.0
    assert isinstance(args, argparse.Namespace)
