"""Approval-gated actions end to end: signed slash commands and button clicks to the real
Bolt app over HTTP, the fake Slack recording what the bot says, the fake API server's
request log showing every write."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bot.actions.cluster import Cluster
from bot.actions.requests import Policy, Runner
from bot.actions.units import Plan
from bot.slack.approvals import APPROVE, DENY, Approvals
from bot.slack.blocks import validate
from bot.slack.config import Settings
from bot.snapshot import load_snapshot
from bot.store import Store
from bot.store.kube import KubeStore
from bot.store.sqlite import SqliteStore
from tests.fake_kube import FakeKube, RequestRecord, wait_until
from tests.fake_kube.fixtures import connect
from tests.fake_slack.harness import BotHarness
from tests.fake_slack.server import Call

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "data" / "fake_kube" / "cluster"
PLUGIN_NS, PLUGIN_DS = "gpu-operator", "nvidia-device-plugin-daemonset"
CRASHING = "nvidia-device-plugin-daemonset-x7k2p"  # on gpu-node-1: allocatable GPUs 0 of 8
REQUESTER, APPROVER, OTHER, GROUPIE = "U0ASKER1", "U0APPR01", "U0OTHER1", "U0GROUP1"
GROUP = "S0ONCALL1"
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpubot"}}
PLUGIN_PODS = f"/api/v1/namespaces/{PLUGIN_NS}/pods/"


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fk() -> Iterator[FakeKube]:
    with FakeKube(SNAPSHOT, daemonset_delay=0.2, objects=[NAMESPACE]) as fake:
        yield fake


class Env:
    """A FakeKube, and bots (BotHarness) whose approvals act on it."""

    def __init__(self, fk: FakeKube, tmp_path: Path) -> None:
        self.fk = fk
        self.tmp = tmp_path
        self.clients: list[Any] = []
        self.harnesses: list[BotHarness] = []
        self.clock = Clock()
        self.view = load_snapshot(str(SNAPSHOT))

    def client(self) -> Any:
        self.clients.append(connect(self.fk, self.tmp, f"kubeconfig-{len(self.clients)}"))
        return self.clients[-1]

    def store(self, kind: str = "sqlite") -> Store:
        if kind == "kubernetes":
            return KubeStore(self.client(), "gpubot")
        return SqliteStore(self.tmp / "state.db")

    def bot(self, *, store: str = "sqlite", approvers: tuple[str, ...] = (APPROVER, GROUP),
            allow_self: bool = False, ttl: float = 900.0, verify_timeout: float = 20.0,
            usergroups: dict[str, list[str]] | None = None, **settings: Any) -> BotHarness:
        def approvals(settings: Settings) -> Approvals:
            policy = Policy(approvers, allow_self, ttl, verify_timeout)
            cluster = Cluster(self.client(), timeout=5)
            return Approvals(self.store(store), cluster, policy, clock=self.clock,
                             runner=Runner(cluster, verify_timeout=verify_timeout, poll=0.05))

        h = BotHarness(view=self.view, approvals=approvals, **settings)
        h.slack.usergroups.update(usergroups or {GROUP: [GROUPIE]})
        self.harnesses.append(h.start())
        return h

    def close(self) -> None:
        for h in self.harnesses:
            h.stop()
        for c in self.clients:
            c.close()


@pytest.fixture
def env(fk: FakeKube, tmp_path: Path) -> Iterator[Env]:
    e = Env(fk, tmp_path)
    try:
        yield e
    finally:
        e.close()


# -- helpers ------------------------------------------------------------------------------------


def approval_card(h: BotHarness, n: int = 1) -> tuple[Call, str]:
    """The n-th approval card posted, and its request id."""
    cards = h.slack.wait_for("chat.postMessage", n, where=lambda c: any(
        b.get("block_id") == "gpubot_approval" for b in c.blocks))
    card = cards[n - 1]
    buttons = next(b for b in card.blocks if b.get("block_id") == "gpubot_approval")["elements"]
    return card, buttons[0]["value"]


def ask(h: BotHarness, text: str = "restart-plugin gpu-node-1", user: str = REQUESTER
        ) -> tuple[Call, str]:
    status, body, _ = h.command(text, user=user)
    assert status == 200 and "Preparing an approval request" in body["text"], body
    return approval_card(h)


def click(h: BotHarness, card: Call, rid: str, user: str, action: str = APPROVE
          ) -> tuple[int, Any, float]:
    return h.action(action, rid, message_ts=card.response["ts"], user=user,
                    text="Approve" if action == APPROVE else "Deny")


def ephemerals(h: BotHarness, user: str, n: int = 1) -> list[str]:
    calls = h.slack.wait_for("chat.postEphemeral", n, where=lambda c: c.params["user"] == user)
    return [c.params["text"] for c in calls]


def thread_text(h: BotHarness, thread: str, containing: str, timeout: float = 15) -> str:
    calls = h.slack.wait_for("chat.postMessage", 1, timeout=timeout, where=lambda c: (
        c.params.get("thread_ts") == thread and containing in c.params.get("text", "")))
    return str(calls[0].params["text"])


def deletes(fk: FakeKube, dry_run: bool | None = None) -> list[RequestRecord]:
    return [r for r in fk.requests.find("DELETE", PLUGIN_PODS)
            if dry_run is None or r.dry_run == dry_run]


def updates(h: BotHarness) -> list[str]:
    return [json.dumps(c.params.get("blocks")) for c in h.slack.calls("chat.update")]


# -- the happy path -------------------------------------------------------------------------------


def test_approved_restart_runs_a_dry_run_then_one_delete_and_proves_the_gpus_came_back(
        env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gpubot.audit")
    h = env.bot()
    card, rid = ask(h)
    validate(card.blocks)
    text = json.dumps(card.blocks)
    assert f"pod/{PLUGIN_NS}/{CRASHING} on node/gpu-node-1" in text
    assert "Running GPU pods keep running" in text and f"<@{REQUESTER}>" in text
    assert "allocatable nvidia.com/gpu: 0 of capacity 8" in text or "is failing" in text
    approve = next(b for b in card.blocks if b.get("block_id") == "gpubot_approval")
    assert [e["action_id"] for e in approve["elements"]] == [APPROVE, DENY]
    assert all("confirm" in e for e in approve["elements"])
    assert deletes(env.fk) == []

    status, _, took = click(h, card, rid, APPROVER)
    assert status == 200 and took < 3
    thread = card.response["ts"]
    done = thread_text(h, thread, "GPUs back on gpu-node-1")
    assert "(8/8)" in done and "ml-team" not in done
    dels = deletes(env.fk)
    assert [(r.dry_run, r.status) for r in dels] == [(True, 200), (False, 200)]
    assert dels[0].query.get("dryRun") == "All"
    wait_until(lambda: any("Approved by" in u and APPROVER in u and "GPUs back" in u
                           for u in updates(h)))
    for c in h.slack.calls("chat.update"):
        validate(c.blocks)
    # audit: store, a Kubernetes Event on the node, listed by /gpu audit
    def reasons() -> set[str]:
        return {e["reason"] for e in env.fk.store.all("Event", "default")
                if e["involvedObject"]["name"] == "gpu-node-1"}

    wait_until(lambda: "GpubotDone" in reasons())  # the last thing the run does
    assert reasons() >= {"GpubotRequested", "GpubotApproved", "GpubotDone"}
    logged = [json.loads(r.getMessage())["audit"] for r in caplog.records
              if r.name == "gpubot.audit"]
    assert [e["event"] for e in logged] == ["requested", "approved", "done"]
    assert logged[-1]["approver"] == APPROVER and logged[-1]["requester"] == REQUESTER
    assert logged[-1]["objects"] == [f"pod/{PLUGIN_NS}/{CRASHING} on node/gpu-node-1"]
    metrics = h.get("/metrics")[1]
    assert 'gpubot_commands_total{command="restart-plugin",outcome="done"} 1.0' in metrics
    status, body, _ = h.command("audit 5", user=OTHER)
    assert body["response_type"] == "ephemeral"
    assert [ln.split("*")[1] for ln in body["text"].splitlines()[1:4]] == [
        "done", "approved", "requested"]


def test_a_finding_button_asks_in_the_verdict_thread_and_rechecks_the_pending_pod(
        env: Env) -> None:
    h = env.bot()
    value = json.dumps({"v": 1, "a": "restart-device-plugin", "t": "pod/ml-team/train-0",
                        "n": "gpu-node-1", "c": "GPU_UNHEALTHY"})
    h.action("gpubot_action_1", value, message_ts="1700000000.000077", user=REQUESTER,
             text="Restart device plugin on gpu-node-1")
    card, rid = approval_card(h)
    assert card.params["thread_ts"] == "1700000000.000077"
    assert "finding GPU_UNHEALTHY" in json.dumps(card.blocks)
    click(h, card, rid, APPROVER)
    done = thread_text(h, "1700000000.000077", "GPUs back on gpu-node-1")
    assert "ml-team/train-0 still Pending" in done  # the fake API server has no scheduler


# -- the rules -------------------------------------------------------------------------------------


def test_self_approval_is_refused(env: Env) -> None:
    h = env.bot(approvers=(REQUESTER, APPROVER))
    card, rid = ask(h, user=REQUESTER)
    click(h, card, rid, REQUESTER)
    assert "another approver must approve" in ephemerals(h, REQUESTER)[0]
    time.sleep(0.3)
    assert deletes(env.fk) == []
    click(h, card, rid, APPROVER)  # still pending: a real approver can
    wait_until(lambda: deletes(env.fk, dry_run=False))


def test_self_approval_when_allowed(env: Env) -> None:
    h = env.bot(approvers=(REQUESTER,), allow_self=True)
    card, rid = ask(h, user=REQUESTER)
    click(h, card, rid, REQUESTER)
    wait_until(lambda: deletes(env.fk, dry_run=False))


def test_a_non_approver_is_refused(env: Env) -> None:
    h = env.bot()
    card, rid = ask(h)
    click(h, card, rid, OTHER)
    text = ephemerals(h, OTHER)[0]
    assert "not an approver" in text and f"<@{APPROVER}>" in text and f"<!subteam^{GROUP}>" in text
    time.sleep(0.3)
    assert deletes(env.fk) == []


def test_a_user_group_member_may_approve(env: Env) -> None:
    h = env.bot(approvers=(GROUP,))
    card, rid = ask(h)
    click(h, card, rid, GROUPIE)
    wait_until(lambda: deletes(env.fk, dry_run=False))
    assert h.slack.calls("usergroups.users.list")[0].params["usergroup"] == GROUP


def test_the_requester_may_withdraw_but_others_may_not_deny(env: Env) -> None:
    h = env.bot()
    card, rid = ask(h)
    click(h, card, rid, OTHER, DENY)
    assert "not an approver" in ephemerals(h, OTHER)[0]
    click(h, card, rid, REQUESTER, DENY)
    wait_until(lambda: any(f"Denied by <@{REQUESTER}>" in u for u in updates(h)))
    assert deletes(env.fk) == []


def test_group_members_are_read_once_a_minute() -> None:
    from bot.slack.approvals import GroupMembers

    calls: list[str] = []
    now = [0.0]

    def call(method: str, **kw: Any) -> dict[str, Any]:
        calls.append(kw["usergroup"])
        return {"ok": True, "users": ["U1", "U2"]}

    members = GroupMembers(call, ttl=60, clock=lambda: now[0])
    assert members(GROUP) == {"U1", "U2"} and members(GROUP) == {"U1", "U2"}
    now[0] = 61
    members(GROUP)
    assert calls == [GROUP, GROUP]


def test_deny_is_final(env: Env) -> None:
    h = env.bot()
    card, rid = ask(h)
    click(h, card, rid, APPROVER, DENY)
    wait_until(lambda: any("Denied by" in u for u in updates(h)))
    click(h, card, rid, APPROVER)
    assert "was denied" in ephemerals(h, APPROVER)[0]
    time.sleep(0.3)
    assert deletes(env.fk) == []


def test_an_expired_request_is_refused_and_stays_expired_after_a_restart(env: Env) -> None:
    h = env.bot(ttl=60)
    card, rid = ask(h)
    env.clock.now += 61
    click(h, card, rid, APPROVER)
    assert "expired" in ephemerals(h, APPROVER)[0]
    wait_until(lambda: any("Expired" in u for u in updates(h)))
    h.stop()
    again = env.bot(ttl=60)  # a restart: the same store file
    env.clock.now -= 61  # even with the clock back, the request stays expired
    again.action(APPROVE, rid, message_ts=card.response["ts"], user=APPROVER)
    assert "expired already" in ephemerals(again, APPROVER)[0]
    time.sleep(0.3)
    assert deletes(env.fk) == []


def test_a_pending_request_survives_a_restart(env: Env) -> None:
    h = env.bot()
    card, rid = ask(h)
    h.stop()
    again = env.bot()
    again.action(APPROVE, rid, message_ts=card.response["ts"], user=APPROVER)
    thread_text(again, card.response["ts"], "GPUs back on gpu-node-1")
    assert len(deletes(env.fk, dry_run=False)) == 1


def test_a_replaced_plugin_pod_is_not_deleted(env: Env) -> None:
    """Same pod UID: someone restarted the plugin between the request and the approval."""
    h = env.bot()
    card, rid = ask(h)
    pods = env.fk.registry.by_kind("Pod")
    assert pods is not None
    env.fk.store.delete(pods, PLUGIN_NS, CRASHING)  # someone else: the DaemonSet recreates it
    wait_until(lambda: env.fk.daemonsets.recreated)
    env.fk.requests.clear()
    click(h, card, rid, APPROVER)
    assert "not the one this request was for" in ephemerals(h, APPROVER)[0]
    assert deletes(env.fk) == []


def test_a_problem_that_went_away_is_not_acted_on(env: Env) -> None:
    h = env.bot()
    card, rid = ask(h)
    heal_gpu_node_1(env.fk)
    click(h, card, rid, APPROVER)
    assert "the problem is gone" in ephemerals(h, APPROVER)[0]
    assert deletes(env.fk) == []


def heal_gpu_node_1(fk: FakeKube) -> None:
    """What a fix behind the bot's back looks like: plugin Ready, GPUs allocatable."""
    node = fk.store.find("Node", "gpu-node-1")
    assert node is not None
    node["status"]["allocatable"]["nvidia.com/gpu"] = "8"
    fk.store.put(node)
    pod = fk.store.find("Pod", CRASHING, PLUGIN_NS)
    assert pod is not None
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                     "containerStatuses": [{"name": "nvidia-device-plugin", "ready": True,
                                            "restartCount": 0, "state": {"running": {}}}]}
    fk.store.put(pod)


def test_a_rolling_restart_does_not_need_a_problem(env: Env) -> None:
    h = env.bot()
    card, rid = ask(h, "restart-plugin --all")
    heal_gpu_node_1(env.fk)
    click(h, card, rid, APPROVER)
    thread_text(h, card.response["ts"], "GPUs back on gpu-node-2", timeout=20)
    assert len(deletes(env.fk, dry_run=False)) == 2


def test_rbac_denial_names_the_missing_permission(env: Env) -> None:
    h = env.bot()
    card, rid = ask(h)
    env.fk.faults.forbid("pods", verb="delete")
    click(h, card, rid, APPROVER)
    text = ephemerals(h, APPROVER)[0]
    assert "may not delete pods" in text
    assert 'resources: ["pods"], verbs: ["delete"]' in text and PLUGIN_NS in text
    assert [(r.dry_run, r.status) for r in deletes(env.fk)] == [(True, 403)]
    thread_text(h, card.response["ts"], "may not delete pods")


def test_a_crash_looping_replacement_is_reported_when_seen(fk: FakeKube, tmp_path: Path) -> None:
    with FakeKube(SNAPSHOT, daemonset_delay=0.2, objects=[NAMESPACE],
                  daemonset_outcome={f"{PLUGIN_NS}/{PLUGIN_DS}": "crashloop"}) as crashing:
        e = Env(crashing, tmp_path)
        try:
            h = e.bot(verify_timeout=60)
            card, rid = ask(h)
            start = time.monotonic()
            click(h, card, rid, APPROVER)
            text = thread_text(h, card.response["ts"], "did not recover")
            assert time.monotonic() - start < 10  # seen, not waited out (60 s)
            assert "crash-looping" in text and "CrashLoopBackOff" in text
            assert "doctor gpu-node-1" in text
        finally:
            e.close()


# -- exactly once ----------------------------------------------------------------------------------


def test_twenty_concurrent_approve_clicks_delete_once(env: Env) -> None:
    approvers = tuple(f"U0APPR{i:03d}" for i in range(20))
    h = env.bot(approvers=approvers)
    card, rid = ask(h)
    barrier = threading.Barrier(20)

    def one(user: str) -> int:
        barrier.wait()
        return click(h, card, rid, user)[0]

    with ThreadPoolExecutor(20) as pool:
        assert list(pool.map(one, approvers)) == [200] * 20
    thread_text(h, card.response["ts"], "GPUs back on gpu-node-1")
    refused = h.slack.wait_for("chat.postEphemeral", 19)
    assert all("already" in c.params["text"] for c in refused)
    assert [r.dry_run for r in deletes(env.fk)] == [True, False]


def test_two_bots_sharing_the_kubernetes_store_delete_once(env: Env) -> None:
    a = env.bot(store="kubernetes")
    b = env.bot(store="kubernetes")
    card, rid = ask(a)
    barrier = threading.Barrier(20)

    def one(i: int) -> int:
        barrier.wait()
        return click(a if i % 2 else b, card, rid, APPROVER)[0]

    with ThreadPoolExecutor(20) as pool:
        assert list(pool.map(one, range(20))) == [200] * 20
    winner = wait_until(lambda: next((h for h in (a, b) for c in h.slack.calls(
        "chat.postMessage") if "GPUs back" in c.params.get("text", "")), None))
    assert winner in (a, b)
    time.sleep(0.3)
    assert [r.dry_run for r in deletes(env.fk)] == [True, False]


# -- the other actions -----------------------------------------------------------------------------


def test_cordon_and_uncordon(env: Env) -> None:
    h = env.bot()
    card, rid = ask(h, "cordon gpu-node-2")
    assert "New pods stop landing" in json.dumps(card.blocks)
    click(h, card, rid, APPROVER)
    thread_text(h, card.response["ts"], "gpu-node-2 cordoned")
    patches = env.fk.requests.find("PATCH", "/api/v1/nodes/gpu-node-2")
    assert [(r.dry_run, r.status) for r in patches] == [(True, 200), (False, 200)]
    node = env.fk.store.find("Node", "gpu-node-2")
    assert node is not None and node["spec"]["unschedulable"] is True
    h.command("cordon gpu-node-2", user=REQUESTER)
    assert "already cordoned" in ephemerals(h, REQUESTER)[0]

    h.command("uncordon gpu-node-2", user=REQUESTER)
    card2, rid2 = approval_card(h, 2)
    click(h, card2, rid2, APPROVER)
    thread_text(h, card2.response["ts"], "gpu-node-2 uncordoned")
    node = env.fk.store.find("Node", "gpu-node-2")
    assert node is not None and not node["spec"].get("unschedulable")


def test_restart_all_goes_one_node_at_a_time(env: Env) -> None:
    h = env.bot()
    card, rid = ask(h, "restart-plugin --all")
    assert "one at a time" in json.dumps(card.blocks)
    click(h, card, rid, APPROVER)
    text = thread_text(h, card.response["ts"], "GPUs back on gpu-node-2", timeout=20)
    assert "GPUs back on gpu-node-1" in text
    real = deletes(env.fk, dry_run=False)
    assert real[0].path.rsplit("/", 1)[-1] == CRASHING
    assert len(real) == 2
    # the second node's delete came after the first node's replacement was up
    new_first = env.fk.daemonsets.recreated[0][1]
    created = next(p for p in env.fk.store.all("Pod", PLUGIN_NS)
                   if p["metadata"]["name"] == new_first)
    assert created["spec"]["nodeName"] == "gpu-node-1"
    assert real[1].at > real[0].at + 0.2


def test_restart_all_stops_at_the_first_node_that_does_not_recover(tmp_path: Path) -> None:
    with FakeKube(SNAPSHOT, daemonset_delay=0.2, objects=[NAMESPACE],
                  daemonset_outcome={f"{PLUGIN_NS}/{PLUGIN_DS}": "crashloop"}) as crashing:
        e = Env(crashing, tmp_path)
        try:
            h = e.bot()
            card, rid = ask(h, "restart-plugin --all")
            click(h, card, rid, APPROVER)
            text = thread_text(h, card.response["ts"], "did not recover")
            assert "gpu-node-1 did not recover" in text and "1 node(s) not restarted" in text
            assert "doctor gpu-node-1" in text
            assert len(deletes(crashing, dry_run=False)) == 1
        finally:
            e.close()


def test_bad_action_commands_are_answered_with_usage(env: Env) -> None:
    h = env.bot()
    for text, expect in (("restart-plugin", "takes one node"), ("cordon a b", "takes one node"),
                         ("audit x", "one number")):
        status, body, _ = h.command(text, user=REQUESTER)
        assert status == 200 and expect in body["text"], (text, body)
    h.command("restart-plugin no-such-node", user=REQUESTER)
    assert "there is no node" in ephemerals(h, REQUESTER)[0]


def test_action_requests_pass_the_channel_map_and_the_rate_limit(env: Env) -> None:
    h = env.bot(channel_namespaces={"C0CHAN1": frozenset({"ml-team"})}, rate_limit=2)
    _, body, _ = h.command("cordon gpu-node-1", user=OTHER, channel="C0OTHER",
                           channel_name="random")
    assert body["response_type"] == "ephemeral" and "is not set up for gpubot" in body["text"]
    value = json.dumps({"v": 1, "a": "restart-device-plugin", "n": "gpu-node-1"})
    h.action("gpubot_action_1", value, message_ts="1700000000.000078", user=OTHER,
             channel="C0OTHER", channel_name="random")
    note = h.slack.wait_for("chat.postEphemeral")[0].params
    assert note["thread_ts"] == "1700000000.000078" and "is not set up" in note["text"]
    for _ in range(2):
        assert "rate" not in h.command("audit", user=REQUESTER)[1]["text"]
    _, body, _ = h.command("audit", user=REQUESTER)
    assert "2 commands in the last minute" in body["text"]
    h.action("gpubot_action_1", value, message_ts="1700000000.000079", user=REQUESTER)
    assert "2 commands in the last minute" in ephemerals(h, REQUESTER)[0]
    metrics = h.get("/metrics")[1]
    assert 'gpubot_commands_total{command="audit",outcome="rate_limited"} 1.0' in metrics
    assert 'outcome="refused"' not in metrics  # action requests never counted these
    time.sleep(0.3)
    assert not h.slack.calls("chat.postMessage")


def test_without_approvals_actions_are_not_run(tmp_path: Path) -> None:
    with BotHarness(SNAPSHOT) as h:
        status, body, _ = h.command("restart-plugin gpu-node-1")
        assert status == 200 and "Actions are off" in body["text"]


def test_findings_about_gpu_hardware_offer_no_actions() -> None:
    """A restart cannot fix a GPU that fell off the bus or an Xid that needs a reset: the
    findings offer no button (GPU_UNHEALTHY without a hardware Xid does: a restart
    re-checks device health)."""
    from handlers.chain.faults import hardware_faults
    from tests.scenarios import load_scenarios
    from tests.test_scenarios import run_scenario

    hardware = {"GPU_XID_ERRORS", "GPU_NOT_ADVERTISED", "GPU_HARDWARE_NOT_DETECTED",
                "GPU_UNHEALTHY"}
    seen = set()
    for s in load_scenarios():
        if not hardware & set(s.expect):
            continue
        for f in run_scenario(s).findings:
            if f.code == "GPU_UNHEALTHY" and not hardware_faults(list(f.evidence)):
                continue  # no hardware Xid in sight (e.g. no plugin log): a restart may help
            if f.code in hardware:
                seen.add(f.code)
                assert f.actions == (), (s.name, f.code)
    assert seen >= {"GPU_NOT_ADVERTISED", "GPU_HARDWARE_NOT_DETECTED", "GPU_UNHEALTHY"}


def test_gpus_unhealthy_after_a_software_xid_offer_a_restart(tmp_path: Path) -> None:
    import shutil

    from handlers import doctor
    from handlers.view import Reader

    snap = tmp_path / "snapshot"
    shutil.copytree(ROOT / "tests/scenarios/doctor_gpu_unhealthy/snapshot", snap)
    logs = snap / "logs.txt"
    logs.write_text(logs.read_text().replace("Xid=79", "Xid=62"))  # a GSP/PMU halt
    diag = doctor.run(Reader(load_snapshot(str(snap))), None)
    (f,) = [f for f in diag.findings if f.code == "GPU_UNHEALTHY"]
    assert f.actions == (("restart-device-plugin", "gpu-a100-1"),)


def test_gpubot_serve_on_a_live_cluster_wires_approvals(fk: FakeKube, tmp_path: Path) -> None:
    import argparse
    import io
    from urllib.parse import urlencode

    from bot.serve import add_arguments, serve
    from bot.slack.server import BotServer
    from tests.fake_slack import FakeSlack, signed_headers

    kubeconfig = fk.write_kubeconfig(tmp_path / "kubeconfig")
    with FakeSlack() as slack:
        env = {"SLACK_BOT_TOKEN": "xoxb-serve", "SLACK_SIGNING_SECRET": "serve-secret",
               "SLACK_API_URL": slack.api_url, "GPUBOT_PORT": "0", "GPUBOT_WATCH": "false",
               "GPUBOT_APPROVERS": APPROVER, "GPUBOT_STORE_PATH": str(tmp_path / "s.db"),
               "GPUBOT_VERIFY_TIMEOUT": "20"}
        p = argparse.ArgumentParser()
        add_arguments(p)
        args = p.parse_args(["--kubeconfig", str(kubeconfig), "--mode", "http"])
        started: list[BotServer] = []
        stop, ready = threading.Event(), threading.Event()
        t = threading.Thread(target=lambda: serve(
            args, env=env, err=io.StringIO(), stop=stop,
            ready=lambda s: (started.append(s), ready.set())))
        t.start()
        try:
            assert ready.wait(20)

            def post(body: str) -> None:
                import urllib.request

                req = urllib.request.Request(started[0].url + "/slack/events",
                                             data=body.encode(),
                                             headers=signed_headers("serve-secret", body))
                with urllib.request.urlopen(req, timeout=10) as r:
                    assert r.status == 200

            post(urlencode({"command": "/gpu", "text": "restart-plugin gpu-node-1",
                            "user_id": REQUESTER, "channel_id": "C1", "channel_name": "x",
                            "trigger_id": "t1", "response_url": slack.response_url("r1")}))
            card = slack.wait_for("chat.postMessage", 1, timeout=20)[0]
            rid = next(b for b in card.blocks if b.get("block_id") == "gpubot_approval")[
                "elements"][0]["value"]
            payload = {"type": "block_actions", "user": {"id": APPROVER},
                       "channel": {"id": "C1", "name": "x"}, "trigger_id": "t2",
                       "container": {"type": "message", "message_ts": card.response["ts"]},
                       "message": {"ts": card.response["ts"]}, "team": {"id": "T1"},
                       "actions": [{"action_id": APPROVE, "value": rid, "type": "button"}]}
            post(urlencode({"payload": json.dumps(payload)}))
            slack.wait_for("chat.postMessage", 1, timeout=20,
                           where=lambda c: "GPUs back on gpu-node-1" in c.params.get("text", ""))
            assert (tmp_path / "s.db").exists()
        finally:
            stop.set()
            t.join(30)


TOKENS = {"SLACK_BOT_TOKEN": "xoxb-t", "SLACK_APP_TOKEN": "xapp-t"}


def test_approver_settings() -> None:
    from bot.slack.config import ConfigError, load_settings

    env = {"GPUBOT_APPROVERS": "U012AB3CD, S0ONCALL1,", "GPUBOT_APPROVAL_TTL": "600"}
    settings = load_settings(None, env)
    assert settings.approvers == ("U012AB3CD", "S0ONCALL1") and settings.approval_ttl == 600
    assert settings.allow_self_approval is False and settings.verify_timeout == 180
    with pytest.raises(ConfigError, match="GPUBOT_APPROVERS"):
        load_settings(None, {**TOKENS, "GPUBOT_APPROVERS": "alice"}).validate()
    with pytest.raises(ConfigError, match="GPUBOT_STORE"):
        load_settings(None, {**TOKENS, "GPUBOT_STORE": "redis"}).validate()
    assert load_settings(None, {**TOKENS, **env}).validate().approvers


def test_old_decided_requests_are_pruned(tmp_path: Path) -> None:
    from bot.actions.requests import Requests, new_request
    from bot.actions.units import Step

    requests = Requests(SqliteStore(tmp_path / "s.db"))
    plan = Plan("cordon", "gpu-node-2", [Step("cordon", "gpu-node-2")])
    reqs = [new_request(plan, requester=REQUESTER, channel="C1", thread_ts=None,
                        source="command", ttl=900) for _ in range(3)]
    for r in reqs:
        requests.create(r)
    requests.update(reqs[0]["id"], {"state": "done"})
    week = time.time() + 8 * 86400
    assert requests.prune(time.time()) == 0
    assert requests.prune(week - 86400 * 7.5) == 0  # expired, but not for a week yet
    assert requests.prune(week) == 3  # decided, or expired unanswered, a week ago


def test_actions_are_off_without_approvers_or_a_live_cluster(fk: FakeKube,
                                                             tmp_path: Path) -> None:
    from bot.live import LiveView
    from bot.slack.approvals import open_approvals
    from bot.store import StoreError

    client = connect(fk, tmp_path)
    try:
        live = LiveView(client)
        on = Settings(approvers=(APPROVER,), store_path=str(tmp_path / "s.db"))
        assert open_approvals(on, load_snapshot(str(SNAPSHOT))) is None
        assert open_approvals(Settings(store_path=str(tmp_path / "s.db")), live) is None
        approvals = open_approvals(on, live)
        assert approvals is not None and approvals.cluster is not None
        approvals.close()
        (tmp_path / "file").write_text("")
        with pytest.raises(StoreError):
            open_approvals(Settings(approvers=(APPROVER,),
                                    store_path=str(tmp_path / "file" / "s.db")), live)
    finally:
        client.close()


def test_nothing_runs_when_the_decision_cannot_be_recorded(env: Env) -> None:
    h = env.bot(store="kubernetes")
    card, rid = ask(h)
    env.fk.faults.forbid("configmaps", verb="patch")
    click(h, card, rid, APPROVER)
    text = ephemerals(h, APPROVER)[0]
    assert "Cannot record the decision" in text and 'verbs: ["patch"]' in text
    assert deletes(env.fk) == []


def test_a_run_cut_short_by_a_restart_is_reported_failed(env: Env) -> None:
    from bot.actions.requests import Requests

    h = env.bot()
    card, rid = ask(h)
    h.stop()  # as if the bot died right after the approval was recorded
    moved = Requests(SqliteStore(env.tmp / "state.db")).move(
        rid, "pending", {"state": "running", "decided_by": APPROVER,
                         "decided_at": env.clock.now})
    assert moved is not None
    env.clock.now += 30  # still within what a run may take: left alone
    assert env.bot().bot.approvals.recover() == 0
    env.clock.now += 600
    again = env.bot()
    text = thread_text(again, card.response["ts"], "interrupted")
    assert "restart-plugin gpu-node-1" in text
    click(again, card, rid, APPROVER)
    assert "has run (failed)" in ephemerals(again, APPROVER)[0]
    assert deletes(env.fk) == []


def test_slack_redelivering_a_click_runs_it_once(env: Env) -> None:
    from urllib.parse import urlencode

    from tests.fake_slack.harness import SECRET
    from tests.fake_slack.signing import signed_headers

    h = env.bot()
    card, rid = ask(h)
    payload = h.action_payload(APPROVE, rid, message_ts=card.response["ts"], user=APPROVER,
                               trigger_id="77.2.trigger")
    body = urlencode({"payload": json.dumps(payload)})
    for n in range(4):  # the first delivery, then Slack's retries of it
        headers = signed_headers(SECRET, body)
        if n:
            headers["X-Slack-Retry-Num"] = str(n)
        assert h.post(body, headers)[0] == 200
    thread_text(h, card.response["ts"], "GPUs back on gpu-node-1")
    assert [r.dry_run for r in deletes(env.fk)] == [True, False]


def test_two_bot_processes_sharing_the_kubernetes_store_delete_once(
        fk: FakeKube, tmp_path: Path) -> None:
    """Two ``gpubot serve`` processes (replicas) on one cluster and one Slack app: 20 clicks
    spread over both, one DELETE."""
    import os
    import re
    import subprocess
    import sys
    import urllib.request
    from urllib.parse import urlencode

    from tests.fake_slack import FakeSlack, signed_headers

    kubeconfig = fk.write_kubeconfig(tmp_path / "kubeconfig")
    with FakeSlack() as slack:
        env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-replica", "PYTHONPATH": str(ROOT),
               "SLACK_SIGNING_SECRET": "replica-secret", "SLACK_API_URL": slack.api_url,
               "GPUBOT_PORT": "0", "GPUBOT_WATCH": "false", "GPUBOT_STORE": "kubernetes",
               "GPUBOT_STORE_NAMESPACE": "gpubot", "GPUBOT_APPROVERS": ",".join(
                   f"U0APPR{i:03d}" for i in range(20)), "GPUBOT_VERIFY_TIMEOUT": "20"}
        procs = [subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--kubeconfig", str(kubeconfig),
             "--mode", "http"], env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
        drains: list[threading.Thread] = []
        try:
            urls = []
            for p in procs:
                assert p.stderr is not None
                for line in p.stderr:
                    found = re.search(r"serving /healthz .* on (http://\S+)", line)
                    if found:
                        urls.append(found.group(1))
                        break
                # keep reading what it logs, so that a full pipe never blocks it
                drains.append(threading.Thread(target=p.stderr.read, daemon=True))
                drains[-1].start()

            assert len(urls) == 2, "a bot process did not start"

            def post(url: str, body: str) -> int:
                req = urllib.request.Request(url + "/slack/events", data=body.encode(),
                                             headers=signed_headers("replica-secret", body))
                with urllib.request.urlopen(req, timeout=10) as r:
                    return int(r.status)

            post(urls[0], urlencode({"command": "/gpu", "text": "restart-plugin gpu-node-1",
                                     "user_id": REQUESTER, "channel_id": "C1",
                                     "channel_name": "x", "trigger_id": "t0",
                                     "response_url": slack.response_url("r0")}))
            card = slack.wait_for("chat.postMessage", 1, timeout=30)[0]
            rid = next(b for b in card.blocks if b.get("block_id") == "gpubot_approval")[
                "elements"][0]["value"]
            barrier = threading.Barrier(20)

            def one(i: int) -> int:
                payload = {"type": "block_actions", "user": {"id": f"U0APPR{i:03d}"},
                           "channel": {"id": "C1", "name": "x"}, "trigger_id": f"t{i + 1}",
                           "container": {"type": "message", "message_ts": card.response["ts"]},
                           "message": {"ts": card.response["ts"]}, "team": {"id": "T1"},
                           "actions": [{"action_id": APPROVE, "value": rid, "type": "button"}]}
                body = urlencode({"payload": json.dumps(payload)})
                barrier.wait()
                return post(urls[i % 2], body)

            with ThreadPoolExecutor(20) as pool:
                assert list(pool.map(one, range(20))) == [200] * 20
            slack.wait_for("chat.postMessage", 1, timeout=30, where=lambda c: "GPUs back on "
                           "gpu-node-1" in c.params.get("text", ""))
            slack.wait_for("chat.postEphemeral", 19, timeout=30)
            assert [r.dry_run for r in deletes(fk)] == [True, False]
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            for t in drains:
                t.join(timeout=5)
            for p in procs:
                assert p.stderr is not None
                p.stderr.close()


def test_an_action_asked_by_mention_points_to_the_slash_command(env: Env) -> None:
    from tests.fake_slack.server import BOT_USER
    from tests.test_slack_mentions import mention

    h = env.bot()
    status, _ = mention(h, f"<@{BOT_USER}> restart-plugin gpu-node-1", user=REQUESTER)
    assert status == 200
    text = ephemerals(h, REQUESTER)[0]
    assert "slash command" in text and "/gpu restart-plugin gpu-node-1" in text
    time.sleep(0.3)
    assert deletes(env.fk) == [] and not h.slack.calls("chat.postMessage")


def test_help_lists_the_actions_when_they_are_on(env: Env) -> None:
    h = env.bot()
    _, body, _ = h.command("help", user=OTHER)
    validate(body["blocks"])
    text = json.dumps(body["blocks"])
    assert "/gpu restart-plugin NODE|--all" in text and "/gpu audit [N]" in text
    with BotHarness(SNAPSHOT) as off:
        _, body, _ = off.command("help", user=OTHER)
        assert "restart-plugin" not in json.dumps(body["blocks"])
