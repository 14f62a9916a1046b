"""``gpubot serve`` with the alert receiver and Prometheus configured from the environment."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from tests.alert_payloads import TOKEN, alert, webhook
from tests.fake_slack import FakeSlack
from tests.fake_slack.harness import ROOT
from tests.real_prometheus import free_port
from tests.serving import serving
from tests.test_slack_serve import parse, run_serve


def test_an_alert_token_without_a_channel_is_refused() -> None:
    code, err = run_serve(["--snapshot", str(ROOT / "examples/gpu-fragmentation")], {
        "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "GPUBOT_ALERT_TOKEN": TOKEN})
    assert code == 2 and "GPUBOT_ALERT_CHANNEL" in err and TOKEN not in err


def test_a_bad_prometheus_url_is_refused() -> None:
    code, err = run_serve(["--snapshot", str(ROOT / "examples/gpu-fragmentation")], {
        "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1",
        "GPUBOT_PROMETHEUS_URL": "prometheus:9090"})
    assert code == 2 and "http://" in err


def test_serve_takes_alerts_and_diagnoses_with_an_unreachable_prometheus(
        tmp_path: Path) -> None:

    with FakeSlack() as slack:
        env = {"SLACK_BOT_TOKEN": "xoxb-serve", "SLACK_SIGNING_SECRET": "s",
               "SLACK_API_URL": slack.api_url, "GPUBOT_PORT": "0",
               "GPUBOT_ALERT_TOKEN": TOKEN, "GPUBOT_ALERT_CHANNEL": "C0AL",
               "GPUBOT_STORE_PATH": str(tmp_path / "state.db"),
               "GPUBOT_PROMETHEUS_URL": f"http://127.0.0.1:{free_port()}",
               "GPUBOT_PROMETHEUS_TIMEOUT": "2"}
        args = parse(["--snapshot", str(ROOT / "examples/unhealthy-gpus-xid"), "--mode", "http",
                      "--host", "127.0.0.1"])
        with serving(args, env) as server:
            url = server.url + "/alertmanager"
            body = json.dumps(webhook([alert("GPUNotAdvertised", node="dgx-h100-07")])).encode()
            try:
                urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=5)
                raise AssertionError("no token: expected 401")
            except urllib.error.HTTPError as err:
                assert err.code == 401
            req = urllib.request.Request(url, data=body, headers={
                "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=5) as r:
                assert r.status == 202
            card = slack.wait_for("chat.postMessage")[0]
            assert card.params["channel"] == "C0AL"
            ts = card.response["ts"]
            thread = slack.wait_for("chat.postMessage", 3, timeout=20, where=lambda c:
                                    c.params.get("thread_ts") == ts)
            text = " ".join(json.dumps(c.blocks) for c in thread)
            assert "doctor dgx-h100-07" in text
            assert "METRICS_UNAVAILABLE" in text  # said, and the diagnosis still ran


def test_the_kubernetes_store_needs_a_live_cluster() -> None:
    code, err = run_serve(["--snapshot", str(ROOT / "examples/gpu-fragmentation")], {
        "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "GPUBOT_ALERT_TOKEN": TOKEN,
        "GPUBOT_ALERT_CHANNEL": "C1", "GPUBOT_STORE": "kubernetes"})
    assert code == 2 and "needs a live cluster" in err


def test_a_bad_idle_window_is_refused() -> None:
    code, err = run_serve(["--snapshot", str(ROOT / "examples/gpu-fragmentation")], {
        "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1",
        "GPUBOT_PROMETHEUS_URL": "http://127.0.0.1:9", "GPUBOT_IDLE_WINDOW": "an hour"})
    assert code == 2 and "GPUBOT_IDLE_WINDOW" in err
