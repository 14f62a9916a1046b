"""The incident threads (bot/sentinel/threads.py) over the sentinel's core: one card per
incident, edited in place; thread replies only when members or the state changed; the
diagnosis in the thread with its action buttons, under the channel's namespace map; routes;
a card never posted twice, whatever fails after it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.alerts.routing import RouteError, parse_routes
from bot.sentinel.incidents import IncidentBook
from bot.sentinel.service import Sentinel
from bot.sentinel.threads import ROUTE_KEYS, IncidentThreads
from bot.sentinel.watcher import Watcher
from bot.slack.blocks import Message, Rendered, Renderer, validate
from bot.slack.commands import Command
from bot.slack.threads import NotAllowed, SlackPort
from bot.store import open_store
from bot.store.base import Store
from handlers.finish import finish
from handlers.model import Diagnosis, Finding, ObjectRef
from tests.test_sentinel import T0, Clock, Objects, gpu_node, pending_pod


class Slack:
    """Records what was posted; ``down`` fails every call, ``threads_down`` thread posts."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, str | None, Message]] = []
        self.updates: list[tuple[str, str, Message]] = []
        self.down = False
        self.threads_down = False

    def post(self, channel: str, m: Message, thread_ts: str | None) -> str:
        if self.down or (self.threads_down and thread_ts is not None):
            raise ConnectionError("slack is down")
        validate(m.blocks)
        self.posts.append((channel, thread_ts, m))
        return f"1700000000.{len(self.posts):06d}"

    def update(self, channel: str, ts: str, m: Message) -> None:
        if self.down:
            raise ConnectionError("slack is down")
        validate(m.blocks)
        self.updates.append((channel, ts, m))

    def cards(self) -> list[tuple[str, Message]]:
        return [(c, m) for c, t, m in self.posts if t is None]

    def thread(self, ts: str) -> list[Message]:
        return [m for _, t, m in self.posts if t == ts]


def text(m: Message) -> str:
    return json.dumps(m.blocks, ensure_ascii=False)


class Channels:
    """A channel's diagnoses: each target's node has a GPU_UNHEALTHY with its restart."""

    def __init__(self, allowed: Mapping[str, frozenset[str]] | None = None) -> None:
        self.map = dict(allowed or {})
        self.ran: list[str] = []

    def allowed(self, channel: str, cluster: str | None = None) -> frozenset[str] | None:
        return self.map.get(channel)

    def diagnose(self, cmd: Command, channel: str) -> Diagnosis:
        ns = (cmd.target or "").split("/")[0] if cmd.name == "why-pending" else None
        seen = self.allowed(channel)
        if ns and seen is not None and ns not in seen:
            raise NotAllowed(f"this channel may not query {ns}")
        self.ran.append(cmd.line())
        node = cmd.node or "n"
        d = Diagnosis(cmd.name, node)
        d.add(Finding("GPU_UNHEALTHY", f"GPUs on {node} unhealthy", (ObjectRef("Node", node),),
                      ("allocatable nvidia.com/gpu: 0 < capacity 8",),
                      actions=(("restart-device-plugin", node),)))
        return finish(d)

    def render(self, cmd: Command, diag: Diagnosis) -> Rendered:
        return Renderer().render(diag, argv=cmd.argv())


LIMITS = {"lost_after": 60.0, "plugin_down_after": 60.0, "pending_after": 60.0}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store("sqlite", path=str(tmp_path / "state.db"))


def make(view: Objects, store: Store, slack: Slack, clock: Clock, *,
         channels: Channels | None = None, channel: str | None = "C0INC",
         routes: str | None = None, note_gap: float = 0.0) -> tuple[Sentinel, IncidentThreads]:
    book = IncidentBook(store, quiet_for=300.0)
    pub = IncidentThreads(book, SlackPort(slack.post, slack.update), Renderer(),
                          channels or Channels(), channel=channel,
                          routes=parse_routes(routes, "GPUBOT_SENTINEL_ROUTES", ROUTE_KEYS),
                          thresholds=LIMITS, note_gap=note_gap)
    w = Watcher(view, clock=clock)  # type: ignore[arg-type]  # get/list are all it reads
    return Sentinel(w, book, pub, LIMITS, clock=clock), pub


def lose(view: Objects, s: Sentinel, name: str, alloc: int = 0, pool: str = "a100") -> None:
    view.put(gpu_node(name, alloc=alloc, pool=pool))
    s.changed("Node", "", name)


def test_one_card_edited_in_place_replies_only_when_members_or_state_change(
        store: Store) -> None:
    view, clock, slack = Objects(), Clock(T0), Slack()
    view.put(gpu_node("a-0"))
    view.put(gpu_node("a-1"))
    s, _ = make(view, store, slack, clock)
    s.tick()
    lose(view, s, "a-0")
    s.tick()
    clock.t += 60
    assert s.tick().published == 1
    [(channel, card)] = slack.cards()
    ts = "1700000000.000001"
    assert channel == "C0INC" and "GPU capacity lost · pool a100" in text(card)
    assert "8 GPUs lost on 1 node" in text(card) and "a-0: 0 of 8 GPUs allocatable" in text(card)
    # The diagnosis in its thread: doctor of the node, with the finding's restart button.
    diag = " ".join(text(m) for m in slack.thread(ts))
    assert "doctor a-0" in diag and "GPU_UNHEALTHY" in diag
    buttons = [json.loads(e["value"]) for m in slack.thread(ts) for b in m.blocks
               if b.get("type") == "actions" for e in b["elements"]
               if e["action_id"].startswith("gpubot_action_")]
    assert {(v["a"], v["n"]) for v in buttons} == {("restart-device-plugin", "a-0")}
    posts = len(slack.posts)
    # Fewer GPUs lost on the same node: the card changes, the thread does not.
    clock.t += 30
    lose(view, s, "a-0", alloc=4)
    s.tick()
    assert len(slack.posts) == posts and len(slack.updates) == 1
    assert "4 GPUs lost on 1 node" in text(slack.updates[-1][2])
    # A second node joins: one reply naming it, and its diagnosis.
    lose(view, s, "a-1")
    s.tick()
    notes = [m for m in slack.thread(ts)[posts - 1:] if m.part == "note"]
    assert len(notes) == 1 and "1 joined: a-1" in text(notes[0])
    assert "12 GPUs lost on 2 nodes" in text(slack.updates[-1][2])
    assert any("doctor a-1" in text(m) for m in slack.thread(ts))
    # Back: the card says Resolved, how long and what it cost, and the thread says so once.
    clock.t += 3600
    lose(view, s, "a-0", alloc=8)
    lose(view, s, "a-1", alloc=8)
    s.tick()
    done = text(slack.updates[-1][2])
    assert slack.updates[-1][1] == ts and "Resolved · GPU capacity lost · pool a100" in done
    # From when a-0 lost its GPUs (60 s before the card opened): 8 GPUs x 60 s more.
    assert "*Resolved* after 1h1m" in done and "12.2 GPU-hours lost" in done
    assert "resolved after 1h1m" in text(slack.thread(ts)[-1])
    assert len(slack.cards()) == 1
    assert s.tick().published == 0  # nothing behind


def test_a_reopened_incident_updates_the_same_card(store: Store) -> None:
    view, clock, slack = Objects(), Clock(T0), Slack()
    view.put(gpu_node("a-0", alloc=0))
    s, _ = make(view, store, slack, clock)
    s.tick()
    clock.t += 60
    s.tick()
    lose(view, s, "a-0", alloc=8)
    clock.t += 10
    s.tick()
    lose(view, s, "a-0")
    s.tick()
    clock.t += 60  # lost_after again: re-opened within quiet_for
    s.tick()
    assert len(slack.cards()) == 1
    ts = "1700000000.000001"
    assert all(u[1] == ts for u in slack.updates)
    assert "re-opened 1×" in text(slack.updates[-1][2])
    assert "back: re-opened (1 time)" in " ".join(text(m) for m in slack.thread(ts))


def test_membership_churn_within_the_note_gap_edits_the_card_only(store: Store) -> None:
    view, clock, slack = Objects(), Clock(T0), Slack()
    for i in range(3):
        view.put(gpu_node(f"a-{i}"))
    view.put(gpu_node("a-9", alloc=0))
    s, _ = make(view, store, slack, clock, note_gap=600.0)
    s.tick()
    clock.t += 60
    s.tick()
    for i in range(3):
        clock.t += 20
        lose(view, s, f"a-{i}")
        s.tick()
    assert [m.part for m in slack.thread("1700000000.000001")].count("note") == 0
    assert "32 GPUs lost on 4 nodes" in text(slack.updates[-1][2])
    clock.t += 600
    lose(view, s, "a-0", alloc=8)
    s.tick()
    [note] = [m for m in slack.thread("1700000000.000001") if m.part == "note"]
    assert "2 joined: a-1, a-2" in text(note)  # a-0 joined and left since the last note


def test_fifty_members_are_capped_on_the_card(store: Store) -> None:
    view, clock, slack = Objects(), Clock(T0), Slack()
    for i in range(50):
        view.put(gpu_node(f"a-{i:02d}", alloc=0))
    s, _ = make(view, store, slack, clock)
    s.tick()
    clock.t += 60
    s.tick()
    [(_, card)] = slack.cards()
    body = text(card)
    assert "400 GPUs lost on 50 nodes" in body and "*50 nodes*" in body
    assert body.count("GPUs allocatable") == 10 and "... and 40 more nodes" in body
    assert len(card.blocks) < 50


def test_routes_first_match_wins_else_the_channel(store: Store) -> None:
    view, clock, slack = Objects(), Clock(T0), Slack()
    view.put(gpu_node("a-0", alloc=0))
    view.put(gpu_node("h-0", alloc=0, pool="h100"))
    view.put(pending_pod("train-0"))
    s, _ = make(view, store, slack, clock, routes=(
        "namespace=ml=C0ML;pool=h100=C0H100;detector=gpu-pending=C0QUEUE"))
    s.tick()
    clock.t += 60
    s.tick()
    got = sorted((c, m.text.split(":")[0]) for c, m in slack.cards())
    assert got == [("C0H100", "GPU capacity lost · pool h100"),
                   ("C0INC", "GPU capacity lost · pool a100"),  # no route: the channel
                   ("C0ML", "GPU work pending · ml/Job train")]  # not C0QUEUE: first wins


def test_a_route_on_an_unknown_key_is_refused() -> None:
    with pytest.raises(RouteError, match=r"GPUBOT_SENTINEL_ROUTES: .*'severity' is not one of"):
        parse_routes("severity=critical=C1", "GPUBOT_SENTINEL_ROUTES", ROUTE_KEYS)


def test_no_channel_posts_nothing_and_owes_nothing(store: Store) -> None:
    view, clock, slack = Objects(), Clock(T0), Slack()
    view.put(gpu_node("a-0", alloc=0))
    s, _ = make(view, store, slack, clock, channel=None, routes="pool=h100=C0H100")
    s.tick()
    clock.t += 60
    assert s.tick().published == 1 and slack.posts == []
    assert s.tick().published == 0


def test_the_channel_map_holds_for_the_card_and_the_diagnosis(store: Store) -> None:
    view, clock, slack = Objects(), Clock(T0), Slack()
    view.put(pending_pod("train-0"))
    s, _ = make(view, store, slack, clock, channels=Channels({"C0INC": frozenset({"web"})}))
    s.tick()
    [(_, card)] = slack.cards()
    body = text(card)
    assert "train-0" not in body and "1 more in namespaces this channel may not query" in body
    [refused] = slack.thread("1700000000.000001")
    assert "not diagnosed here: this channel may not query ml" in text(refused)


def test_a_failure_after_the_card_never_posts_it_twice(store: Store) -> None:
    view, clock, slack = Objects(), Clock(T0), Slack()
    view.put(gpu_node("a-0", alloc=0))
    channels = Channels()
    s, _ = make(view, store, slack, clock, channels=channels)
    s.tick()
    slack.threads_down = True
    clock.t += 60
    r = s.tick()
    assert r.failed == 1 and len(slack.cards()) == 1
    [inc] = s.book.all()
    assert inc.posted["ts"] == "1700000000.000001" and inc.posted.get("rev") != inc.rev
    slack.threads_down = False
    assert s.tick().published == 1
    assert len(slack.cards()) == 1 and slack.thread("1700000000.000001")
    assert channels.ran == ["doctor a-0", "doctor a-0"]  # the second run is the one posted


def test_a_slack_outage_posts_the_card_as_it_is_when_slack_is_back(store: Store) -> None:
    view, clock, slack = Objects(), Clock(T0), Slack()
    view.put(gpu_node("a-0", alloc=0))
    s, _ = make(view, store, slack, clock)
    s.tick()
    slack.down = True
    clock.t += 60
    assert s.tick().failed == 1
    lose(view, s, "a-1")
    clock.t += 30
    assert s.tick().failed == 1
    slack.down = False
    assert s.tick().published == 1
    [(_, card)] = slack.cards()
    assert "16 GPUs lost on 2 nodes" in text(card)
    thread = " ".join(text(m) for m in slack.thread("1700000000.000001"))
    assert "doctor a-0" in thread and "doctor a-1" in thread


def test_another_replicas_fresh_claim_is_left_to_it(store: Store) -> None:
    view, clock, slack = Objects(), Clock(T0), Slack()
    view.put(gpu_node("a-0", alloc=0))
    s, pub = make(view, store, slack, clock)
    s.tick()
    clock.t += 60
    due = s.watcher.due(clock.t, LIMITS, s.book.open_groups())
    [inc] = s.book.sync(due, clock.t)
    assert s.book.mark_posted(inc, {"channel": "C0INC", "owner": "other", "claimed": clock.t})
    [inc] = s.book.all()
    assert pub.publish(inc, clock.t + 10) is None and slack.posts == []
    posted: Any = pub.publish(inc, clock.t + 121)  # a stale claim is taken over
    assert posted["ts"] == "1700000000.000001"
