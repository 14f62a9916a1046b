"""``gpubot serve`` end to end: settings from the environment, the real server, a signed
command answered, a clean stop."""

from __future__ import annotations

import argparse
import io
import threading
import urllib.request
from typing import Any

from bot.serve import add_arguments, serve
from tests.fake_slack import FakeSlack, signed_headers
from tests.fake_slack.harness import ROOT
from tests.serving import serving


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(argv)


def test_serve_a_snapshot_in_http_mode_and_stop_cleanly() -> None:
    with FakeSlack() as slack:
        env = {"SLACK_BOT_TOKEN": "xoxb-serve", "SLACK_SIGNING_SECRET": "serve-secret",
               "SLACK_API_URL": slack.api_url, "GPUBOT_PORT": "0"}
        args = parse(["--snapshot", str(ROOT / "examples/gpu-fragmentation"), "--mode", "http",
                      "--host", "127.0.0.1"])
        with serving(args, env) as server:
            url = server.url
            with urllib.request.urlopen(url + "/readyz", timeout=5) as r:
                assert r.status == 200
            body = ("command=%2Fgpu&text=nodes&user_id=U1&channel_id=C1&channel_name=x"
                    f"&trigger_id=t1&response_url={slack.response_url('r1')}")
            req = urllib.request.Request(url + "/slack/events", data=body.encode(),
                                         headers=signed_headers("serve-secret", body))
            with urllib.request.urlopen(req, timeout=5) as r:
                assert b"Diagnosing" in r.read()
            card = slack.wait_for("chat.postMessage")[0]
            assert card.params["channel"] == "C1"
            assert slack.calls("auth.test")  # readiness in HTTP mode


def run_serve(argv: list[str], env: dict[str, Any]) -> tuple[int, str]:
    err = io.StringIO()
    code = serve(parse(argv), env=env, err=err, stop=threading.Event())
    return code, err.getvalue()


def test_serve_refuses_bad_settings_with_exit_2() -> None:
    code, err = run_serve(["--snapshot", "x"], {})
    assert code == 2 and "SLACK_BOT_TOKEN" in err


def test_serve_a_missing_snapshot_exits_1() -> None:
    code, err = run_serve(["--snapshot", "/nonexistent/snap"],
                          {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"})
    assert code == 1 and "/nonexistent/snap" in err
