"""Alert cards lead with the cause, and Silence works through a real Alertmanager.

The real ``prometheus-alertmanager`` gets an alert through its API and posts its webhook to
the bot; the fake Slack gets the card, which then leads with the root cause the thread's
diagnosis found and links to Alertmanager, the Prometheus graph and the runbook. Signed
interaction payloads pick "Silence for 4h" on the card and click the approval card: a
non-approver and the requester are refused, an approver's click creates the silence, which
Alertmanager then lists (with the group's matchers) and applies to the alert. A silence
Alertmanager cannot create (down, 404) is said in the thread. Every step is audited.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlencode

import pytest

from bot.actions.requests import Policy, Requests
from bot.alerts.service import open_alerts
from bot.alerts.silences import COLLECTION as SILENCE_REQUESTS
from bot.alerts.silences import SILENCE, SILENCE_APPROVE, SILENCE_DENY, Silences
from bot.slack.blocks import validate
from bot.store import AuditLog
from bot.store.sqlite import SqliteStore
from tests.alert_payloads import TOKEN, alert, webhook
from tests.fake_slack.harness import SECRET, BotHarness
from tests.fake_slack.server import Call
from tests.fake_slack.signing import signed_headers
from tests.real_binaries import require
from tests.real_prometheus import Process, free_port, start_alertmanager

HELD = "tests/scenarios/insufficient-gpu-held/cluster.yaml"
CHANNEL = "C0ALERTS"
REQUESTER, APPROVER, OTHER, GROUPIE = "U0APPR01", "U0APPR02", "U0OTHER1", "U0GROUP1"
GROUP = "S0ONCALL1"
GRAPH = "http://prometheus.example:9090/graph?g0.expr=kube_pod_status_phase&g0.tab=1"
RUNBOOK = "https://wiki.example.com/gpu/pending-too-long"
LABELS = {"alertname": "GPUPodPendingTooLong", "namespace": "ml-team", "pod": "train-0",
          "severity": "warning"}


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)


def _post_alert(am: str, labels: dict[str, str]) -> None:
    body = json.dumps([{"labels": labels, "generatorURL": GRAPH, "annotations": {
        "summary": "ml-team/train-0 has been pending for over 10 minutes",
        "runbook_url": RUNBOOK}}]).encode()
    req = urllib.request.Request(f"{am}/api/v2/alerts", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200


class Stack:
    """A bot with alert cards (approvers: two users and a user group) on its own store."""

    def __init__(self, tmp: Path, approvers: tuple[str, ...] | None = (
            APPROVER, REQUESTER, GROUP), **settings: Any) -> None:
        self.store = SqliteStore(str(tmp / "state.db"))
        self.h = BotHarness(HELD, alert_token=TOKEN, alert_channel=CHANNEL,
                            approvers=approvers, **settings).start()
        self.h.slack.usergroups[GROUP] = [GROUPIE]
        assert self.h.bot is not None
        self.h.bot.alerts = open_alerts(self.h.bot, self.h.settings, store=self.store, pace=0)

    def close(self) -> None:
        self.h.stop()
        self.store.close()

    def card(self) -> Call:
        return self.h.slack.wait_for("chat.postMessage", timeout=30, where=lambda c: (
            "thread_ts" not in c.params and c.status == 200))[0]

    def led(self, ts: str) -> Call:
        """The card once it leads with the root cause."""
        return self.h.slack.wait_for("chat.update", timeout=30, where=lambda c: (
            c.params["ts"] == ts and "Root cause" in _text(c)))[0]

    def pick(self, card: Call, option: str, user: str = REQUESTER) -> int:
        """``user`` picks ``option`` ("Silence for 4h") in the card's Silence menu."""
        menu = _menu(card)
        chosen = next(o for o in menu["options"] if o["text"]["text"] == option)
        payload = self.h.action_payload(SILENCE, "", message_ts=card.response["ts"],
                                        user=user, channel=CHANNEL, channel_name="gpu-alerts")
        payload["actions"] = [{"action_id": SILENCE, "block_id": "gpubot_alert_links",
                               "type": "static_select", "selected_option": chosen,
                               "placeholder": menu["placeholder"],
                               "action_ts": "1700000002.000001"}]
        body = urlencode({"payload": json.dumps(payload)})
        status, _, took = self.h.post(body, signed_headers(SECRET, body))
        assert took < 3
        return status

    def approval(self, thread: str) -> tuple[Call, str]:
        (call,) = self.h.slack.wait_for("chat.postMessage", timeout=15, where=lambda c: (
            c.params.get("thread_ts") == thread and any(
                b.get("block_id") == "gpubot_silence_approval" for b in c.blocks)))
        buttons = next(b for b in call.blocks
                       if b.get("block_id") == "gpubot_silence_approval")["elements"]
        return call, buttons[0]["value"]

    def click(self, card: Call, rid: str, user: str, action: str = SILENCE_APPROVE) -> None:
        status, _, took = self.h.action(action, rid, message_ts=card.response["ts"],
                                        user=user, channel=CHANNEL, text="Approve")
        assert status == 200 and took < 3

    def ephemeral(self, user: str, n: int = 1) -> str:
        calls = self.h.slack.wait_for("chat.postEphemeral", n, timeout=15,
                                      where=lambda c: c.params["user"] == user)
        return str(calls[n - 1].params["text"])

    def said(self, thread: str, needle: str) -> str:
        (call,) = self.h.slack.wait_for("chat.postMessage", timeout=20, where=lambda c: (
            c.params.get("thread_ts") == thread and needle in c.params.get("text", "")))
        return str(call.params["text"])

    def audited(self, n: int) -> list[dict[str, Any]]:
        """The audit trail, oldest first, once it has ``n`` entries (or after 20 s)."""
        def entries() -> list[dict[str, Any]]:
            return [r.data for r in reversed(AuditLog(self.store).last(50))]

        _wait(lambda: len(entries()) >= n)
        return entries()


def _text(call: Call) -> str:
    return json.dumps(call.blocks, ensure_ascii=False)


def _menu(card: Call) -> dict[str, Any]:
    links = next(b for b in card.blocks if b.get("block_id") == "gpubot_alert_links")
    accessory: dict[str, Any] = links["accessory"]
    assert accessory["action_id"] == SILENCE
    return accessory


def _links(card: Call) -> dict[str, str]:
    links = next(b for b in card.blocks if b.get("block_id") == "gpubot_alert_links")
    return {text: url for url, text in re.findall(r"<([^|>]+)\|([^>]+)>", links["text"]["text"])}


def _wait(fn: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_card_leads_with_the_cause_and_silence_goes_through_an_approver(
        tmp_path: Path) -> None:
    (binary,) = require("prometheus-alertmanager")
    stack: Stack | None = None
    proc: Process | None = None
    try:
        # The bot first (Alertmanager needs its webhook URL), then Alertmanager, whose URL
        # the bot's card links and whose API it writes.
        port = free_port()
        stack = Stack(tmp_path, alertmanager_url=f"http://127.0.0.1:{port}")
        proc, am = start_alertmanager(binary, tmp_path, stack.h.url + "/alertmanager", TOKEN,
                                      port=port)
        _post_alert(am, LABELS)

        first = stack.card()
        ts = first.response["ts"]
        assert "Diagnosing" in _text(first)  # out before the diagnosis, then edited
        card = stack.led(ts)
        validate(card.blocks)
        text = _text(card)
        assert re.search(r"\*Root cause:\*\s+`INSUFFICIENT_GPU`", text), text
        assert "*Severity*\\nwarning" in text
        assert re.search(r"\*Firing for\*\\n(&lt;1m|\d+m) \(at \d\d:\d\d UTC\)", text), text
        links = _links(card)
        assert links["Prometheus graph"] == GRAPH  # the alert's generatorURL
        assert links["Runbook"] == RUNBOOK  # its runbook_url annotation
        assert links["Alertmanager"].startswith(f"{am}/#/alerts?")
        assert "alertname%3D%22GPUPodPendingTooLong%22" in links["Alertmanager"]
        assert [o["text"]["text"] for o in _menu(card)["options"]] == [
            "Silence for 1h", "Silence for 4h", "Silence for 24h"]

        # The requester picks 4h: an approval card in the alert's thread.
        assert stack.pick(card, "Silence for 4h") == 200
        approval, rid = stack.approval(ts)
        validate(approval.blocks)
        shown = _text(approval)
        assert 'alertname=\\"GPUPodPendingTooLong\\"' in shown and f"<@{REQUESTER}>" in shown
        assert _get(f"{am}/api/v2/silences") == []

        # Refused at click time: not an approver; the requester themself.
        stack.click(approval, rid, OTHER)
        assert "not an approver" in stack.ephemeral(OTHER)
        stack.click(approval, rid, REQUESTER)
        assert "another approver must approve it" in stack.ephemeral(REQUESTER)
        assert _get(f"{am}/api/v2/silences") == []

        # A member of the approvers' user group agrees: the silence exists in Alertmanager.
        stack.click(approval, rid, GROUPIE)
        done = stack.said(ts, "Silenced for 4h")
        (silence,) = _get(f"{am}/api/v2/silences")
        assert silence["id"] in done and f"<{am}/#/silences/{silence['id']}|" in done
        assert silence["status"]["state"] == "active"
        assert sorted((m["name"], m["value"], m["isRegex"], m.get("isEqual", True))
                      for m in silence["matchers"]) == sorted(
            (k, v, False, True) for k, v in LABELS.items())
        assert GROUPIE in silence["createdBy"]
        assert REQUESTER in silence["comment"] and ts in silence["comment"]
        lasts = (_ts(silence["endsAt"]) - _ts(silence["startsAt"])) / 3600
        assert 3.99 < lasts < 4.01
        # Alertmanager applies it to the firing alert.
        suppressed = _wait(lambda: [a for a in _get(f"{am}/api/v2/alerts")
                                    if silence["id"] in a["status"]["silencedBy"]])
        assert suppressed and suppressed[0]["labels"] == LABELS

        # The alert card says it is silenced, by whom, in place of its Silence menu.
        quiet = _wait(lambda: next((c for c in stack.h.slack.calls("chat.update")
                                    if c.params["ts"] == ts and "Silenced until" in _text(c)),
                                   None))
        validate(quiet.blocks)
        assert silence["id"] in _text(quiet) and f"<@{GROUPIE}>" in _text(quiet)
        assert "gpubot_silence" not in json.dumps(quiet.blocks)

        # The approval card says who approved; a second click finds it decided.
        assert _wait(lambda: any("Approved by" in _text(c) and "Silenced for 4h" in _text(c)
                                 for c in stack.h.slack.calls("chat.update")
                                 if c.params["ts"] == approval.response["ts"]))
        stack.click(approval, rid, APPROVER)
        assert "approved by" in stack.ephemeral(APPROVER)
        events = stack.audited(6)
        assert [e["event"] for e in events] == [
            "requested", "refused", "refused", "approved", "created", "refused"]
        created = events[4]
        assert created["silence"] == silence["id"] and created["approver"] == GROUPIE
        assert created["requester"] == REQUESTER and created["matchers"] == LABELS
        metrics = stack.h.get("/metrics")[1]
        assert 'gpubot_commands_total{command="silence",outcome="created"} 1.0' in metrics
    finally:
        if proc is not None:
            proc.stop()
        if stack is not None:
            stack.close()


def _ts(stamp: str) -> float:
    from handlers.timefmt import parse_time

    t = parse_time(stamp)
    assert t is not None
    return t.timestamp()


@pytest.mark.parametrize("broken", ["down", "wrong path"])
def test_a_silence_alertmanager_does_not_create_is_said_in_the_thread(
        tmp_path: Path, broken: str) -> None:
    (binary,) = require("prometheus-alertmanager")
    proc: Process | None = None
    stack = Stack(tmp_path)  # no alertmanager_url: the webhook's externalURL is used
    try:
        if broken == "down":
            url = f"http://127.0.0.1:{free_port()}"
            words = f"cannot reach Alertmanager at {url}"
        else:
            proc, am = start_alertmanager(binary, tmp_path, stack.h.url + "/nowhere", TOKEN)
            url = f"{am}/not-alertmanager"
            words = f"Alertmanager at {url} refused the silence (HTTP 404)"
        a = alert("GPUPodPendingTooLong", namespace="ml-team", pod="train-0")
        _send(stack, dict(webhook([a]), externalURL=url))
        card = stack.card()
        ts = card.response["ts"]
        card = stack.led(ts)
        assert _links(card)["Alertmanager"].startswith(f"{url}/#/alerts?")
        assert stack.pick(card, "Silence for 1h") == 200
        approval, rid = stack.approval(ts)
        stack.click(approval, rid, APPROVER)
        said = stack.said(ts, "No silence was created")
        assert words in said
        events = stack.audited(3)
        assert [e["event"] for e in events] == ["requested", "approved", "failed"]
        assert words in events[-1]["result"]
        if proc is not None:
            assert _get(f"{am}/api/v2/silences") == []
    finally:
        if proc is not None:
            proc.stop()
        stack.close()


def _send(stack: Stack, payload: dict[str, Any]) -> None:
    status, _, _ = stack.h.post(json.dumps(payload), {
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        "/alertmanager")
    assert status == 202


def test_the_requester_may_withdraw(tmp_path: Path) -> None:
    stack = Stack(tmp_path, alertmanager_url="http://127.0.0.1:9")
    try:
        _send(stack, webhook([alert("GPUPodPendingTooLong", namespace="ml-team",
                                    pod="train-0")]))
        card = stack.led(stack.card().response["ts"])
        ts = card.response["ts"]
        assert stack.pick(card, "Silence for 24h", user=OTHER) == 200  # anyone may ask
        approval, rid = stack.approval(ts)
        stack.click(approval, rid, OTHER, SILENCE_DENY)
        assert _wait(lambda: any("Denied by" in _text(c) for c in
                                 stack.h.slack.calls("chat.update")
                                 if c.params["ts"] == approval.response["ts"]))
        events = stack.audited(2)
        assert [e["event"] for e in events] == ["requested", "denied"]
        stack.click(approval, rid, GROUPIE)  # decided: nothing more
        assert "denied by" in stack.ephemeral(GROUPIE)
    finally:
        stack.close()


def test_without_approvers_the_card_has_links_and_no_silence_menu(tmp_path: Path) -> None:
    stack = Stack(tmp_path, approvers=None)
    try:
        _send(stack, webhook([alert("GPUPodPendingTooLong", namespace="ml-team",
                                    pod="train-0")]))
        card = stack.led(stack.card().response["ts"])
        validate(card.blocks)
        assert SILENCE not in _text(card)
        assert _links(card)["Alertmanager"].startswith("http://alertmanager.test/#/alerts?")
        # no runbook_url annotation and no base URL: the root cause's page, named as text
        assert "Runbook" not in _links(card)
        assert "Runbook: gpubot's `docs/runbook/INSUFFICIENT_GPU.md`" in _text(card)
    finally:
        stack.close()


def test_alertmanager_url_must_be_a_url_slack_can_link() -> None:
    from bot.slack.config import ConfigError, load_settings

    env = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
    for bad in ("alertmanager:9093", "http://am:9093/|x"):
        with pytest.raises(ConfigError, match="GPUBOT_ALERTMANAGER_URL"):
            load_settings(env={**env, "GPUBOT_ALERTMANAGER_URL": bad}).validate()
    assert load_settings(env={**env, "GPUBOT_ALERTMANAGER_URL": "http://am:9093"}
                         ).validate().alertmanager_url == "http://am:9093"


def test_a_silence_a_stopped_bot_left_running_is_failed_and_said(tmp_path: Path) -> None:
    """Approved, then the bot stopped before Alertmanager answered: the next bot marks it
    failed in the store, the thread and the audit trail, once its run cannot be going on."""
    stack = Stack(tmp_path, alertmanager_url="http://127.0.0.1:9")
    try:
        requests = Requests(stack.store, SILENCE_REQUESTS)
        base = {"channel": CHANNEL, "thread_ts": "1700000000.000100", "requester": REQUESTER,
                "matchers": {"alertname": "GPUPodPendingTooLong", "namespace": "ml-team"},
                "duration": "1h", "group_key": "{}:{}", "decided_by": APPROVER,
                "action": "silence", "target": "GPUPodPendingTooLong", "created": 0.0}
        requests.create({**base, "id": "old", "state": "running",
                         "decided_at": time.time() - 3600})
        requests.create({**base, "id": "now", "state": "running", "decided_at": time.time()})
        requests.create({**base, "id": "done", "state": "done", "decided_at": 0.0})
        bot = stack.h.bot
        assert bot is not None
        silences = Silences(stack.store, Policy((APPROVER,), False, 900.0, 60.0), bot.poster,
                            bot.metrics, lambda _group: set())
        assert silences.recover() == 1
        states = {rid: (requests.get(rid) or pytest.fail(rid)).data["state"]
                  for rid in ("old", "now", "done")}
        assert states == {"old": "failed", "now": "running", "done": "done"}
        said = stack.said(base["thread_ts"], "interrupted")
        assert 'namespace="ml-team"' in said
        assert [e["event"] for e in stack.audited(1)] == ["failed"]
        assert silences.recover() == 0  # once
    finally:
        stack.close()


class _Recorder(http.server.BaseHTTPRequestHandler):
    """An Alertmanager's silences endpoint that notes each request's Authorization."""

    seen: ClassVar[list[str | None]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append(self.headers.get("Authorization"))
        body = json.dumps({"silenceID": f"s{len(self.seen)}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("configured", [True, False])
def test_the_alertmanager_token_goes_to_the_configured_url_only(
        tmp_path: Path, configured: bool) -> None:
    """GPUBOT_ALERTMANAGER_TOKEN is sent to alertmanager_url; a webhook's externalURL (which
    the webhook's sender names) never gets it."""
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    stack = Stack(tmp_path, alertmanager_token="am-token-5e1f",
                  **({"alertmanager_url": url} if configured else {}))
    try:
        _send(stack, dict(webhook([alert("GPUPodPendingTooLong", namespace="ml-team",
                                         pod="train-0")]), externalURL=url))
        card = stack.led(stack.card().response["ts"])
        ts = card.response["ts"]
        assert stack.pick(card, "Silence for 1h") == 200
        approval, rid = stack.approval(ts)
        stack.click(approval, rid, APPROVER)
        stack.said(ts, "Silenced for 1h")
        assert _Recorder.seen == (["Bearer am-token-5e1f"] if configured else [None])
    finally:
        stack.close()
        server.shutdown()
        server.server_close()
