"""Socket Mode against a local WebSocket server: the bot opens the connection with
apps.connections.open, acks each envelope over the socket, answers via the Web API."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from bot.slack.blocks import validate
from tests.fake_slack.harness import BotHarness


@pytest.fixture(scope="module")
def running() -> Any:
    # One connection for the module: closing a Socket Mode client takes seconds.
    with BotHarness("examples/plugin-crashloop-cuda-mismatch", mode="socket") as harness:
        harness.slack.socket.wait_connected()
        yield harness


@pytest.fixture
def h(running: BotHarness) -> Any:
    yield running
    time.sleep(0.2)  # let a test's last answers land before the next test's record starts
    running.slack.clear()


def slash(h: BotHarness, envelope_id: str, text: str, **extra: Any) -> dict[str, Any]:
    payload = {"token": "legacy", "team_id": "T0001", "channel_id": "C0CHAN1",
               "channel_name": "ml-team", "user_id": "U0USER1", "command": "/gpu",
               "text": text, "api_app_id": "A0001",
               "response_url": h.slack.response_url(envelope_id),
               "trigger_id": f"{envelope_id}.trigger"}
    return {"envelope_id": envelope_id, "type": "slash_commands",
            "accepts_response_payload": True, "payload": payload, **extra}


def test_socket_mode_connects_and_is_ready(h: BotHarness) -> None:
    assert h.slack.socket.connections == 1
    status, body = h.get("/readyz")
    assert status == 200 and json.loads(body)["slack"] is True
    assert h.get("/slack/events")[0] == 404  # no HTTP endpoint in Socket Mode


def test_the_connection_is_opened_with_the_app_token() -> None:
    with BotHarness("examples/plugin-crashloop-cuda-mismatch", mode="socket") as h:
        h.slack.socket.wait_connected()
        opened = h.slack.calls("apps.connections.open")
        assert len(opened) == 1
        assert opened[0].headers["authorization"] == "Bearer xapp-1-test-app-token-99bb"


def test_slash_command_over_the_socket_is_acked_with_diagnosing_then_answered(
        h: BotHarness) -> None:
    h.slack.socket.send(slash(h, "env-1", "why-pending ml-team/train-0"))
    ack = h.slack.socket.wait_ack("env-1")
    assert ack["payload"]["response_type"] == "ephemeral"
    assert "Diagnosing" in ack["payload"]["text"]
    card = h.slack.wait_for("chat.postMessage")[0]
    assert card.params["channel"] == "C0CHAN1"
    validate(card.blocks)
    assert "pod/ml-team/train-0" in card.blocks[0]["text"]["text"]
    ts = card.response["ts"]
    thread = h.slack.wait_for("chat.postMessage", n=2,
                              where=lambda c: c.params.get("thread_ts") == ts)
    assert thread


def test_socket_mode_retries_are_dropped(h: BotHarness) -> None:
    h.slack.socket.send(slash(h, "env-2", "nodes"))
    h.slack.socket.wait_ack("env-2")
    h.slack.socket.send(slash(h, "env-3", "nodes", retry_attempt=1, retry_reason="timeout"))
    h.slack.socket.wait_ack("env-3")
    h.slack.wait_for("chat.postMessage")
    time.sleep(0.5)
    cards = [c for c in h.slack.calls("chat.postMessage") if "thread_ts" not in c.params]
    assert len(cards) == 1


def test_button_click_over_the_socket(h: BotHarness) -> None:
    payload = {
        "type": "block_actions", "user": {"id": "U0USER1"}, "trigger_id": "t-9",
        "channel": {"id": "C0CHAN1", "name": "ml-team"},
        "container": {"type": "message", "message_ts": "1700000000.000001"},
        "response_url": h.slack.response_url("act-9"),
        "actions": [{"action_id": "gpubot_action_0", "type": "button",
                     "text": {"type": "plain_text", "text": "Restart device plugin on n1"},
                     "value": json.dumps({"v": 1, "a": "restart-device-plugin", "n": "n1"})}],
    }
    h.slack.socket.send({"envelope_id": "env-9", "type": "interactive",
                         "accepts_response_payload": False, "payload": payload})
    h.slack.socket.wait_ack("env-9")
    reply = h.slack.wait_for("response_url")[0]
    assert "Approvals are not enabled yet" in reply.params["text"]
