"""/gpu arguments (smart quotes and dashes from Slack clients), the router, channel access,
the per-user rate limit and delivery dedupe."""

from __future__ import annotations

import importlib

import pytest

from bot.slack.access import AccessPolicy, RateLimiter, Refusal
from bot.slack.commands import ROUTES, Command, CommandError, normalise, parse, parse_args
from bot.slack.dedupe import Dedupe


@pytest.mark.parametrize("typed, meant", [
    ("why-pending train-0 \u2014namespace ml-team", "why-pending train-0 --namespace ml-team"),
    ("why-pending train-0 \u2013n ml-team", "why-pending train-0 -n ml-team"),
    ("why-pending train-0 \u2014n=ml-team", "why-pending train-0 -n=ml-team"),
    ("pending \u2212A", "pending -A"),
    ("\u201cwhy-pending\u201d \u2018ml-team/train-0\u2019", "\"why-pending\" 'ml-team/train-0'"),
    ("why-pending\u00a0ml-team/train\u200b-0", "why-pending ml-team/train-0"),
    ("quota &lt;ns&gt; &amp;", "quota <ns> &"),
    ("doctor <http://gpu-node-7.example|gpu-node-7.example>", "doctor gpu-node-7.example"),
    ("doctor <http://gpu-node-7.example>", "doctor gpu-node-7.example"),
])
def test_normalise_undoes_what_chat_clients_do(typed: str, meant: str) -> None:
    assert normalise(typed) == meant


@pytest.mark.parametrize("text, expected", [
    ("why-pending ml-team/train-0", Command("why-pending", target="ml-team/train-0")),
    ("why-pending deployment/llm -n inference",
     Command("why-pending", target="deployment/llm", namespace="inference")),
    ("why-pending train-0 --namespace=ml-team",
     Command("why-pending", target="train-0", namespace="ml-team")),
    ("why-pending train-0 -nml-team",
     Command("why-pending", target="train-0", namespace="ml-team")),
    ("why ml-team/train-0", Command("why-pending", target="ml-team/train-0")),
    ("doctor", Command("doctor")),
    ("doctor gpu-node-7", Command("doctor", node="gpu-node-7")),
    ("nodes", Command("nodes")),
    ("pending", Command("pending")),
    ("pending -n ml-team", Command("pending", namespace="ml-team")),
    ("pending -A", Command("pending", all_namespaces=True)),
    ("quota", Command("quota")),
    ("quota ml-team", Command("quota", namespace="ml-team")),
    ("quota -n ml-team", Command("quota", namespace="ml-team")),
    ("", Command("help")),
    ("help", Command("help")),
    ("why-pending --help", Command("help", target="why-pending")),
])
def test_parse(text: str, expected: Command) -> None:
    assert parse(text) == expected
    if expected.name != "help":
        assert parse_args(expected.argv()) == expected  # the Re-check button round trip


@pytest.mark.parametrize("text, says, example", [
    ("whypendng x", "unknown command `whypendng`", "why-pending ml-team/train-0"),
    ("frobnicate", "unknown command `frobnicate`", "help"),
    ("why-pending", "name the pod or workload", "why-pending ml-team/train-0"),
    ("why-pending a b", "unexpected argument: b", "why-pending ml-team/train-0"),
    ("why-pending ml-team/x -n other", "names namespace", "why-pending ml-team/train-0"),
    ("why-pending 'unclosed", "no closing quotation", "why-pending ml-team/train-0"),
    ("pending -n a -A", "not both", "pending"),
    ("nodes --frob", "unexpected argument: --frob", "nodes"),
    ("quota a -n b", "two namespaces", "quota"),
])
def test_bad_arguments_say_what_was_wrong_with_an_example(text: str, says: str,
                                                         example: str) -> None:
    with pytest.raises(CommandError) as err:
        parse(text)
    assert says in str(err.value)
    assert err.value.example.startswith(example)


def test_user_text_in_errors_is_escaped() -> None:
    with pytest.raises(CommandError) as err:
        parse("<!channel>")
    assert "<!channel>" not in str(err.value) and "&lt;!channel&gt;" in str(err.value)


def test_every_route_has_usage_and_example() -> None:
    assert set(ROUTES) == {"why-pending", "doctor", "nodes", "pending", "quota", "sentinel",
                           "help"}
    for r in ROUTES.values():
        assert r.usage.startswith(r.name) and r.example and r.summary
        assert r.module is None or importlib.import_module(f"handlers.{r.module}")


# -- access ---------------------------------------------------------------------------------

MAP = {"C1": frozenset({"ml-team"}), "#research": frozenset({"research", "vision"}),
       "C9": frozenset({"*"})}


def test_no_map_allows_every_channel_every_namespace() -> None:
    p = AccessPolicy(None)
    assert p.resolve(parse("why-pending x/y"), "C0ANY") == parse("why-pending x/y")
    assert p.resolve(parse("pending"), "C0ANY") == parse("pending")


def test_channel_map_by_id_or_name() -> None:
    p = AccessPolicy(MAP)
    assert isinstance(p.resolve(parse("why-pending ml-team/x"), "C1"), Command)
    refused = p.resolve(parse("why-pending research/x"), "C1")
    assert isinstance(refused, Refusal) and refused.reason == "namespace"
    assert isinstance(p.resolve(parse("why-pending x -n vision"), "C2", "research"), Command)
    assert isinstance(p.resolve(parse("why-pending x"), "C1"), Refusal)  # "default"
    assert isinstance(p.resolve(parse("why-pending any/x"), "C9"), Command)
    unknown = p.resolve(parse("nodes"), "C7", "random")
    assert isinstance(unknown, Refusal) and unknown.reason == "channel"


def test_namespace_lists_default_to_the_only_allowed_namespace() -> None:
    p = AccessPolicy(MAP)
    assert p.resolve(parse("pending"), "C1") == Command("pending", namespace="ml-team")
    assert p.resolve(parse("quota"), "C1") == Command("quota", namespace="ml-team")
    refused = p.resolve(parse("pending"), "C2", "research")
    assert isinstance(refused, Refusal) and "`pending -n research`" in refused.message
    assert isinstance(p.resolve(parse("pending -A"), "C1"), Refusal)
    assert p.resolve(parse("pending -A"), "C9") == Command("pending", all_namespaces=True)


def test_cluster_commands_follow_the_setting() -> None:
    assert isinstance(AccessPolicy(MAP).resolve(parse("doctor"), "C1"), Command)
    strict = AccessPolicy(MAP, restrict_cluster_commands=True)
    assert isinstance(strict.resolve(parse("nodes"), "C1"), Refusal)
    assert isinstance(strict.resolve(parse("nodes"), "C9"), Command)
    assert isinstance(strict.resolve(parse("help"), "C7"), Command)


def test_rate_limiter_is_a_sliding_window_per_user() -> None:
    now = [0.0]
    r = RateLimiter(limit=3, window=60, clock=lambda: now[0])
    assert [r.check("u") for _ in range(3)] == [0, 0, 0]
    assert r.check("u") == pytest.approx(60)
    assert r.check("v") == 0
    now[0] = 30
    assert r.check("u") == pytest.approx(30)
    now[0] = 60.5
    assert r.check("u") == 0
    assert RateLimiter(limit=0).check("u") == 0


def test_dedupe_admits_a_key_once_within_its_ttl() -> None:
    now = [0.0]
    d = Dedupe(ttl=10, clock=lambda: now[0])
    assert d.first("t1") and not d.first("t1") and d.first("t2")
    now[0] = 11
    assert d.first("t1")
    small = Dedupe(ttl=100, max_keys=2)
    assert small.first("a") and small.first("b") and small.first("c")
    assert len(small) == 2
