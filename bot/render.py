"""Diagnosis -> text or JSON. Text goes through the jinja2 templates in ``templates/cli``.

One template per command (``<command>.txt.j2``), sharing ``_macros.txt.j2``.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from bot.runbook import ENV as RUNBOOK_ENV
from bot.runbook import runbook_url
from handlers.model import Diagnosis, Severity

TEMPLATE_DIR = Path(os.environ.get("GPUBOT_TEMPLATES", Path(__file__).resolve().parent.parent
                                   / "templates"))

_ANSI = {"critical": "1;31", "warning": "33", "info": "36", "ok": "32", "bold": "1",
         "dim": "2"}


@cache
def _env(color: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # terminal text; Slack templates escape for mrkdwn themselves
    )

    def paint(text: Any, style: str) -> str:
        s = str(text)
        return f"\x1b[{_ANSI[style]}m{s}\x1b[0m" if color and style in _ANSI else s

    def num(v: Any) -> str:
        return f"{float(v):g}" if isinstance(v, int | float) else str(v)

    env.globals["runbook"] = lambda code: runbook_url(str(code), os.environ.get(RUNBOOK_ENV))
    env.filters["paint"] = paint
    env.filters["num"] = num
    env.filters["indent_block"] = lambda s, n=4: "\n".join(
        " " * n + line for line in str(s).splitlines())
    return env


def template_name(command: str) -> str:
    return f"cli/{command.replace('-', '_')}.txt.j2"


def render_text(diag: Diagnosis, *, color: bool = False, source: str = "") -> str:
    tmpl = _env(color).get_template(template_name(diag.command))
    problems = [f for f in diag.findings if f.severity.is_problem]
    return tmpl.render(
        d=diag, findings=diag.findings, problems=problems, source=source,
        worst=diag.findings[0].severity if diag.findings else Severity.OK,
    )


def render_json(diag: Diagnosis, *, source: str = "") -> str:
    out = diag.to_json()
    out["source"] = source
    return json.dumps(out, indent=2, sort_keys=False, default=str)
