"""Runbooks: without a URL the CLI prints the installed page's path and Slack names the page
as text; with runbook_base_url findings link to <base><page>; a per-code override wins;
-o json carries the resolved link; settings come from the environment, a config file and
the CLI's flag, and a misspelt code is refused."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from bot.cli import EXIT_OK, EXIT_USAGE, main
from bot.runbook import PAGES, Runbooks
from bot.slack.blocks import Renderer
from bot.slack.config import ConfigError, load_settings
from handlers.model import Diagnosis, ObjectRef, Severity
from tests.findings import finding_at

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plugin-crashloop-cuda-mismatch"
TARGET = ["why-pending", "ml-team/train-0", "--snapshot", str(EXAMPLE)]
BASE = "https://docs.example.com/gpubot/runbook/"
WIKI = "https://wiki.example.com/gpu/plugin?team=ml&v=2"  # '=' in a query stays the URL's
TOKENS = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}


def run(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, environ=env or {})
    return code, out.getvalue(), err.getvalue()


def _runbooks_of(text: str) -> dict[str, str]:
    """CLI text: each problem finding's code -> its ``runbook:`` line."""
    out, code = {}, None
    for line in text.splitlines():
        if m := re.match(r"^\S.*?\b([A-Z][A-Z0-9_]{3,})\b", line):
            code = m.group(1) if m.group(1) in _codes() else code
        if (m := re.match(r"^\s+runbook:\s+(\S+)$", line)) and code:
            out[code] = m.group(1)
    return out


def _codes() -> set[str]:
    from handlers.codes import CODES

    return set(CODES)


def test_cli_without_a_url_prints_the_installed_page_that_exists() -> None:
    code, out, _ = run(*TARGET)
    assert code == EXIT_OK
    pages = _runbooks_of(out)
    assert "DEVICE_PLUGIN_CRASHLOOP" in pages
    for finding, path in pages.items():
        page = Path(path)
        assert page.is_absolute() and page.is_file(), path
        assert page.parent == PAGES
        assert page.read_text().startswith(f"# {finding}: ")


def test_json_carries_the_resolved_link_base_then_override() -> None:
    code, out, _ = run(*TARGET, "-o", "json")
    assert code == EXIT_OK
    local = {f["code"]: f["runbook"] for f in json.loads(out)["findings"]}
    assert Path(local["DEVICE_PLUGIN_CRASHLOOP"]).is_file()

    env = {"GPUBOT_RUNBOOK_BASE_URL": BASE.rstrip("/"),  # the missing '/' is added
           "GPUBOT_RUNBOOK_OVERRIDES": f"DEVICE_PLUGIN_CRASHLOOP={WIKI}"}
    code, out, _ = run(*TARGET, "-o", "json", env=env)
    assert code == EXIT_OK
    linked = {f["code"]: f["runbook"] for f in json.loads(out)["findings"]}
    assert linked.keys() == local.keys() and len(linked) > 1
    for c, url in linked.items():
        assert url == (WIKI if c == "DEVICE_PLUGIN_CRASHLOOP" else f"{BASE}{c}.md"), c


def test_the_flag_beats_the_environment_and_text_shows_the_links() -> None:
    env = {"GPUBOT_RUNBOOK_BASE_URL": "https://env.example.com/"}
    code, out, _ = run(*TARGET, "--runbook-base-url", BASE, env=env)
    assert code == EXIT_OK
    assert _runbooks_of(out)["DEVICE_PLUGIN_CRASHLOOP"] == f"{BASE}DEVICE_PLUGIN_CRASHLOOP.md"


@pytest.mark.parametrize("env, said", [
    ({"GPUBOT_RUNBOOK_OVERRIDES": f"DEVICE_PLUGIN_CRASHLOP={WIKI}"},
     "did you mean DEVICE_PLUGIN_CRASHLOOP?"),
    ({"GPUBOT_RUNBOOK_OVERRIDES": "DEVICE_PLUGIN_CRASHLOOP=wiki/plugin"}, "http(s) URL"),
    ({"GPUBOT_RUNBOOK_OVERRIDES": "DEVICE_PLUGIN_CRASHLOOP"}, "is not CODE=URL"),
    ({"GPUBOT_RUNBOOK_BASE_URL": "https://docs|x/"}, "GPUBOT_RUNBOOK_BASE_URL"),
])
def test_a_bad_runbook_setting_is_a_usage_error(env: dict[str, str], said: str) -> None:
    code, out, err = run(*TARGET, env=env)
    assert code == EXIT_USAGE and out == ""
    assert said in err


def test_serve_reads_them_from_the_environment_and_a_config_file(tmp_path: Path) -> None:
    conf = tmp_path / "gpubot.yaml"
    conf.write_text(f"runbook_base_url: {BASE}\nrunbook_overrides:\n"
                    f"  GPU_UNHEALTHY: https://wiki.example.com/xid\n")
    books = load_settings(conf, env=TOKENS).validate().runbooks()
    assert books.url("GPU_UNHEALTHY") == "https://wiki.example.com/xid"
    assert books.url("INSUFFICIENT_GPU") == f"{BASE}INSUFFICIENT_GPU.md"
    # the environment beats the file
    env = {**TOKENS, "GPUBOT_RUNBOOK_OVERRIDES": "GPU_UNHEALTHY=https://wiki.example.com/a;"
                                                "INSUFFICIENT_GPU=https://wiki.example.com/b"}
    books = load_settings(conf, env=env).validate().runbooks()
    assert (books.url("GPU_UNHEALTHY"), books.url("INSUFFICIENT_GPU")) == (
        "https://wiki.example.com/a", "https://wiki.example.com/b")
    assert load_settings(env=TOKENS).validate().runbooks() == Runbooks()


def test_serve_refuses_the_old_variable_and_a_bad_map() -> None:
    with pytest.raises(ConfigError, match="GPUBOT_RUNBOOK_URL is now GPUBOT_RUNBOOK_BASE_URL"):
        load_settings(env={**TOKENS, "GPUBOT_RUNBOOK_URL": BASE})
    with pytest.raises(ConfigError, match=r"GPUBOT_RUNBOOK_OVERRIDES.*'NOPE' is not a finding"):
        load_settings(env={**TOKENS, "GPUBOT_RUNBOOK_OVERRIDES": f"NOPE={WIKI}"})
    with pytest.raises(ConfigError, match="GPUBOT_RUNBOOK_BASE_URL"):
        load_settings(env={**TOKENS, "GPUBOT_RUNBOOK_BASE_URL": "docs/runbook"}).validate()


def _diagnosis() -> Diagnosis:
    d = Diagnosis("why-pending", "pod/ml-team/train-0")
    for code in ("GPU_UNHEALTHY", "INSUFFICIENT_GPU"):
        d.add(finding_at(code, Severity.CRITICAL, f"{code} here",
                         (ObjectRef("Pod", "train-0", "ml-team"),)))
    return d


def _slack_runbooks(renderer: Renderer) -> tuple[list[str], str]:
    """The runbook links of the rendered messages, and their whole text."""
    text = json.dumps([m.blocks for m in renderer.render(_diagnosis()).messages])
    return re.findall(r"<([^|>]+)\|Runbook>", text), text


def test_slack_without_a_url_names_the_page_as_text_never_a_broken_link() -> None:
    links, text = _slack_runbooks(Renderer())
    assert links == []
    for code in ("GPU_UNHEALTHY", "INSUFFICIENT_GPU"):
        assert f"Runbook: gpubot's `docs/runbook/{code}.md`" in text
    assert str(PAGES) not in text  # a path on the bot's disk means nothing in Slack


def test_slack_links_base_and_page_and_an_override_wins() -> None:
    books = Runbooks.of(BASE, {"GPU_UNHEALTHY": "https://wiki.example.com/xid"})
    links, _ = _slack_runbooks(Renderer(runbooks=books))
    assert set(links) == {"https://wiki.example.com/xid", f"{BASE}INSUFFICIENT_GPU.md"}
