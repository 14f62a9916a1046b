"""Each guard as Bolt middleware in front of a listener, in a real ``slack_bolt.App`` (its
client on the fake Slack) dispatching requests as bolt-python's own tests do: a refused
request is answered to the asker alone and never reaches the listener; an allowed one goes
on, amended where the guard says so. The bot's own paths through them are in
test_slack_http.py, test_slack_mentions.py and test_approvals.py."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_bolt import App, BoltContext, BoltRequest, BoltResponse
from slack_sdk import WebClient

from bot.slack.access import AccessPolicy, RateLimiter
from bot.slack.commands import Command
from bot.slack.dedupe import Dedupe
from bot.slack.guards import (
    ChannelAccess,
    CommandSize,
    DropRepeats,
    Guard,
    ParseCommand,
    RateLimit,
    Read,
)
from bot.slack.metrics import Metrics
from bot.slack.request import Asked, Request, asked, field
from tests.fake_slack import FakeSlack


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:  # answers the auth.test Bolt's authorization makes
        yield fake


def read_slash(req: BoltRequest) -> Asked:
    """As the bot reads /gpu: answers are the ack's ephemeral text."""
    ack = req.context.ack

    def answer(text: str, blocks: Sequence[dict[str, Any]] | None = None) -> object:
        return ack(text=text, blocks=blocks, response_type="ephemeral")

    body = req.body
    return Asked(Request(field(body, "user_id"), field(body, "channel_id"),
                         field(body, "channel_name"), None, 0.0),
                 answer, text=field(body, "text"))


class Guarded:
    """An App whose one ``/gpu`` listener sits behind ``guards``; what reached it."""

    def __init__(self, slack: FakeSlack, *guards: Guard, global_: Any = None) -> None:
        self.app = App(client=WebClient(token="xoxb-guards", base_url=slack.api_url),
                       signing_secret="guards", token_verification_enabled=False,
                       request_verification_enabled=False, process_before_response=True)
        if global_ is not None:
            self.app.middleware(global_)
        self.reached: list[Asked] = []
        self.app.command("/gpu", middleware=[Read(read_slash), *guards])(self.listener)

    def listener(self, ack: Any, context: BoltContext) -> None:
        self.reached.append(asked(context))
        ack(text="listener ran")

    def send(self, text: str, *, user: str = "U1", channel: str = "C1",
             trigger_id: str | None = None, headers: dict[str, str] | None = None
             ) -> BoltResponse:
        body = {"command": "/gpu", "text": text, "user_id": user, "channel_id": channel,
                "channel_name": "ml-team", "team_id": "T1"}
        if trigger_id:
            body["trigger_id"] = trigger_id
        return self.app.dispatch(BoltRequest(body=urlencode(body), headers=headers or {}))


def said(resp: BoltResponse) -> str:
    """What the asker was told: an ephemeral text, the listener's own ack, or ""."""
    try:
        body = json.loads(resp.body)
    except ValueError:
        return str(resp.body)  # the listener's plain ack, or an empty one
    return str(body["text"]) if body.get("response_type") == "ephemeral" else ""


def counted(metrics: Metrics, line: str) -> bool:
    return line in metrics.render().decode()


def test_drop_repeats_acks_a_redelivery_and_lets_a_new_one_on(slack: FakeSlack) -> None:
    metrics = Metrics()
    g = Guarded(slack, global_=DropRepeats(Dedupe(60), metrics))
    assert g.send("nodes", trigger_id="T.1").status == 200 and len(g.reached) == 1
    again = g.send("nodes", trigger_id="T.1")
    retried = g.send("nodes", trigger_id="T.2", headers={"X-Slack-Retry-Num": "1"})
    assert (again.status, again.body, retried.status, retried.body) == (200, "", 200, "")
    assert len(g.reached) == 1
    assert counted(metrics, 'gpubot_duplicate_deliveries_total{why="trigger_id"} 1.0')
    assert counted(metrics, 'gpubot_duplicate_deliveries_total{why="retry_header"} 1.0')


def test_rate_limit_refuses_privately_past_the_limit(slack: FakeSlack,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gpubot.slack")
    metrics = Metrics()
    g = Guarded(slack, RateLimit(RateLimiter(limit=1), metrics))
    assert said(g.send("nodes")) == "listener ran"
    refused = g.send("nodes")
    assert "1 commands in the last minute" in said(refused) and "try again in" in said(refused)
    assert said(g.send("nodes", user="U2")) == "listener ran"  # another user goes on
    assert len(g.reached) == 2
    assert counted(metrics, 'gpubot_commands_total{command="unknown",outcome="rate_limited"} 1.0')
    assert any(r.getMessage() == "rate limit: user U1, unknown refused for 60s"
               for r in caplog.records)


def test_command_size_refuses_privately_a_text_over_the_limit(slack: FakeSlack) -> None:
    metrics = Metrics()
    g = Guarded(slack, CommandSize(metrics, max_text=20))
    assert said(g.send("x" * 20)) == "listener ran"
    assert said(g.send("x" * 21)) == ("That command is 21 characters long; gpubot reads at "
                                      "most 20.")
    assert [a.text for a in g.reached] == ["x" * 20]
    assert counted(metrics, 'gpubot_commands_total{command="unknown",outcome="usage_error"} 1.0')


def test_parse_command_answers_usage_and_hands_on_the_command(slack: FakeSlack) -> None:
    metrics = Metrics()
    g = Guarded(slack, ParseCommand(metrics))
    usage = said(g.send("why-pendng ml-team/train-0"))
    assert "unknown command" in usage and "Try: `/gpu why-pending" in usage
    assert said(g.send("nodes")) == "listener ran"
    assert [(a.name, a.command) for a in g.reached] == [("nodes", Command("nodes"))]
    assert counted(metrics, 'gpubot_commands_total{command="unknown",outcome="usage_error"} 1.0')


@pytest.mark.parametrize("count_refusals", [True, False])
def test_channel_access_refuses_privately_and_settles_the_namespace(
        slack: FakeSlack, count_refusals: bool) -> None:
    metrics = Metrics()
    policy = AccessPolicy({"C1": frozenset({"ml-team"})})
    g = Guarded(slack, ParseCommand(metrics),
                ChannelAccess(policy, metrics, count_refusals=count_refusals))
    refused = said(g.send("why-pending research/train-0"))
    assert refused.startswith(":no_entry:") and "may only query `ml-team`" in refused
    assert "is not set up for gpubot" in said(g.send("nodes", channel="C2"))
    assert said(g.send("pending")) == "listener ran"
    assert [a.command for a in g.reached] == [Command("pending", namespace="ml-team")]
    line = 'gpubot_commands_total{command="why-pending",outcome="refused"} 1.0'
    assert counted(metrics, line) is count_refusals
