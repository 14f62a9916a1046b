"""What operators look at: /metrics (process and Python collectors, build info, Kubernetes
API requests and retries, the watch cache), JSON logs, and a quiet start."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bot.live import RetryPolicy, open_live_view
from bot.logformat import JsonFormatter
from bot.slack.metrics import Metrics
from bot.slack.reads import SharedReads
from bot.version import version
from tests.fake_kube import FakeKube
from tests.fake_slack.server import FakeSlack

ROOT = Path(__file__).resolve().parents[1]
CRASH = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
FAST = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.05, max_retry_after=0.05)


def samples(text: str, name: str) -> dict[str, float]:
    """{'{labels}': value} of one metric in the text exposition."""
    out = {}
    for m in re.finditer(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M):
        out[m.group(1) or ""] = float(m.group(2))
    return out


def test_process_python_and_build_info_are_exported() -> None:
    text = Metrics().render().decode()
    assert samples(text, "process_resident_memory_bytes")[""] > 0
    assert samples(text, "process_open_fds")[""] > 0
    assert samples(text, "python_info")
    assert samples(text, "python_gc_collections_total")
    assert samples(text, "gpubot_build_info") == {f'{{version="{version()}"}}': 1.0}


def test_kube_api_requests_retries_and_the_watch_cache(tmp_path: Path) -> None:
    metrics = Metrics()
    with FakeKube(CRASH) as fk:
        live = open_live_view(str(fk.write_kubeconfig(tmp_path / "kc")), timeout=5, retry=FAST)
        try:
            metrics.watch_cluster(SharedReads(live))
            fk.faults.throttle("nodes", retry_after=1, times=1)
            fk.faults.error("pods", code=503, times=1)
            nodes = live.list("Node")
            live.list("Pod")
            assert live.get("Pod", "no-such-pod", "ml-team") is None
            text = metrics.render().decode()
            requests = samples(text, "gpubot_kube_api_requests_total")
            assert requests['{code="429",verb="list"}'] == 1
            assert requests['{code="503",verb="list"}'] == 1
            assert requests['{code="200",verb="list"}'] >= 2
            assert requests['{code="404",verb="get"}'] == 1
            retries = samples(text, "gpubot_kube_api_retries_total")
            assert retries == {'{reason="429",verb="list"}': 1.0,
                               '{reason="503",verb="list"}': 1.0}
            assert not samples(text, "gpubot_cache_objects")  # no cache yet

            cache = live.watch(("Node", "Pod"))
            assert cache.wait_synced(10)
            text = metrics.render().decode()
            objects = samples(text, "gpubot_cache_objects")
            assert objects['{kind="Node"}'] == len(nodes)
            assert objects['{kind="Pod"}'] > 0
            assert samples(text, "gpubot_cache_synced") == {'{kind="Node"}': 1.0,
                                                                  '{kind="Pod"}': 1.0}
            assert samples(text, "gpubot_cache_relists_total") == {'{kind="Node"}': 1.0,
                                                                   '{kind="Pod"}': 1.0}
            # The cache's own requests (a list per kind) count too.
            after = samples(text, "gpubot_kube_api_requests_total")
            assert after['{code="200",verb="list"}'] >= requests['{code="200",verb="list"}'] + 2
        finally:
            if live.cache is not None:
                live.cache.stop()
            live.close()


def test_a_snapshot_bot_exports_no_kube_series() -> None:
    from bot.snapshot import load_snapshot

    metrics = Metrics()
    metrics.watch_cluster(load_snapshot(CRASH))
    text = metrics.render().decode()
    assert "# TYPE gpubot_kube_api_requests_total counter" in text
    assert not samples(text, "gpubot_kube_api_requests_total")


def test_json_log_lines_are_one_object_each() -> None:
    record = logging.LogRecord("gpubot.x", logging.ERROR, __file__, 1, "failed %s", ("a\nb",),
                               None)
    try:
        raise ValueError("boom")
    except ValueError:
        record.exc_info = sys.exc_info()
    record.command = "nodes"
    line = JsonFormatter().format(record)
    assert "\n" not in line
    doc = json.loads(line)
    assert doc["level"] == "ERROR" and doc["logger"] == "gpubot.x"
    assert doc["message"] == "failed a\nb" and doc["command"] == "nodes"
    assert "ValueError: boom" in doc["exception"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", doc["time"])


def _lines_until(proc: subprocess.Popen[str], needle: str, timeout: float) -> list[str]:
    """stderr's lines up to the first containing ``needle``; a reader thread, so that a
    bot that never says it fails the test instead of hanging it."""
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if needle in line:
                seen.set()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert seen.wait(timeout), f"no {needle!r} within {timeout} s: {lines}"
    return lines


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_serve_starts_quietly_and_logs_json_when_asked(log_format: str) -> None:
    secret = "signing-secret-4c1d9e"
    with FakeSlack() as slack:
        # A channel map: without one, startup warns that every channel may read every
        # namespace (tests/test_operator_logs.py); here only INFO is expected.
        env = dict(os.environ, SLACK_API_URL=slack.api_url, SLACK_BOT_TOKEN="xoxb-test-1",
                   SLACK_SIGNING_SECRET=secret, GPUBOT_PORT="0", GPUBOT_LOG_FORMAT=log_format,
                   GPUBOT_CHANNEL_NAMESPACES="#gpu-ops=*",
                   PYTHONWARNINGS="default")  # show DeprecationWarnings that libraries raise
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--snapshot", str(CRASH), "--mode",
             "http"], cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
            text=True)
        try:
            lines = _lines_until(proc, " serving ", 60)
            proc.send_signal(signal.SIGTERM)
            lines += proc.communicate(timeout=30)[1].splitlines()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, lines
    if log_format == "json":
        docs = [json.loads(line) for line in lines]  # every line is one JSON object
        assert {d["level"] for d in docs} == {"INFO"}, docs
        (start,) = [d for d in docs if d.get("event") == "startup"]
        assert start["version"] == version() and start["mode"] == "http"
    else:
        assert all(" INFO " in line for line in lines), lines
        assert any(f"gpubot {version()} serving " in line for line in lines), lines
    assert not any("Warning" in line or "WARNING" in line for line in lines), lines
