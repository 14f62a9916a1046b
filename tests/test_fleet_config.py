"""Several clusters in the settings, ``-c NAME`` on ``/gpu``, and access rules per cluster
(issue 26 items 1 and 2), without a server."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bot.fleet.config import ClusterConfig
from bot.slack.access import AccessPolicy, Refusal
from bot.slack.commands import Command, CommandError, parse, parse_args
from bot.slack.config import ConfigError, Settings, load_settings

TOKENS = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}


def settings_from(tmp_path: Path, text: str, **env: str) -> Settings:
    path = tmp_path / "gpubot.yaml"
    path.write_text(text)
    return load_settings(path, {**TOKENS, **env}).validate()


def test_clusters_from_the_config_file(tmp_path: Path) -> None:
    s = settings_from(tmp_path, """
clusters:
  - {name: prod, context: prod-admin, prometheus_url: "http://prom.prod:9090"}
  - {name: local, in_cluster: true, store_namespace: gpubot}
channel_clusters: {C1: prod}
channel_namespaces: {C1: ["prod:ml-team", "shared"]}
""")
    assert s.clusters == (
        ClusterConfig("prod", context="prod-admin", prometheus_url="http://prom.prod:9090"),
        ClusterConfig("local", in_cluster=True, store_namespace="gpubot"))
    assert s.channel_clusters == {"C1": "prod"}
    assert s.alert_cluster_label == "cluster"


def test_clusters_from_the_environment() -> None:
    s = load_settings(None, {**TOKENS, "GPUBOT_CLUSTERS": "[{name: a, context: ca}, "
                             "{name: b, context: cb}]",
                             "GPUBOT_CHANNEL_CLUSTERS": "#ops=b"}).validate()
    assert [c.name for c in s.clusters or ()] == ["a", "b"]
    assert s.channel_clusters == {"#ops": "b"}


@pytest.mark.parametrize(("text", "says"), [
    ("clusters: [{name: a, context: x}, {name: a, context: y}]", "named twice"),
    ("clusters: [{name: Prod!, context: x}]", "lowercase"),
    ("clusters: [{name: a}]", "give one of"),
    ("clusters: [{name: a, context: x, in_cluster: true}]", "give one of"),
    ("clusters: [{name: a, context: x, region: eu}]", "unknown key 'region'"),
    ("clusters: {name: a}", "must be a list"),
    ("clusters: [{name: a, context: x}]\nchannel_clusters: {C1: b}", "not in clusters"),
    ("clusters: [{name: a, context: x}]\nchannel_namespaces: {C1: ['b:ml']}",
     "names cluster 'b'"),
    ("channel_clusters: {C1: b}", "needs a clusters list"),
    ("clusters: [{name: a, context: x}]\ncontext: y", "not both"),
])
def test_bad_cluster_settings_are_refused(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        settings_from(tmp_path, text)


def test_dash_c_anywhere_on_the_line() -> None:
    assert parse("-c prod why-pending ml-team/train-0") == Command(
        "why-pending", target="ml-team/train-0", cluster="prod")
    assert parse("why-pending ml-team/train-0 --cluster=prod").cluster == "prod"
    cmd = parse("nodes --cluster prod")
    assert cmd.argv() == ["nodes", "-c", "prod"] and parse_args(cmd.argv()) == cmd
    assert parse("pending --all-clusters").all_clusters
    # A command without -c reads as it always has: the Re-check button's value unchanged.
    assert parse("why-pending ml-team/train-0").argv() == ["why-pending", "ml-team/train-0"]


@pytest.mark.parametrize(("text", "says"), [
    ("nodes -c", "needs a cluster name"),
    ("nodes -c 'a b'", "not a cluster name"),
    ("nodes -c a -c b", "two clusters"),
    ("doctor --all-clusters", "--all-clusters is for"),
    ("nodes -c a --all-clusters", "not both"),
])
def test_bad_cluster_flags(text: str, says: str) -> None:
    with pytest.raises(CommandError, match=says):
        parse(text)


def test_access_per_cluster_and_namespace() -> None:
    policy = AccessPolicy({"C1": frozenset({"prod:ml-team", "shared"}),
                           "C2": frozenset({"lab:*"})}, clusters=("prod", "lab"))
    assert policy.allowed("C1", cluster="prod") == {"ml-team", "shared"}
    assert policy.allowed("C1", cluster="lab") == {"shared"}
    assert policy.allowed("C1") == {"ml-team", "shared"}  # any cluster: the search's
    assert policy.allowed("C2", cluster="lab") is None
    assert policy.allowed("C2", cluster="prod") == frozenset()
    assert policy.clusters_for("C1", "", "ml-team") == ["prod"]
    assert policy.clusters_for("C1", "", "shared") == ["prod", "lab"]
    assert policy.clusters_for("C2", "", "ml-team") == ["lab"]
    ok = policy.resolve(parse("-c prod why-pending ml-team/x"), "C1")
    assert isinstance(ok, Command)
    no = policy.resolve(parse("-c lab why-pending ml-team/x"), "C1")
    assert isinstance(no, Refusal) and no.reason == "namespace"
    no = policy.resolve(parse("-c prod nodes"), "C2")
    assert isinstance(no, Refusal) and no.reason == "cluster"


def test_one_cluster_reads_qualified_entries_under_its_name() -> None:
    policy = AccessPolicy({"C1": frozenset({"default:ml-team", "other:x"})},
                          clusters=("default",))
    assert policy.allowed("C1") == {"ml-team"}
    # No fleet at all: a qualified entry names no cluster gpubot reads.
    assert AccessPolicy({"C1": frozenset({"other:x", "y"})}).allowed("C1") == {"y"}


def test_single_cluster_settings_unchanged() -> None:
    s = load_settings(None, {**TOKENS, "GPUBOT_CONTEXT": "prod"}).validate()
    assert s.clusters is None and s.channel_clusters is None
    assert replace(s, clusters=None) == s
