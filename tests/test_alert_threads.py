"""Alert threads shared by replicas: two bots on one store post one card per group."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bot.alerts.notifier import AlertNotifier
from bot.alerts.payload import parse
from bot.alerts.threads import AlertThreads, SlackPort
from bot.slack.blocks import Message, Rendered, Renderer
from bot.slack.commands import Command
from bot.store import Store, open_store
from bot.store.sqlite import SqliteStore
from handlers.finish import finish
from handlers.model import Diagnosis
from tests.alert_payloads import alert, webhook
from tests.fake_kube import FakeKube
from tests.fake_kube.fixtures import connect


class RecordingSlack:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.posts: list[tuple[str, str | None, str]] = []
        self.updates: list[tuple[str, str]] = []

    def post(self, channel: str, m: Message, thread_ts: str | None) -> str:
        time.sleep(0.2)  # a slow Slack widens the window in which replicas could race
        with self.lock:
            self.posts.append((channel, thread_ts, m.text))
            return f"1700000000.{len(self.posts):06d}"

    def update(self, channel: str, ts: str, m: Message) -> None:
        with self.lock:
            self.updates.append((ts, m.text))


def _replica(store: Store, slack: RecordingSlack) -> AlertNotifier:
    def diagnose(cmd: Command, channel: str) -> Diagnosis:
        return finish(Diagnosis(cmd.name, cmd.line()))

    def render(cmd: Command, diag: Diagnosis) -> Rendered:
        return Renderer().render(diag, argv=cmd.argv())

    threads = AlertThreads(store, SlackPort(slack.post, slack.update), Renderer(), diagnose,
                           render)
    return AlertNotifier(threads.handle, retry_delay=0.1)


@pytest.mark.parametrize("backend", ["sqlite", "kubernetes"])
def test_two_replicas_sharing_the_store_post_one_card(tmp_path: Path, backend: str) -> None:
    import json

    slack = RecordingSlack()
    if backend == "sqlite":
        stores: list[Store] = [SqliteStore(str(tmp_path / "state.db")) for _ in range(2)]
        clients: list[Any] = []
    else:
        fake = FakeKube(objects=[{"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "gpubot"}}]).start()
        clients = [connect(fake, tmp_path, f"kubeconfig-{i}") for i in range(2)]
        stores = [open_store("kubernetes", api_client=c, namespace="gpubot", timeout=5)
                  for c in clients]
    replicas = [_replica(s, slack) for s in stores]
    body = json.dumps(webhook([alert("GPUXidErrors", Hostname="n1", gpu="0")])).encode()
    for r in replicas:  # Alertmanager HA: each instance notifies, each replica receives one
        assert r.submit(parse(body), "C1")
    for r in replicas:
        assert r.idle(20)
        r.close()
    cards = [p for p in slack.posts if p[1] is None]
    assert len(cards) == 1, slack.posts
    assert any(p[1] is not None for p in slack.posts)  # the diagnosis, in its thread
    for s in stores:
        s.close()
    for c in clients:
        c.close()
    if backend == "kubernetes":
        fake.stop()


def test_a_diagnosis_lost_to_a_slack_failure_is_posted_on_the_retry(tmp_path: Path) -> None:
    import json

    slack = RecordingSlack()
    failures = [1]
    post = slack.post

    def flaky(channel: str, m: Message, thread_ts: str | None) -> str:
        if thread_ts is not None and failures:
            failures.pop()
            raise RuntimeError("Slack is down")
        return post(channel, m, thread_ts)

    store = SqliteStore(str(tmp_path / "state.db"))
    threads = AlertThreads(store, SlackPort(flaky, slack.update), Renderer(),
                           lambda cmd, channel: finish(Diagnosis(cmd.name, cmd.line())),
                           lambda cmd, diag: Renderer().render(diag, argv=cmd.argv()))
    notifier = AlertNotifier(threads.handle, retry_delay=0.05)
    body = json.dumps(webhook([alert("GPUXidErrors", Hostname="n1", gpu="0")])).encode()
    assert notifier.submit(parse(body), "C1")
    assert notifier.idle(20)
    notifier.close()
    assert len([p for p in slack.posts if p[1] is None]) == 1  # one card
    assert [p for p in slack.posts if p[1] is not None]  # and, on the retry, its diagnosis
    store.close()


def test_the_same_group_key_from_two_clusters_stays_two_groups_while_queued(
        tmp_path: Path) -> None:
    import json

    slack = RecordingSlack()
    store = SqliteStore(str(tmp_path / "state.db"))
    release = threading.Event()

    def diagnose(cmd: Command, channel: str) -> Diagnosis:
        return finish(Diagnosis(cmd.name, cmd.line()))

    threads = AlertThreads(store, SlackPort(slack.post, slack.update), Renderer(), diagnose,
                           lambda cmd, diag: Renderer().render(diag, argv=cmd.argv()),
                           cluster_label="cluster")

    def handle(group: Any, channel: str) -> None:
        release.wait(10)  # both webhooks arrive while the workers are busy
        threads.handle(group, channel)

    notifier = AlertNotifier(handle, workers=1, retry_delay=0.05, key_of=threads.key_of)
    blocker = parse(json.dumps(webhook([alert("GPUXidErrors", Hostname="n0")], key="other"))
                    .encode())
    assert notifier.submit(blocker, "C0OTHER")  # takes the one worker
    for cluster, channel in (("train", "C0TRAIN"), ("lab", "C0LAB")):
        body = webhook([alert("GPUPodPendingTooLong", namespace="ml-team", pod="train-0",
                              cluster=cluster)], key="same")
        assert notifier.submit(parse(json.dumps(body).encode()), channel)
    release.set()
    assert notifier.idle(20)
    notifier.close()
    cards = {(channel, text.split(":")[0]) for channel, ts, text in slack.posts if ts is None}
    assert ("C0TRAIN", "FIRING GPUPodPendingTooLong · cluster train") in cards
    assert ("C0LAB", "FIRING GPUPodPendingTooLong · cluster lab") in cards
    store.close()
