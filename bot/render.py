"""Diagnosis -> text or JSON. Text goes through the jinja2 templates in ``templates/cli``.

One template per command (``<command>.txt.j2``), sharing ``_macros.txt.j2``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

import yaml

from bot.resources import TEMPLATE_DIR
from bot.runbook import Runbooks, from_env
from bot.table import ANSI
from handlers.model import Diagnosis, Severity
from handlers.words import counted

if TYPE_CHECKING:  # -o json/yaml never renders a template: jinja2 is imported for text only
    import jinja2

# The -o json/yaml contract's version: bumped when a field changes meaning or goes away
# (adding fields does not bump it). 2: a finding's fix is {summary, commands, patch, docs}.
SCHEMA_VERSION = 2

_ANSI = ANSI  # the tables' styles are the templates' ones


@cache
def _env(color: bool, runbooks: Runbooks) -> jinja2.Environment:
    import jinja2

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

    env.globals["counted"] = counted
    env.globals["runbook"] = lambda code: runbooks.resolve(str(code))
    env.filters["paint"] = paint
    env.filters["num"] = num
    env.filters["indent_block"] = lambda s, n=4: "\n".join(
        " " * n + line for line in str(s).splitlines())
    return env


def template_name(command: str) -> str:
    return f"cli/{command.replace('-', '_')}.txt.j2"


def _runbooks(runbooks: Runbooks | None) -> Runbooks:
    return runbooks if runbooks is not None else from_env(os.environ)


def render_text(diag: Diagnosis, *, color: bool = False, source: str = "",
                wide: bool = False, width: int | None = None,
                runbooks: Runbooks | None = None) -> str:
    """``wide``: tables with every column, whole (``-o wide``). ``width``: the terminal's,
    that tables fit (``bot.table.terminal_width``); None: no limit. ``runbooks``: where
    findings' runbooks are (default: the environment's settings)."""
    from bot.clitables import TABLES
    from bot.table import render

    def table(name: str, rows: Any, indent: int = 0) -> str:
        columns, body = TABLES[name](list(rows))
        # The template's own newline ends the last line.
        return render(columns, body, width=width, wide=wide, color=color,
                      indent=indent).removesuffix("\n")

    tmpl = _env(color, _runbooks(runbooks)).get_template(template_name(diag.command))
    problems = [f for f in diag.findings if f.severity.is_problem]
    return tmpl.render(
        d=diag, findings=diag.findings, problems=problems, source=source, wide=wide,
        worst=diag.findings[0].severity if diag.findings else Severity.OK, table=table,
    )


def document(diag: Diagnosis, *, source: str = "", runbooks: Runbooks | None = None,
             where: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``-o json``/``-o yaml`` document: docs/schema/diagnosis.schema.json describes it.
    Whole numbers are integers (a GPU count is 8, not 8.0). Each finding carries its
    resolved ``runbook``: a URL, or the installed page's path. ``where``: the ``cluster``
    read or the ``clusters`` merged, when the config names clusters."""
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    out.update(_plain(diag.to_json()))
    out["source"] = source
    out.update(where or {})
    books = _runbooks(runbooks)
    for f in out.get("findings", []):
        f["runbook"] = books.resolve(f["code"])
    return out


def render_json(diag: Diagnosis, *, source: str = "", runbooks: Runbooks | None = None,
                where: Mapping[str, Any] | None = None) -> str:
    return json.dumps(document(diag, source=source, runbooks=runbooks, where=where), indent=2,
                      sort_keys=False)


def render_yaml(diag: Diagnosis, *, source: str = "", runbooks: Runbooks | None = None,
                where: Mapping[str, Any] | None = None) -> str:
    return yaml.safe_dump(document(diag, source=source, runbooks=runbooks, where=where),
                          sort_keys=False, allow_unicode=True, width=100)


def _plain(value: Any) -> Any:
    """JSON types only: whole floats as int, tuples and sets as lists, the rest as str."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return [_plain(v) for v in items]
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)  # an IntEnum as its number
    return str(value)  # str subclasses (StrEnum), dates, paths
