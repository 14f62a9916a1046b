"""`@gpubot why-pending ml-team/train-0` as an app_mention, through the real Bolt app over
HTTP (signed Events API requests), answered in the mention's thread; the slash command's
access rules, rate limit and dedupe apply."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml

from bot.slack.blocks import validate
from bot.slack.mentions import command_text
from tests.fake_slack.harness import SECRET, BotHarness
from tests.fake_slack.server import BOT_USER, Call
from tests.fake_slack.signing import signed_headers

CRASHLOOP = "examples/plugin-crashloop-cuda-mismatch"
MANIFEST = Path(__file__).resolve().parents[1] / "deploy" / "slack" / "manifest.yaml"
_n = itertools.count(1)


def mention(h: BotHarness, text: str, *, thread_ts: str | None = None, user: str = "U0USER1",
            channel: str = "C0CHAN1", event_id: str | None = None,
            headers: dict[str, str] | None = None, **event: Any) -> tuple[int, str]:
    """POST a signed app_mention event; (status, the mention's ts)."""
    n = next(_n)
    ts = f"1710000000.{n:06d}"
    ev: dict[str, Any] = {"type": "app_mention", "user": user, "text": text, "ts": ts,
                          "channel": channel, "event_ts": ts, **event}
    if thread_ts:
        ev["thread_ts"] = thread_ts
    body = json.dumps({
        "token": "legacy", "team_id": "T0001", "api_app_id": "A0001", "event": ev,
        "type": "event_callback", "event_id": event_id or f"Ev{n:08d}", "event_time": 1710000000,
        "authorizations": [{"enterprise_id": None, "team_id": "T0001", "user_id": BOT_USER,
                            "is_bot": True, "is_enterprise_install": False}],
    })
    sent = signed_headers(SECRET, body, content_type="application/json")
    sent.update(headers or {})
    status, _, _ = h.post(body, sent)
    return status, ts


def ephemerals(h: BotHarness, n: int = 1) -> list[Call]:
    return h.slack.wait_for("chat.postEphemeral", n)


@pytest.fixture
def h() -> Any:
    with BotHarness(CRASHLOOP) as harness:
        yield harness


def test_a_mention_in_a_channel_is_answered_in_its_own_thread(h: BotHarness) -> None:
    status, ts = mention(h, f"<@{BOT_USER}> why-pending ml-team/train-0")
    assert status == 200
    note = ephemerals(h)[0]
    assert note.params["thread_ts"] == ts and note.params["user"] == "U0USER1"
    assert "Diagnosing" in note.params["text"]
    card = h.slack.wait_for("chat.postMessage")[0]
    assert card.params["thread_ts"] == ts and card.params["channel"] == "C0CHAN1"
    validate(card.blocks)
    assert "why-pending pod/ml-team/train-0" in card.blocks[0]["text"]["text"]
    proof = h.slack.wait_for("chat.postMessage", 3)[1:]
    assert all(c.params["thread_ts"] == ts for c in proof)
    assert "Findings" in json.dumps([b for c in proof for b in c.blocks])


def test_a_mention_inside_a_thread_is_answered_in_that_thread(h: BotHarness) -> None:
    thread = "1709999999.000042"
    mention(h, f"hey <@{BOT_USER}|gpubot>  nodes", thread_ts=thread)
    calls = h.slack.wait_for("chat.postMessage", 2)
    assert {c.params["thread_ts"] for c in calls} == {thread}
    assert "GPU nodes" in calls[0].blocks[0]["text"]["text"]


def test_usage_errors_and_help_are_private_and_in_the_thread(h: BotHarness) -> None:
    thread = "1709999999.000043"
    mention(h, f"<@{BOT_USER}> why-pendng x", thread_ts=thread)
    mention(h, f"<@{BOT_USER}>", thread_ts=thread)  # nothing asked: the help
    notes = ephemerals(h, 2)
    assert all(c.params["thread_ts"] == thread for c in notes)
    text = " ".join(c.params.get("text", "") for c in notes)
    assert "unknown command" in text and "Try: `@gpubot why-pending" in text
    assert "/gpu" not in text  # no slash command can be typed in a thread
    help_card = next(c for c in notes if c.params.get("blocks"))
    assert "@gpubot why-pending" in json.dumps(help_card.params["blocks"])
    assert "/gpu" not in json.dumps(help_card.params["blocks"])
    time.sleep(0.3)
    assert h.slack.calls("chat.postMessage") == []


def test_a_retried_or_repeated_event_never_runs_twice(h: BotHarness) -> None:
    mention(h, f"<@{BOT_USER}> nodes", event_id="EvSAME")
    mention(h, f"<@{BOT_USER}> nodes", event_id="EvSAME")  # redelivered, no header
    mention(h, f"<@{BOT_USER}> doctor", headers={"X-Slack-Retry-Num": "1",
                                                  "X-Slack-Retry-Reason": "http_timeout"})
    h.slack.wait_for("chat.postMessage")
    time.sleep(0.5)
    cards = [c for c in h.slack.calls("chat.postMessage")
             if c.blocks and c.blocks[0]["type"] == "header"]
    assert len(cards) == 1 and "GPU nodes" in cards[0].blocks[0]["text"]["text"]
    metrics = h.get("/metrics")[1]
    assert 'gpubot_duplicate_deliveries_total{why="trigger_id"} 1.0' in metrics
    assert 'gpubot_duplicate_deliveries_total{why="retry_header"} 1.0' in metrics


def test_bots_and_edits_are_never_answered(h: BotHarness) -> None:
    mention(h, f"<@{BOT_USER}> nodes", bot_id="B0OTHER")
    mention(h, f"<@{BOT_USER}> nodes", subtype="message_changed")
    time.sleep(0.5)
    assert h.slack.calls("chat.postMessage") == h.slack.calls("chat.postEphemeral") == []


def test_mentions_share_the_slash_commands_rate_limit() -> None:
    with BotHarness(CRASHLOOP, rate_limit=2) as h:
        assert "Diagnosing" in h.command("nodes")[1]["text"]
        mention(h, f"<@{BOT_USER}> nodes")
        mention(h, f"<@{BOT_USER}> nodes")
        # The two mentions are handled concurrently: either may be the one refused.
        texts = sorted(n.params["text"] for n in ephemerals(h, 2))
        assert ["2 commands in the last minute" in t for t in texts].count(True) == 1
        assert ["Diagnosing" in t for t in texts].count(True) == 1


def test_a_mention_too_long_to_read_is_answered_privately_in_its_thread(h: BotHarness) -> None:
    _, ts = mention(h, f"<@{BOT_USER}> why-pending " + "x" * 2000)
    note = ephemerals(h)[0].params
    assert note["thread_ts"] == ts and note["user"] == "U0USER1"
    assert note["text"] == ("That command is 2,012 characters long; gpubot reads at most "
                            "2,000.")
    time.sleep(0.3)
    assert h.slack.calls("chat.postMessage") == []
    assert 'gpubot_commands_total{command="unknown",outcome="usage_error"} 1.0' in h.get(
        "/metrics")[1]


def test_mentions_follow_the_channel_map_by_id_and_by_name() -> None:
    with BotHarness(CRASHLOOP, channel_namespaces={"C0CHAN1": frozenset({"ml-team"}),
                                                   "#infra": frozenset({"*"})}) as h:
        h.slack.channels["C0INFRA"] = "infra"

        def note(channel: str, words: str) -> str:
            found = h.slack.wait_for("chat.postEphemeral", where=lambda c: c.params[
                "channel"] == channel and words in c.params.get("text", ""))
            return str(found[0].params["text"])

        mention(h, f"<@{BOT_USER}> why-pending research/train-0")
        assert "namespace `research` is not one of them" in note("C0CHAN1", "may only query")
        mention(h, f"<@{BOT_USER}> why-pending x -n research", channel="C0INFRA")
        note("C0INFRA", "Diagnosing")
        # A channel whose name cannot be learned is not in the map: refused, not let in.
        mention(h, f"<@{BOT_USER}> nodes", channel="C0SECRET")
        note("C0SECRET", "is not set up for gpubot")
        assert [c.params["channel"] for c in h.slack.calls("conversations.info")] == [
            "C0INFRA", "C0SECRET"]


def test_command_text_is_what_follows_the_bots_mention() -> None:
    assert command_text("<@UBOT> why-pending a/b", "UBOT") == "why-pending a/b"
    assert command_text("<@UOTHER> look: <@UBOT|gpubot> nodes", "UBOT") == "nodes"
    assert command_text("<@UBOT> doctor", None) == "doctor"
    assert command_text("  quota  ", "UBOT") == "quota"
    assert command_text("<@UBOT> <@UBOT|gpubot> nodes", "UBOT") == "nodes"
    assert command_text("<@UBOT> why-pending <@UOTHER>", "UBOT") == "why-pending <@UOTHER>"


def test_the_manifest_subscribes_to_mentions() -> None:
    m = yaml.safe_load(MANIFEST.read_text())
    assert m["settings"]["event_subscriptions"]["bot_events"] == ["app_mention"]
    assert m["settings"]["event_subscriptions"]["request_url"].endswith("/slack/events")
    assert "app_mentions:read" in m["oauth_config"]["scopes"]["bot"]


def test_recheck_of_a_card_in_a_thread_answers_in_that_thread(h: BotHarness) -> None:
    thread = "1709999999.000044"
    mention(h, f"<@{BOT_USER}> why-pending ml-team/train-0", thread_ts=thread)
    card = h.slack.wait_for("chat.postMessage")[0]
    button = next(b for b in card.blocks if b["type"] == "actions")["elements"][0]
    h.slack.wait_for("chat.postMessage", 3)
    h.slack.clear()
    value = json.loads(button["value"])
    value["c"] = []  # as if nothing was found before: the re-check posts new proof
    payload = h.action_payload("gpubot_recheck", json.dumps(value),
                               message_ts="1700000000.000001")
    payload["container"]["thread_ts"] = thread
    body = urlencode({"payload": json.dumps(payload)})
    h.post(body, signed_headers(SECRET, body))
    edit = h.slack.wait_for("chat.update")[0]
    assert edit.params["ts"] == "1700000000.000001"
    proof = h.slack.wait_for("chat.postMessage")
    assert proof and all(c.params.get("thread_ts") == thread for c in proof)


def test_a_mention_over_socket_mode_is_answered_once_in_its_thread() -> None:
    with BotHarness(CRASHLOOP, mode="socket") as h:
        h.slack.socket.wait_connected()
        event = {"type": "app_mention", "user": "U0USER1", "channel": "C0CHAN1",
                 "text": f"<@{BOT_USER}> nodes", "ts": "1710000001.000001",
                 "thread_ts": "1710000000.000009", "event_ts": "1710000001.000001"}
        payload = {"token": "legacy", "team_id": "T0001", "api_app_id": "A0001",
                   "event": event, "type": "event_callback", "event_id": "EvSOCKET1",
                   "event_time": 1710000001}
        h.slack.socket.send({"envelope_id": "m-1", "type": "events_api", "payload": payload,
                             "accepts_response_payload": False})
        h.slack.socket.wait_ack("m-1")
        h.slack.socket.send({"envelope_id": "m-2", "type": "events_api", "payload": payload,
                             "accepts_response_payload": False, "retry_attempt": 1,
                             "retry_reason": "timeout"})
        h.slack.socket.wait_ack("m-2")
        card = h.slack.wait_for("chat.postMessage")[0]
        assert card.params["thread_ts"] == "1710000000.000009"
        assert "GPU nodes" in card.blocks[0]["text"]["text"]
        time.sleep(0.5)
        cards = [c for c in h.slack.calls("chat.postMessage")
                 if c.blocks and c.blocks[0]["type"] == "header"]
        assert len(cards) == 1
