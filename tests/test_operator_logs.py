"""Operator logs: ``gpubot serve`` with GPUBOT_LOG_FORMAT=json writes one JSON object per
line: at startup the version, Slack team, mode, cluster and store, and a warning when every
channel may query every namespace; then one record per handled request with its command,
target, user, channel, duration, outcome, finding codes and request id. An approval asked
for from a verdict card is audited with the request id of the command that posted the card.
No token or secret is ever logged."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_kube import FakeKube, wait_until
from tests.fake_slack import FakeSlack, signed_headers
from tests.test_approvals import REQUESTER, SNAPSHOT, Env, approval_card

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
SECRET, TOKEN = "ops-log-signing-secret-31d7", "xoxb-ops-log-token-5e2a"
REQUEST_ID = re.compile(r"^[0-9a-f]{12}$")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, text: str, slack: FakeSlack, user: str = "U0OPS01") -> Any:
    body = (f"command=%2Fgpu&text={urllib.parse.quote(text)}&user_id={user}"
            f"&channel_id=C0OPS01&channel_name=gpu-ops&trigger_id=t-{time.monotonic_ns()}"
            f"&response_url={slack.response_url('r1')}")
    req = urllib.request.Request(url + "/slack/events", data=body.encode(),
                                 headers=signed_headers(SECRET, body))
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"{}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[list[dict[str, Any]], str]]:
    """A real ``gpubot serve`` process in HTTP mode with JSON logs: a diagnosis answered, a
    usage error and a refusal by the rate limit; then SIGTERM. (Its records, its stderr.)"""
    port = _free_port()
    with FakeSlack() as slack:
        env = {**os.environ, "SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET,
               "SLACK_API_URL": slack.api_url, "GPUBOT_PORT": str(port),
               "GPUBOT_LOG_FORMAT": "json", "GPUBOT_RATE_LIMIT": "2",
               "GPUBOT_STORE_PATH": str(tmp_path_factory.mktemp("store") / "state.db")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--snapshot", str(EXAMPLE),
             "--mode", "http"], env=env, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)
            assert "Diagnosing" in _post(url, "why-pending ml-team/train-0", slack)["text"]
            slack.wait_for("chat.postMessage", timeout=20)
            _post(url, "why-pendng ml-team/train-0", slack)  # a usage error
            _post(url, "help", slack)  # the rate limit (2 a minute) refuses this one
            time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    yield [json.loads(ln) for ln in lines], err  # every line is one JSON object


def test_startup_says_version_team_mode_cluster_and_the_channel_scope(
        served: tuple[list[dict[str, Any]], str]) -> None:
    from bot.version import version

    records, _ = served
    (start,) = [r for r in records if r.get("event") == "startup"]
    assert start["level"] == "INFO" and start["logger"] == "gpubot.events"
    assert start["version"] == version() and start["mode"] == "http"
    assert (start["team"], start["team_id"]) == ("Fake", "T0001")  # the fake's auth.test
    assert str(EXAMPLE) in start["cluster"] and start["store"].startswith("sqlite ")
    (scope,) = [r for r in records if r.get("event") == "channel_scope"]
    assert scope["level"] == "WARNING" and "every namespace" in scope["message"]


def test_one_record_per_command_with_its_fields(
        served: tuple[list[dict[str, Any]], str]) -> None:
    records, _ = served
    commands = [r for r in records if r.get("event") == "command"]
    # (the usage error may be answered while the diagnosis posts its thread)
    assert sorted((r["command"], r["outcome"]) for r in commands) == [
        ("unknown", "rate_limited"), ("unknown", "usage_error"), ("why-pending", "ok")]
    (done,) = [r for r in commands if r["command"] == "why-pending"]
    assert (done["target"], done["user"], done["channel"]) == (
        "ml-team/train-0", "U0OPS01", "C0OPS01")
    assert {"CUDA_DRIVER_MISMATCH", "DEVICE_PLUGIN_CRASHLOOP"} <= set(done["codes"])
    assert isinstance(done["duration_ms"], int) and 0 <= done["duration_ms"] < 20_000
    assert all(REQUEST_ID.match(r["request_id"]) for r in commands)
    assert len({r["request_id"] for r in commands}) == 3
    # the text format's message carries the same fields
    assert "outcome=ok" in done["message"] and f"request_id={done['request_id']}" in (
        done["message"])


def test_no_secret_is_logged(served: tuple[list[dict[str, Any]], str]) -> None:
    _, err = served
    assert TOKEN not in err and SECRET not in err


def test_text_format_shows_the_fields_compactly(caplog: pytest.LogCaptureFixture) -> None:
    from bot import oplog

    caplog.set_level(logging.INFO, logger="gpubot.events")
    oplog.event("command", command="nodes", outcome="answered", request_id="0123456789ab",
                user="U1", channel="C1", duration=0.25, codes=["GPU_UNHEALTHY"])
    (r,) = caplog.records
    assert r.getMessage() == ("command nodes user=U1 channel=C1 outcome=ok 250ms "
                              "codes=GPU_UNHEALTHY request_id=0123456789ab")


def test_extra_fields_are_redacted_too() -> None:
    from bot.logformat import JsonFormatter
    from bot.slack.redact import MASK, RedactingFilter

    record = logging.LogRecord("gpubot.events", logging.INFO, "", 0, "x", None, None)
    record.target = "node xoxb-1-leaked"  # type: ignore[attr-defined]
    record.codes = ["s3cret here"]  # type: ignore[attr-defined]
    RedactingFilter(["s3cret"]).filter(record)
    out = json.loads(JsonFormatter().format(record))
    assert out["target"] == f"node {MASK}" and out["codes"] == [f"{MASK} here"]


def test_an_approval_is_audited_with_the_request_id_of_the_command_that_offered_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gpubot.events")
    with FakeKube(SNAPSHOT, daemonset_delay=0.2) as fk:
        env = Env(fk, tmp_path)
        try:
            h = env.bot()
            status, _, _ = h.command("doctor", user=REQUESTER)
            assert status == 200
            card = h.slack.wait_for("chat.postMessage", where=lambda c: any(
                str(e.get("action_id", "")).startswith("gpubot_action")
                for b in c.blocks if b.get("type") == "actions"
                for e in b.get("elements", [])), timeout=20)[0]
            button = next(e for b in card.blocks if b.get("type") == "actions"
                          for e in b["elements"]
                          if str(e.get("action_id", "")).startswith("gpubot_action"))
            def commands() -> list[logging.LogRecord]:
                return [r for r in caplog.records if getattr(r, "event", "") == "command"]

            wait_until(lambda: commands())  # logged once the card's thread is posted too
            (offered,) = commands()
            origin = offered.request_id  # type: ignore[attr-defined]
            assert json.loads(button["value"])["r"] == origin
            h.action(button["action_id"], button["value"], message_ts=card.response["ts"],
                     user=REQUESTER, text=button["text"]["text"])
            approval_card(h)
            assert h.bot is not None and h.bot.approvals is not None
            (entry,) = [r.data for r in h.bot.approvals.audit.log.last(5)]
            assert (entry["event"], entry["request_id"]) == ("requested", origin)
            actions = [r for r in caplog.records if getattr(r, "event", "") == "action"]
            assert [(getattr(r, "outcome", ""), getattr(r, "request_id", ""),
                     getattr(r, "approval", "")) for r in actions] == [
                ("requested", origin, entry["request"])]
        finally:
            env.close()
