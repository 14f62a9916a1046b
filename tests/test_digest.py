"""The daily digest's content on bundled snapshots: GPUs lost per pool from the sentinel's
incidents, the work waiting longest, fragmentation, idle GPUs per namespace, the ledger;
valid Block Kit; ``gpubot digest``. Posting it once a day: tests/test_digest_post.py."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bot.cli import EXIT_NOT_FOUND, EXIT_OK, main
from bot.digest.build import past_incidents
from bot.render import render_text
from bot.sentinel.incidents import IncidentBook
from bot.sentinel.service import Sentinel
from bot.sentinel.watcher import Watcher
from bot.slack.blocks import Renderer, validate
from bot.snapshot import load_snapshot
from bot.store import open_store
from bot.store.base import Store
from handlers import digest
from handlers.digest import PastIncident
from handlers.runtime.source import Sample
from handlers.view import Reader
from tests.fake_prometheus import FakeMetrics
from tests.test_sentinel import Clock, Objects, Recorder, gpu_node

ROOT = Path(__file__).resolve().parents[1]
FRAG = ROOT / "examples" / "gpu-fragmentation"
CRASH = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
HELD = ROOT / "tests" / "scenarios" / "insufficient-gpu-held" / "cluster.yaml"
HOUR = 3600.0


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store("sqlite", path=str(tmp_path / "state.db"))


def lost(pool: str, opened: float, resolved: float | None, gpus: float, now: float,
         detector: str = "gpu-capacity-lost", namespaces: tuple[str, ...] = ()
         ) -> PastIncident:
    end = resolved if resolved is not None else now
    return PastIncident(detector, "GPU capacity lost", f"pool {pool}",
                        "open" if resolved is None else "resolved", opened - 300, opened,
                        resolved, gpus if resolved is None else 0.0, gpus,
                        gpus * (end - opened) / HOUR, 1, (pool,), namespaces)


# -- content ----------------------------------------------------------------------------------


def test_fragmentation_names_the_free_gpus_no_pending_pod_can_use() -> None:
    d = digest.run(Reader(load_snapshot(str(FRAG))), None)
    f = d.details["fragmentation"]
    # 2 GPUs free on each of 4 nodes; the pending pod asks 4: none of them can take it.
    assert (f["free"], f["stranded"], f["stranded_nodes"], f["asks"]) == (8.0, 8.0, 4, [4.0])
    assert f["largest_free"] == 2.0
    assert {n["node"] for n in f["nodes"]} == {f"dgx-a100-0{i}" for i in range(1, 5)}
    [row] = d.details["pending"]
    assert (row["namespace"], row["workload"], row["code"]) == (
        "ml-team", "deployment/llm-sft", "GPU_FRAGMENTATION")
    assert d.details["pending_total"] == {"workloads": 1, "pods": 1, "gpus": 4.0}
    # No store read: said, not guessed.
    assert d.details["history"] is False
    assert any("no incident store" in u for u in d.unchecked)
    assert d.details["models"][-1]["product"] == "NVIDIA-A100-SXM4-80GB"
    assert "idle" not in d.details  # no Prometheus: not checked, not "none"


def test_free_gpus_a_pending_pod_fits_on_are_not_stranded() -> None:
    # quota-exceeded: the pod's controller cannot create it, but it would fit the free node.
    d = digest.run(Reader(load_snapshot(str(ROOT / "examples" / "quota-exceeded"))), None)
    assert d.details["fragmentation"]["stranded"] == 0
    assert d.details["fragmentation"]["free"] == 16.0


def test_what_is_wrong_now_comes_with_its_root_cause() -> None:
    d = digest.run(Reader(load_snapshot(str(CRASH))), [])
    assert d.root_cause is not None and d.root_cause.code == "CUDA_DRIVER_MISMATCH"
    assert "GPU_CAPACITY_LOST" in d.codes
    assert d.details["totals"]["lost"] == 8
    assert d.details["history"] is True and d.details["lost"] == []
    assert d.details["fragmentation"]["stranded"] == 0 and d.details["fragmentation"]["free"] == 0


def test_gpus_and_gpu_hours_lost_per_pool_over_the_window() -> None:
    view = load_snapshot(str(FRAG))
    now = view.now().timestamp()
    incidents = [
        # 10 h of 8 GPUs, 4 of them inside the window: 32 GPU-hours count.
        lost("a100", now - 30 * HOUR, now - 20 * HOUR, 8, now),
        # still open: 2 GPUs for the last 3 h
        lost("a100", now - 3 * HOUR, None, 2, now),
        lost("h100", now - 5 * HOUR, now - 4 * HOUR, 16, now),
        # over before the window: left out
        lost("l4", now - 40 * HOUR, now - 30 * HOUR, 4, now),
        # another detector: an incident, not GPUs lost
        lost("a100", now - 2 * HOUR, now - HOUR, 8, now, detector="gpu-stack-down"),
    ]
    d = digest.run(Reader(view), incidents)
    rows = {r["pool"]: r for r in d.details["lost"]}
    assert set(rows) == {"a100", "h100"}
    assert rows["a100"]["gpu_hours"] == pytest.approx(32 + 6)
    assert (rows["a100"]["incidents"], rows["a100"]["peak"], rows["a100"]["lost_now"]) == (
        2, 8, 2)
    assert rows["h100"]["gpu_hours"] == pytest.approx(16) and rows["h100"]["lost_now"] == 0
    assert [r["pool"] for r in d.details["lost"]] == ["a100", "h100"]  # most GPU-hours first
    states = [(i["state"], i["detector"]) for i in d.details["incidents"]]
    assert states[0] == ("open", "gpu-capacity-lost") and len(states) == 4
    text = render_text(d)
    assert "a100" in text and "38" in text and "no incident store" not in text


def test_a_channel_that_sees_some_namespaces_gets_only_their_workloads() -> None:
    view = load_snapshot(str(FRAG))
    now = view.now().timestamp()
    secret = lost("a100", now - HOUR, None, 4, now, detector="gpu-pending",
                  namespaces=("secret",))
    d = digest.run(Reader(view), [secret], namespaces=frozenset({"vision"}))
    assert d.details["pending"] == [] and d.details["pending_total"]["workloads"] == 0
    assert d.details["incidents"] == []
    # Node-level figures stay: free GPUs are nobody's workload.
    assert d.details["fragmentation"]["free"] == 8.0
    mine = digest.run(Reader(view), [secret], namespaces=frozenset({"ml-team", "secret"}))
    assert len(mine.details["pending"]) == 1 and len(mine.details["incidents"]) == 1


def test_idle_allocated_gpus_per_namespace_with_prometheus() -> None:
    n1, n3 = "ip-10-0-21-14.ec2.internal", "ip-10-0-23-201.ec2.internal"

    def util(value: float, gpu: str, **labels: str) -> Sample:
        return Sample({"gpu": gpu, "UUID": f"GPU-{gpu}", **labels}, value)

    metrics = FakeMetrics({"DCGM_FI_DEV_GPU_UTIL": [
        util(0.0, "0", pod="llm-pretrain-worker-0", namespace="research", Hostname=n1),
        util(1.0, "1", pod="llm-pretrain-worker-0", namespace="research", Hostname=n1),
        util(2.0, "0", pod="sdxl-train-5c7b9d-x2x8q", namespace="vision", Hostname=n3),
        util(97.0, "1", pod="sdxl-train-5c7b9d-pl4mw", namespace="vision", Hostname=n3),
    ]})
    d = digest.run(Reader(load_snapshot(str(HELD)), metrics=metrics), None)
    assert d.details["idle"] == [
        {"namespace": "research", "gpus": 2, "pods": ["llm-pretrain-worker-0"]},
        {"namespace": "vision", "gpus": 1, "pods": ["sdxl-train-5c7b9d-x2x8q"]}]
    metrics.down = "connection refused"
    d = digest.run(Reader(load_snapshot(str(HELD)), metrics=metrics), None)
    assert d.details["idle"] == [] and "METRICS_UNAVAILABLE" in d.codes


def test_incidents_of_the_window_come_from_the_live_collection_and_the_log(
        store: Store) -> None:
    view, clock, pub = Objects(), Clock(1_796_428_800.0), Recorder()
    view.put(gpu_node("a-0", alloc=0))
    book = IncidentBook(store, quiet_for=60.0)
    s = Sentinel(Watcher(view, clock=clock), book, pub, {"lost_after": 60.0},  # type: ignore[arg-type]
                 clock=clock)
    s.tick()
    clock.t += 61
    s.tick()  # opened
    clock.t += 2 * HOUR
    view.put(gpu_node("a-0"))
    s.changed("Node", "", "a-0")
    s.tick()  # resolved
    clock.t += 120
    s.tick()  # quiet for longer than quiet_for: archived to the incident-log
    assert book.all() == [] and len(book.history()) == 1
    [p] = past_incidents(book, clock.t, 24)
    assert (p.state, p.pools, p.peak) == ("resolved", ("a100",), 8.0)
    assert p.gpu_hours == pytest.approx(8 * (2 * HOUR + 61) / HOUR)  # lost since the 1st tick
    assert past_incidents(book, clock.t + 30 * HOUR, 24) == []


# -- Block Kit and the CLI --------------------------------------------------------------------


@pytest.mark.parametrize("example", [CRASH, FRAG, ROOT / "examples" / "quota-exceeded"],
                         ids=lambda p: p.name)
def test_the_digest_renders_valid_block_kit(example: Path) -> None:
    view = load_snapshot(str(example))
    now = view.now().timestamp()
    for incidents in (None, [], [lost("a100", now - 3 * HOUR, None, 8, now)]):
        rendered = Renderer().render(digest.run(Reader(view), incidents), source=view.source)
        assert rendered.card.part == "card" and not rendered.truncated
        for m in rendered.messages:
            validate(m.blocks)
        assert not any(b.get("type") == "actions" for b in rendered.card.blocks)
    assert "GPUs lost: up to 8, 24 GPU-hours, in 1 pool" in rendered.card.text


def test_gpubot_digest_on_a_snapshot(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["digest", "--snapshot", str(FRAG), "-o", "json"], out=out, err=err, environ={})
    assert code == EXIT_OK, err.getvalue()
    doc = json.loads(out.getvalue())
    assert doc["command"] == "digest" and doc["details"]["fragmentation"]["stranded"] == 8
    out = io.StringIO()
    assert main(["digest", "--snapshot", str(FRAG)], out=out, err=err, environ={}) == EXIT_OK
    assert "8 of 8 free GPUs (4 nodes) can take no pending GPU pod" in out.getvalue()
    code = main(["digest", "--snapshot", str(FRAG), "--store-path", str(tmp_path / "none.db")],
                out=io.StringIO(), err=err, environ={})
    assert code == EXIT_NOT_FOUND and "no incident store" in err.getvalue()
    # A store gpubot watch kept: its incidents are the digest's.
    store = open_store("sqlite", path=str(tmp_path / "watch.db"))
    store.close()
    out = io.StringIO()
    assert main(["digest", "--snapshot", str(FRAG), "--store-path", str(tmp_path / "watch.db"),
                 "--hours", "12"], out=out, err=err, environ={}) == EXIT_OK
    assert "No GPUs were lost in the window." in out.getvalue()
    assert "last 12 h" in out.getvalue()
