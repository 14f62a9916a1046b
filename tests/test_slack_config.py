"""Settings: every one from the environment, an optional YAML file, flags on top; secrets
only from the environment and never in repr."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.slack.config import (
    ENV,
    SECRET_ENV,
    ConfigError,
    Settings,
    load_settings,
    parse_channel_map,
    unknown_env,
)

ENV_OK = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}


def test_defaults_run_socket_mode_without_a_config_file() -> None:
    s = load_settings(None, ENV_OK).validate()
    assert (s.mode, s.host, s.port, s.rate_limit, s.command) == (
        "socket", "127.0.0.1", 8080, 10, "/gpu")
    assert s.channel_namespaces is None


def test_every_setting_has_an_environment_variable() -> None:
    fields = set(Settings.__dataclass_fields__) - set(SECRET_ENV)
    assert fields == set(ENV)
    env = {**ENV_OK, "GPUBOT_SLACK_MODE": "http", "SLACK_SIGNING_SECRET": "s3",
           "GPUBOT_PORT": "3000", "GPUBOT_DEADLINE": "12.5", "GPUBOT_WATCH": "false",
           "SLACK_API_URL": "http://127.0.0.1:9000/api/", "GPUBOT_RATE_LIMIT": "3",
           "GPUBOT_CHANNEL_NAMESPACES": "C1=ml-team,research; #ops=*"}
    s = load_settings(None, env).validate()
    assert (s.mode, s.port, s.deadline, s.watch, s.rate_limit) == ("http", 3000, 12.5, False, 3)
    assert s.api_url == "http://127.0.0.1:9000/api/"
    assert s.channel_namespaces == {"C1": {"ml-team", "research"}, "#ops": {"*"}}


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    f = tmp_path / "gpubot.yaml"
    f.write_text("port: 1111\nrate-limit: 5\ndeadline: 30\n"
                 "channel_namespaces:\n  C1: [ml-team]\n  '#ops': '*'\n")
    s = load_settings(f, {**ENV_OK, "GPUBOT_PORT": "2222"}, {"port": 3333, "host": None})
    assert (s.port, s.rate_limit, s.deadline) == (3333, 5, 30.0)
    assert s.channel_namespaces == {"C1": {"ml-team"}, "#ops": {"*"}}
    assert load_settings(None, {**ENV_OK, "GPUBOT_CONFIG": str(f)}).port == 1111


@pytest.mark.parametrize("content, says", [
    ("bot_token: xoxb-leak\n", "set SLACK_BOT_TOKEN in the environment"),
    ("prot: 1\n", "unknown setting 'prot'"),
    ("port: many\n", "port must be a int"),
    ("- a\n", "expected a mapping"),
    ("channel_namespaces: {C1: 3}\n", "needs a list of namespaces"),
])
def test_bad_config_files_are_refused_clearly(tmp_path: Path, content: str, says: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(content)
    with pytest.raises(ConfigError) as err:
        load_settings(f, ENV_OK)
    assert says in str(err.value)
    assert "xoxb-leak" not in str(err.value)


@pytest.mark.parametrize("env, says", [
    ({}, "SLACK_BOT_TOKEN"),
    ({"SLACK_BOT_TOKEN": "xoxb-1"}, "SLACK_APP_TOKEN"),
    ({"SLACK_BOT_TOKEN": "xoxb-1", "GPUBOT_SLACK_MODE": "http"}, "SLACK_SIGNING_SECRET"),
    ({**ENV_OK, "GPUBOT_SLACK_MODE": "websocket"}, "socket or http"),
    ({**ENV_OK, "GPUBOT_WORKERS": "0"}, "workers must be at least 1"),
    ({**ENV_OK, "GPUBOT_SNAPSHOT": "x", "GPUBOT_CONTEXT": "prod"}, "not both"),
    ({**ENV_OK, "GPUBOT_CHANNEL_NAMESPACES": "C1"}, "not CHANNEL=NS"),
])
def test_missing_or_bad_settings_name_their_variable(env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(None, env).validate()
    assert says in str(err.value)


def test_secrets_never_show_in_repr() -> None:
    s = load_settings(None, {**ENV_OK, "SLACK_SIGNING_SECRET": "sig-secret"})
    text = repr(s)
    assert "xoxb-1" not in text and "xapp-1" not in text and "sig-secret" not in text
    assert s.secrets() == ["xoxb-1", "xapp-1", "sig-secret"]


def test_empty_channel_map_means_no_restriction() -> None:
    assert parse_channel_map("", "x") is None
    assert parse_channel_map({}, "x") is None


@pytest.mark.parametrize("content, meant", [
    ("prometheus_ur: http://p:9090\n", "prometheus_url"),
    ("sentinel-chanel: C1\n", "sentinel_channel"),
    ("kube_timout: 5\n", "kube_timeout"),
])
def test_a_mistyped_setting_names_the_closest_not_every_one(tmp_path: Path, content: str,
                                                             meant: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(content)
    with pytest.raises(ConfigError) as err:
        load_settings(f, ENV_OK)
    named = str(err.value).split("did you mean ", 1)[1].rstrip("?").split(" or ")
    assert named[0] == meant and len(named) <= 2 and set(named) <= set(ENV)


def test_a_setting_like_no_other_points_at_the_list(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("zzzz: 1\n")
    with pytest.raises(ConfigError) as err:
        load_settings(f, ENV_OK)
    assert "did you mean" not in str(err.value)
    assert "docs/configuration.md" in str(err.value)
    assert not [key for key in ENV if f" {key}" in str(err.value)]


def test_unknown_gpubot_variables_are_reported_with_the_closest_one() -> None:
    env = {**ENV_OK, "GPUBOT_SLACK_MOD": "http", "GPUBOT_PORT": "1", "GPUBOT_CONFIG": "c.yaml",
           "GPUBOT_TEMPLATES": "t", "OTHER_THING": "x", "GPUBOT_ZZZZ": "1"}
    warnings = unknown_env(env)
    assert [w.split()[0] for w in warnings] == ["GPUBOT_SLACK_MOD", "GPUBOT_ZZZZ"]
    assert warnings[0].endswith("did you mean GPUBOT_SLACK_MODE?")
    assert "did you mean" not in warnings[1]
