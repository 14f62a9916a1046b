"""The bot over real HTTP: signed slash commands and button clicks POSTed to the running
server (waitress on 127.0.0.1), answers recorded by the fake Slack Web API."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from typing import Any

import pytest

from bot.slack.blocks import validate
from bot.slack.redact import RedactingFilter
from bot.slack.server import BotServer
from handlers.view import ClusterView, Obj
from tests.fake_slack.harness import APP_TOKEN, BOT_TOKEN, SECRET, BotHarness
from tests.fake_slack.server import Call

CRASHLOOP = "examples/plugin-crashloop-cuda-mismatch"


def texts(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def card_and_thread(h: BotHarness, n_thread: int = 1) -> tuple[Call, list[Call]]:
    calls = h.slack.wait_for("chat.postMessage", 1 + n_thread)
    card = calls[0]
    ts = "1700000000.000001"
    thread = [c for c in h.slack.calls("chat.postMessage") if c.params.get("thread_ts") == ts]
    return card, thread


@pytest.fixture
def h() -> Any:
    with BotHarness(CRASHLOOP) as harness:
        yield harness


def test_why_pending_is_acked_at_once_then_answered_with_a_card_and_its_thread(
        h: BotHarness) -> None:
    # Ack timing is measured in bench/bench_slack.py; here: the ack is the ephemeral note.
    status, body, _ = h.command("why-pending ml-team/train-0")
    assert status == 200
    assert body["response_type"] == "ephemeral"
    assert "Diagnosing" in body["text"] and "why-pending ml-team/train-0" in body["text"]

    card, thread = card_and_thread(h, n_thread=3)
    assert card.params["channel"] == "C0CHAN1" and "thread_ts" not in card.params
    blocks = card.blocks
    validate(blocks)
    assert blocks[0]["type"] == "header"
    assert "why-pending pod/ml-team/train-0" in blocks[0]["text"]["text"]
    assert blocks[1]["text"]["text"].startswith("Root cause: ")
    buttons = next(b for b in blocks if b["type"] == "actions")["elements"]
    assert buttons[0]["text"]["text"] == "Re-check"
    assert json.loads(buttons[0]["value"])["q"] == ["why-pending", "ml-team/train-0"]
    # The proof is in the card's thread: findings, nodes and events, commands to copy.
    time.sleep(0.3)
    thread = [c for c in h.slack.calls("chat.postMessage")
              if c.params.get("thread_ts") == "1700000000.000001"]
    assert len(thread) >= 3
    for c in thread:
        assert c.params["channel"] == "C0CHAN1"
        validate(c.blocks)
    everything = texts([b for c in thread for b in c.blocks])
    assert "Findings" in everything and "Recent events" in everything
    assert "Commands to copy" in everything


def test_unsigned_bad_and_stale_requests_get_401_and_run_nothing(h: BotHarness) -> None:
    body = h.command_body("nodes")
    assert h.post(body, {"Content-Type": "application/x-www-form-urlencoded"})[0] == 401
    assert h.command("nodes", sign=False)[0] == 401  # signed with the wrong secret
    stale = int(time.time()) - 6 * 60  # correctly signed, six minutes old
    assert h.command("nodes", timestamp=stale)[0] == 401
    time.sleep(0.3)
    assert h.slack.calls("chat.postMessage") == []


def test_unknown_subcommand_and_bad_arguments_get_an_ephemeral_hint_with_an_example(
        h: BotHarness) -> None:
    status, body, _ = h.command("why-pendng ml-team/train-0")
    assert status == 200 and body["response_type"] == "ephemeral"
    assert "unknown command `why-pendng`" in body["text"]
    assert "did you mean `why-pending`" in body["text"]
    assert "/gpu why-pending ml-team/train-0" in body["text"]
    _, body, _ = h.command("why-pending")
    assert "name the pod or workload" in body["text"] and "Try:" in body["text"]
    _, body, _ = h.command("why-pending a/b/c/d")
    assert "cannot read target" in body["text"]
    time.sleep(0.2)
    assert h.slack.calls("chat.postMessage") == []


def test_help_lists_every_command(h: BotHarness) -> None:
    _, body, _ = h.command("help")
    assert body["response_type"] == "ephemeral"
    validate(body["blocks"])
    text = texts(body["blocks"])
    for name in ("why-pending", "doctor", "nodes", "pending", "quota"):
        assert f"/gpu {name}" in text


def test_smart_dashes_from_slack_clients_are_understood(h: BotHarness) -> None:
    _, body, _ = h.command("why-pending train-0 \u2014namespace ml-team")
    assert "Diagnosing" in body["text"]
    card = h.slack.wait_for("chat.postMessage")[0]
    assert "pod/ml-team/train-0" in card.blocks[0]["text"]["text"]


def test_recheck_edits_the_card_in_place_and_says_what_changed(h: BotHarness) -> None:
    h.command("why-pending ml-team/train-0")
    card = h.slack.wait_for("chat.postMessage")[0]
    button = next(b for b in card.blocks if b["type"] == "actions")["elements"][0]
    value = json.loads(button["value"])
    codes = value["c"]
    # Pretend the card was made when one code was absent and another present.
    value["c"] = [*codes[1:], "QUOTA_EXCEEDED"]
    status, _, _ = h.action("gpubot_recheck", json.dumps(value),
                            message_ts="1700000000.000001")
    assert status == 200
    update = h.slack.wait_for("chat.update")[0]
    assert update.params["channel"] == "C0CHAN1"
    assert update.params["ts"] == "1700000000.000001"
    validate(update.blocks)
    note = texts(update.blocks)
    assert "Re-checked by <@U0USER1>" in note
    assert "resolved `QUOTA_EXCEEDED`" in note and f"new `{codes[0]}`" in note
    # what changed comes with fresh proof in the same thread
    h.slack.wait_for("chat.postMessage", where=lambda c: "Findings" in texts(c.blocks), n=2)


def test_recheck_with_no_change_says_so(h: BotHarness) -> None:
    h.command("doctor")
    card = h.slack.wait_for("chat.postMessage")[0]
    button = next(b for b in card.blocks if b["type"] == "actions")["elements"][0]
    h.action("gpubot_recheck", button["value"], message_ts="1700000000.000001")
    update = h.slack.wait_for("chat.update")[0]
    assert "Re-checked by <@U0USER1>: no change." in texts(update.blocks)


def test_action_buttons_answer_that_approvals_are_not_enabled(h: BotHarness) -> None:
    value = json.dumps({"v": 1, "a": "restart-device-plugin", "t": "cluster",
                        "n": "gpu-node-7", "c": "GPU_UNHEALTHY"})
    status, _, _ = h.action("gpubot_action_0", value, message_ts="1700000000.000001",
                            text="Restart device plugin on gpu-node-7")
    assert status == 200
    reply = h.slack.wait_for("response_url")[0]
    assert reply.params["response_type"] == "ephemeral"
    assert "Approvals are not enabled yet" in reply.params["text"]
    assert "Restart device plugin on gpu-node-7" in reply.params["text"]
    assert h.slack.calls("chat.postMessage") == []


def test_a_repeated_delivery_never_runs_twice(h: BotHarness) -> None:
    h.command("nodes", trigger_id="777.1.same")
    status, _, _ = h.command("nodes", trigger_id="777.1.same")
    assert status == 200
    status, _, _ = h.command("doctor", extra_headers={"X-Slack-Retry-Num": "1",
                                                      "X-Slack-Retry-Reason": "http_timeout"})
    assert status == 200
    h.slack.wait_for("chat.postMessage")
    time.sleep(0.5)
    cards = [c for c in h.slack.calls("chat.postMessage") if "thread_ts" not in c.params]
    assert len(cards) == 1 and "GPU nodes" in cards[0].blocks[0]["text"]["text"]
    metrics = h.get("/metrics")[1]
    assert 'gpubot_duplicate_deliveries_total{why="trigger_id"} 1.0' in metrics
    assert 'gpubot_duplicate_deliveries_total{why="retry_header"} 1.0' in metrics


def test_rate_limit_per_user_answers_politely() -> None:
    with BotHarness(CRASHLOOP, rate_limit=2) as h:
        assert "Diagnosing" in h.command("nodes")[1]["text"]
        assert "Diagnosing" in h.command("nodes")[1]["text"]
        _, body, _ = h.command("nodes")
        assert body["response_type"] == "ephemeral"
        assert "try again in" in body["text"] and "2 commands in the last minute" in body["text"]
        # another user is not held back
        assert "Diagnosing" in h.command("nodes", user="U0OTHER")[1]["text"]


def test_a_recheck_passes_the_rate_limit_and_the_channel_map() -> None:
    with BotHarness(CRASHLOOP, rate_limit=2,
                    channel_namespaces={"C0CHAN1": frozenset({"ml-team"})}) as h:
        value = json.dumps({"q": ["why-pending", "research/train-0"], "c": []})
        for _ in range(3):
            assert h.action("gpubot_recheck", value, message_ts="1700000000.000001")[0] == 200
        replies = [c.params for c in h.slack.wait_for("response_url", 3)]
        assert all(r["response_type"] == "ephemeral" for r in replies)
        told = sorted(r["text"] for r in replies)
        assert ["may only query `ml-team`" in t for t in told].count(True) == 2
        assert ["2 commands in the last minute" in t for t in told].count(True) == 1
        metrics = h.get("/metrics")[1]
        assert 'gpubot_commands_total{command="why-pending",outcome="refused"} 2.0' in metrics
        assert ('gpubot_commands_total{command="why-pending",outcome="rate_limited"} 1.0'
                in metrics)
        assert h.slack.calls("chat.update") == []


def test_channels_may_only_query_their_namespaces_and_refusals_are_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="gpubot.slack.access")
    with BotHarness(CRASHLOOP, channel_namespaces={"C0CHAN1": frozenset({"ml-team"}),
                                                   "#infra": frozenset({"*"})}) as h:
        _, body, _ = h.command("why-pending research/train-0")
        assert body["response_type"] == "ephemeral"
        assert "may only query `ml-team`" in body["text"]
        assert "namespace `research` is not one of them" in body["text"]
        assert any("refused why-pending research/train-0 in channel C0CHAN1" in r.getMessage()
                   for r in caplog.records)
        _, body, _ = h.command("why-pending train-0", channel="C0OTHER", channel_name="random")
        assert "is not set up for gpubot" in body["text"]
        assert "Diagnosing" in h.command("why-pending ml-team/train-0")[1]["text"]
        assert "Diagnosing" in h.command("why-pending x -n research", channel="C0INFRA",
                                         channel_name="infra")[1]["text"]


class HangingView:
    """A view whose Pod reads in one namespace hang until released (a hung API server)."""

    def __init__(self, view: ClusterView, namespace: str) -> None:
        self.view = view
        self.namespace = namespace
        self.release = threading.Event()

    @property
    def source(self) -> str:
        return self.view.source

    def list(self, kind: str, namespace: str | None = None, **kw: Any) -> list[Obj]:
        if namespace == self.namespace:
            self.release.wait(30)
        return self.view.list(kind, namespace, **kw)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        if namespace == self.namespace:
            self.release.wait(30)
        return self.view.get(kind, name, namespace)

    def events(self, kind: str, name: str, namespace: str | None = None) -> list[Obj]:
        return self.view.events(kind, name, namespace)

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        return self.view.logs(namespace, pod, container)

    def now(self) -> Any:
        return self.view.now()


def test_a_hung_cluster_times_out_with_what_hung_and_blocks_no_one_else() -> None:
    from bot.snapshot import load_snapshot
    from tests.fake_slack.harness import ROOT

    view = HangingView(load_snapshot(str(ROOT / CRASHLOOP)), "ml-team")
    with BotHarness(view=view, deadline=2.0, workers=2, max_stuck=4) as h:
        try:
            for i in range(3):  # more hung diagnoses than workers
                assert h.command("why-pending ml-team/train-0", user=f"U0HUNG{i}")[0] == 200
            # Another user is still acknowledged and answered while those hang.
            status, body, _ = h.command("nodes", user="U0OTHER")
            assert status == 200 and "Diagnosing" in body["text"]
            card = h.slack.wait_for("chat.postMessage", timeout=10,
                                    where=lambda c: "GPU nodes" in texts(c.blocks))[0]
            assert card.params["channel"] == "C0CHAN1"
            notes = h.slack.wait_for("response_url", n=3, timeout=10)
            hung = 0
            for note in notes:
                assert note.params["response_type"] == "ephemeral"
                text = note.params["text"]
                assert "`why-pending ml-team/train-0` timed out after 2 s while " in text
                # what it was doing: the read that hung, or (the third, when it waited a
                # whole deadline for a replacement worker) waiting for a worker
                hung += "reading Pod train-0 in ml-team" in text
                assert ("reading Pod train-0 in ml-team" in text
                        or "waiting for a free worker" in text)
            assert hung >= 2
            assert 'gpubot_commands_total{command="why-pending",outcome="timeout"} 3.0' in (
                h.get("/metrics")[1])
        finally:
            view.release.set()


def test_a_429_from_slack_is_retried_after_retry_after_and_nothing_is_lost(
        h: BotHarness) -> None:
    h.slack.rate_limit("chat.postMessage", times=2, retry_after=1)
    start = time.monotonic()
    h.command("doctor")
    card = h.slack.wait_for("chat.postMessage", where=lambda c: c.status == 200,
                            timeout=15)[0]
    assert time.monotonic() - start >= 2.0  # waited Retry-After twice
    limited = [c for c in h.slack.calls("chat.postMessage") if c.status == 429]
    assert len(limited) == 2
    assert card.blocks == limited[0].blocks  # the same message, delivered
    time.sleep(0.5)
    assert len([c for c in h.slack.calls("chat.postMessage") if c.status == 200]) >= 3
    assert 'gpubot_slack_api_retries_total{reason="rate_limited"} 2.0' in h.get("/metrics")[1]


def test_not_in_channel_answers_the_asker_privately(h: BotHarness) -> None:
    h.slack.fail("chat.postMessage", "not_in_channel")
    h.command("doctor")
    reply = h.slack.wait_for("response_url")[0]
    assert reply.params["response_type"] == "ephemeral"
    assert "not_in_channel" in reply.params["text"] and "/invite @gpubot" in reply.params["text"]
    validate(reply.params["blocks"])
    assert 'gpubot_slack_api_errors_total{error="not_in_channel",method="chat_postMessage"}' in (
        h.get("/metrics")[1])


def test_a_target_that_does_not_exist_is_answered_privately(h: BotHarness) -> None:
    h.command("why-pending ml-team/train-9")
    reply = h.slack.wait_for("response_url")[0]
    assert "not found" in reply.params["text"] and reply.params["response_type"] == "ephemeral"
    assert h.slack.calls("chat.postMessage") == []


def test_health_readiness_and_metrics(h: BotHarness) -> None:
    assert h.get("/healthz") == (200, "ok\n")
    status, body = h.get("/readyz")
    assert status == 200 and json.loads(body) == {"slack": True, "cluster": True}
    h.command("nodes")
    h.slack.wait_for("chat.postMessage")
    time.sleep(0.3)
    status, metrics = h.get("/metrics")
    assert status == 200
    assert 'gpubot_commands_total{command="nodes",outcome="answered"} 1.0' in metrics
    assert 'gpubot_diagnosis_seconds_count{command="nodes"} 1.0' in metrics
    assert "gpubot_pool_queued" in metrics
    assert h.get("/nope")[0] == 404


def test_readyz_is_503_when_the_cluster_is_unreachable(h: BotHarness) -> None:
    assert h.bot is not None
    h.bot.cluster_probe = lambda: False
    status, body = h.get("/readyz")
    assert status == 503 and json.loads(body)["cluster"] is False


def test_tokens_and_secrets_never_reach_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with BotHarness(CRASHLOOP) as h:
        h.command("why-pending ml-team/train-0")
        h.slack.wait_for("chat.postMessage", n=2)
        h.command("nodes", sign=False)
        time.sleep(0.3)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for secret in (BOT_TOKEN, APP_TOKEN, SECRET):
        assert secret not in logged
    # At DEBUG the libraries log more; the filter serve() installs scrubs tokens there too.
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    caplog.handler.addFilter(RedactingFilter([BOT_TOKEN, APP_TOKEN, SECRET]))
    with BotHarness(CRASHLOOP) as h:
        h.command("nodes")
        h.slack.wait_for("chat.postMessage", n=2)
    text = caplog.text
    for secret in (BOT_TOKEN, APP_TOKEN, SECRET):
        assert secret not in text


def test_a_cut_answer_gets_the_full_report_attached_in_its_thread(h: BotHarness) -> None:
    from bot.slack.commands import parse
    from bot.slack.request import Request
    from tests.test_slack_blocks import huge_diagnosis

    assert h.bot is not None
    req = Request("U0USER1", "C0CHAN1", "ml-team", h.slack.response_url("big"), time.monotonic())
    h.bot.diagnoses.post_answer(parse("why-pending ml-team/train-0"), huge_diagnosis(), req)
    posts = h.slack.calls("chat.postMessage")
    card_ts = "1700000000.000001"
    assert all(p.params.get("thread_ts") == card_ts for p in posts[1:])
    for p in posts:
        validate(p.blocks)
        assert len(p.blocks) <= 50
    assert "more findings" in texts([b for p in posts for b in p.blocks])
    urls = h.slack.calls("files.getUploadURLExternal")
    assert sorted(u.params["filename"] for u in urls) == [
        "gpubot-why-pending-pod-ml-team-train-0.json",
        "gpubot-why-pending-pod-ml-team-train-0.txt"]
    uploads = h.slack.calls("upload")
    assert len(uploads) == 2 and all(u.params["size"] > 10_000 for u in uploads)
    done = h.slack.calls("files.completeUploadExternal")[0]
    assert done.params["channel_id"] == "C0CHAN1" and done.params["thread_ts"] == card_ts
    report = max(h.slack.uploads.values(), key=len).decode()
    assert "finding 119" in report  # the whole report, nothing cut


def _refuses(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) != 0


def test_the_server_stops_and_frees_its_port_even_if_waitress_closed_its_wake_up_pipe() -> None:
    h = BotHarness(CRASHLOOP).start()
    assert h.server is not None and h.get("/healthz")[0] == 200
    h.server.server.trigger.close()  # what waitress does to it after an error in its loop
    h.stop()
    assert h.server._thread is not None and not h.server._thread.is_alive()
    assert _refuses(h.url)


def test_a_server_that_never_started_frees_its_port() -> None:
    with BotHarness(CRASHLOOP) as h:
        assert h.bot is not None
        idle = BotServer(h.bot, host="127.0.0.1", port=0)
        assert not _refuses(idle.url)
        idle.stop(timeout=1)
        assert _refuses(idle.url)
