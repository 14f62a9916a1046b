"""The log_patterns_file option: the CLI flag / env and the bot's setting load and validate it."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import EXIT_OK, EXIT_USAGE, main
from bot.slack.config import ConfigError, load_settings
from handlers.knowledge import logs

SCEN = Path(__file__).parent / "scenarios"
ENV_OK = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
GOOD = """
- id: site-canary
  codes: [DRIVER_NOT_READY]
  pattern: 'gpu-canary: driver probe failed'
  component: our canary
  meaning: our own driver probe failed
  source: https://wiki.example.com/gpu-canary
  examples: ['gpu-canary: driver probe failed']
"""
BAD = GOOD + """
- id: site-typo
  codes: [DRIVER_NOT_REDY]
  pattern: x
  component: c
  meaning: m
  source: https://wiki.example.com/x
"""


@pytest.fixture(autouse=True)
def _builtin_after() -> Iterator[None]:
    yield
    logs.use_user_file(None)


def _file(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "site-patterns.yaml"
    p.write_text(body, encoding="utf-8")
    return p


def _cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(list(argv), out=out, err=err)
    except SystemExit as e:
        code = int(e.code or 0)
    return code, err.getvalue()


def test_cli_refuses_a_bad_file_naming_the_entry(tmp_path: Path) -> None:
    code, err = _cli("doctor", "--snapshot", str(SCEN / "doctor_all_clear" / "snapshot"),
                     "--log-patterns", str(_file(tmp_path, BAD)))
    assert code == EXIT_USAGE
    assert "site-patterns.yaml entry 1 (site-typo): unknown finding code(s) DRIVER_NOT_REDY" in err


def test_cli_reads_the_file_from_the_environment(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUBOT_LOG_PATTERNS_FILE", str(_file(tmp_path, GOOD)))
    code, _ = _cli("doctor", "--snapshot", str(SCEN / "doctor_all_clear" / "snapshot"))
    assert code == EXIT_OK
    assert logs.active().entries[0].id == "site-canary"


def test_bot_setting_loads_and_validates(tmp_path: Path) -> None:
    env = {**ENV_OK, "GPUBOT_LOG_PATTERNS_FILE": str(_file(tmp_path, GOOD))}
    s = load_settings(None, env).validate()
    assert s.log_patterns_file and logs.active().entries[0].id == "site-canary"
    env["GPUBOT_LOG_PATTERNS_FILE"] = str(_file(tmp_path, BAD))
    with pytest.raises(ConfigError, match=r"log_patterns_file: .*entry 1 \(site-typo\)"):
        load_settings(None, env).validate()
