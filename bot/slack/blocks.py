"""Diagnosis -> Block Kit messages, through the jinja2 templates in ``templates/slack``.

One template per command (``<command>.j2``, ``generic.j2`` when a command has none) renders
the verdict card and the thread messages; each finding goes through
``findings/<CODE>.j2`` when that exists, else ``findings/_default.j2``.

A template writes JSON. Values are interpolated only inside JSON strings, and every
``{{ value }}`` is escaped twice on output: for Slack mrkdwn (``& < >``) and for JSON (quotes,
backslashes, control characters). A value therefore cannot end its string, inject a block,
or become a mention or a link. Cluster text goes through ``| code`` or ``| pre`` (or a
plain_text object) so that ``*``, ``_`` and backticks stay literal. Only macro output and
``button_value(...)``/``tojson`` (JSON values, strings mrkdwn-escaped) pass unchanged.

The output is a stream of blocks, each followed by a comma; ``lib.message(part, text)``
starts a new message. After parsing, every message is fitted to Block Kit's limits; any
cut (there or a template's "... and N more") marks the result ``truncated`` and the caller
attaches the full report as a file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from bot.resources import TEMPLATE_DIR
from bot.runbook import SOURCE_DIR, Runbooks, page, valid_base
from bot.slack.mrkdwn import code_raw, escape, pre_raw
from handlers.cards import card
from handlers.model import Diagnosis, Finding, Severity
from handlers.words import counted

# Block Kit limits (https://api.slack.com/reference/block-kit/blocks), as slack_sdk checks them.
MAX_BLOCKS = 50
SECTION_TEXT = 3000
FIELD_TEXT = 2000
MAX_FIELDS = 10
HEADER_TEXT = 150
CONTEXT_ELEMENTS = 10
CONTEXT_TEXT = 2000
ACTION_ELEMENTS = 25
BUTTON_TEXT = 75
BUTTON_VALUE = 2000
MESSAGE_TEXT = 3000  # the notification fallback; Slack allows 40k, nobody reads past this

SEVERITY_ICON = {"critical": "\U0001f534", "warning": "\U0001f7e0", "info": "\U0001f535",
                 "ok": "\U0001f7e2"}
CUT_NOTE = "… (cut to Slack's limits: the full report is attached in the thread)"


@dataclass
class Message:
    part: str  # card | findings | placement | commands | ...
    text: str  # notification fallback, mrkdwn-escaped
    blocks: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Rendered:
    card: Message
    thread: list[Message]
    truncated: bool

    @property
    def messages(self) -> list[Message]:
        return [self.card, *self.thread]


@dataclass
class Changes:
    """What a Re-check found different from the card it replaces."""

    added: list[str]
    resolved: list[str]
    by: str | None = None  # user id
    known: bool = True  # False: the old card carried no codes


class _State:
    def __init__(self) -> None:
        self.cut = False

    def more(self, hidden: int, noun: str) -> str:
        """"... and 3 more nodes" for the singular ``noun``."""
        if hidden <= 0:
            return ""
        self.cut = True
        return f"... and {counted(hidden, 'more ' + noun)}"


# -- filters ---------------------------------------------------------------------------------


def _finalize(value: Any) -> Any:
    """Every ``{{ }}``: macro output and JSON values pass, the rest is escaped for mrkdwn and
    for the inside of a JSON string."""
    if hasattr(value, "__html__"):
        return value
    if value is None:
        return Markup("")
    return Markup(json.dumps(escape(value), ensure_ascii=False)[1:-1])


def _escaped(value: Any) -> Any:
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, Mapping):
        return {str(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escaped(v) for v in value]
    return value


def tojson(value: Any) -> Markup:
    """A JSON value (not inside a string), every string in it escaped for mrkdwn."""
    return Markup(json.dumps(_escaped(value), ensure_ascii=False))


def button_value(payload: Mapping[str, Any]) -> Markup:
    """A button's value: compact JSON, exact (values are never shown, so not escaped)."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    if len(text) > BUTTON_VALUE:
        raise ValueError(f"button value of {len(text)} characters: over {BUTTON_VALUE}")
    return Markup(json.dumps(text, ensure_ascii=False))


def clip(value: Any, n: int) -> str:
    s = str(value)
    return s if len(s) <= n else s[: max(0, n - 1)].rstrip() + "…"


def first_line(value: Any) -> str:
    return str(value).strip().split("\n", 1)[0]


def num(v: Any) -> str:
    return f"{float(v):g}" if isinstance(v, int | float) and not isinstance(v, bool) else str(v)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
          headers: Sequence[str] | None = None, max_width: int = 40) -> str:
    """Rows as a fixed-width text table (for a code block)."""
    if not rows:
        return ""
    cols = list(columns or rows[0].keys())
    heads = list(headers or [c.upper() for c in cols])
    cells = [[clip(_cell(r.get(c, "")), max_width) for c in cols] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in cells]
    return "\n".join(lines)


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list | tuple):
        return ", ".join(_cell(x) for x in v) or "-"
    if isinstance(v, Mapping):
        return ", ".join(f"{k}={_cell(x)}" for k, x in v.items()) or "-"
    return num(v) if v != "" and v is not None else "-"


def chunks(lines: Iterable[Any], size: int = SECTION_TEXT - 200) -> list[str]:
    """Lines grouped so that each group, escaped and fenced, fits one section."""
    out: list[str] = []
    cur: list[str] = []
    used = 0
    for raw in lines:
        for line in str(raw).split("\n"):
            n = len(escape(line)) + 1
            if cur and used + n > size:
                out.append("\n".join(cur))
                cur, used = [], 0
            cur.append(line if n <= size else line[: size // 2])
            used += n
    if cur:
        out.append("\n".join(cur))
    return out


def action_label(action: str, target: str, code: str) -> str:
    """The button's text, as the finding's card words it (``{target}`` filled in)."""
    template = (card(code).actions or {}).get(action)
    label = template.format(target=target) if template else (
        f"{action.replace('-', ' ').capitalize()} on {target}")
    return clip(label, BUTTON_TEXT)


def link(url: str, text: str) -> Markup:
    """A mrkdwn link ``<url|text>``, inside a JSON string; plain text when the URL could
    close the link early."""
    shown = escape(text)
    out = f"<{url}|{shown}>" if valid_base(url) else shown
    return Markup(json.dumps(out, ensure_ascii=False)[1:-1])


def runbook_link(runbooks: Runbooks, code: str) -> Markup:
    """``code``'s runbook as a link, or, with no URL set, the page named as text: a path on
    the bot's disk would be a broken link in Slack."""
    url = runbooks.url(code)
    if url is not None:
        return link(url, "Runbook")
    text = f"Runbook: gpubot's `{SOURCE_DIR}/{page(code)}`"
    return Markup(json.dumps(text, ensure_ascii=False)[1:-1])


def _env(template_dir: Path, runbooks: Runbooks) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        undefined=jinja2.StrictUndefined,
        autoescape=True,  # macro output is Markup: passes _finalize unescaped
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(code=code_raw, pre=pre_raw, clip=clip, first_line=first_line, num=num,
                       table=table, chunks=chunks, tojson=tojson)
    env.globals.update(button_value=button_value, icon=lambda s: SEVERITY_ICON.get(str(s), ""),
                       max_blocks=MAX_BLOCKS,
                       mention=lambda u: _user(u) or "", link=link,
                       runbook_link=lambda code: runbook_link(runbooks, str(code)),
                       counted=counted)
    return env


# -- limits ----------------------------------------------------------------------------------


_ENTITY_TAIL = re.compile(r"&[a-z]{0,3}$")


def cut_mrkdwn(text: str, limit: int, note: str = CUT_NOTE) -> str:
    """``text`` cut to ``limit`` characters: never inside an entity, fences closed, a note."""
    if len(text) <= limit:
        return text
    room = limit - len(note) - 6
    head = text[:room]
    head = _ENTITY_TAIL.sub("", head)
    if "\n" in head[-200:]:
        head = head[: head.rindex("\n")]
    if head.count("```") % 2 == 1:
        head = head.rstrip("`") + "\n```"
    return f"{head}\n{note}"


def _fit_text(obj: dict[str, Any], limit: int) -> bool:
    text = obj.get("text")
    if not isinstance(text, str) or len(text) <= limit:
        return False
    if obj.get("type") == "mrkdwn":
        obj["text"] = cut_mrkdwn(text, limit)
    else:
        obj["text"] = clip(text, limit)
    return True


def _cap(block: dict[str, Any], key: str, limit: int) -> bool:
    """Keep the first ``limit`` items of ``block[key]``; True when some were dropped."""
    if len(block[key]) <= limit:
        return False
    block[key] = block[key][:limit]
    return True


def fit(blocks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """Blocks cut to Block Kit's limits; True when anything was cut."""
    cut = False
    for b in blocks:
        t = b.get("type")
        if t == "section":
            if isinstance(b.get("text"), dict):
                cut |= _fit_text(b["text"], SECTION_TEXT)
            if isinstance(b.get("fields"), list):
                cut |= _cap(b, "fields", MAX_FIELDS)
                for f in b["fields"]:
                    cut |= _fit_text(f, FIELD_TEXT)
        elif t == "header":
            cut |= _fit_text(b["text"], HEADER_TEXT)
        elif t == "context":
            cut |= _cap(b, "elements", CONTEXT_ELEMENTS)
            for e in b["elements"]:
                cut |= _fit_text(e, CONTEXT_TEXT)
        elif t == "actions":
            cut |= _cap(b, "elements", ACTION_ELEMENTS)
            for e in b["elements"]:
                if isinstance(e.get("text"), dict):
                    cut |= _fit_text(e["text"], BUTTON_TEXT)
    if len(blocks) > MAX_BLOCKS:
        hidden = len(blocks) - (MAX_BLOCKS - 1)
        note = {"type": "context", "elements": [{
            "type": "mrkdwn",
            "text": f"... and {hidden} more blocks: the full report is attached in the thread"}]}
        blocks = [*blocks[: MAX_BLOCKS - 1], note]
        cut = True
    return blocks, cut


def parse_stream(text: str) -> list[Message]:
    """The template's output (blocks and message markers, each followed by a comma)."""
    try:
        items = json.loads("[" + text.strip() + "null]")[:-1]
    except json.JSONDecodeError as err:
        raise ValueError(f"template produced invalid JSON: {err}\n{text}") from err
    out: list[Message] = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"template produced {item!r}, not a block")
        if "gpubot" in item:
            out.append(Message(str(item.get("part", "")), str(item.get("text", ""))))
        elif not out:
            raise ValueError("template produced a block before its first message marker")
        else:
            out[-1].blocks.append(item)
    return [m for m in out if m.blocks]


# -- rendering -------------------------------------------------------------------------------


def template_for(command: str) -> str:
    return f"slack/{command.replace('-', '_')}.j2"


class Renderer:
    def __init__(self, template_dir: Path | str = TEMPLATE_DIR,
                 runbooks: Runbooks | None = None) -> None:
        self.template_dir = Path(template_dir)
        self.runbooks = runbooks or Runbooks()

    @cached_property
    def env(self) -> jinja2.Environment:
        return _env(self.template_dir, self.runbooks)

    def render(self, diag: Diagnosis, *, argv: Sequence[str] = (), source: str = "",
               requester: str | None = None, changes: Changes | None = None,
               command_prefix: str = "/gpu", request_id: str | None = None) -> Rendered:
        """``request_id``: the request answered; its action buttons carry it, so that the
        approval a click asks for is audited with it (bot/oplog.py)."""
        state = _State()
        name = template_for(diag.command)
        tmpl = self.env.get_or_select_template([name, "slack/generic.j2"])
        problems = [f for f in diag.findings if f.severity.is_problem]
        top = problems[0] if problems else (diag.findings[0] if diag.findings else None)
        worst = diag.findings[0].severity if diag.findings else Severity.OK
        out = tmpl.render(
            d=diag, findings=diag.findings, problems=problems, top=top, worst=worst,
            source=source, requester=_user(requester), changes=changes,
            recheck=self._recheck(diag, argv),
            actions=self._actions(diag, problems, request_id),
            more=state.more, command_line=" ".join(argv) or diag.command,
            command_prefix=command_prefix,
        )
        messages = parse_stream(out)
        cut = state.cut
        for m in messages:
            m.blocks, was_cut = fit(m.blocks)
            cut |= was_cut
            m.text = clip(m.text, MESSAGE_TEXT)
        if not messages or messages[0].part != "card":
            raise ValueError(f"{name} rendered no card")
        return Rendered(messages[0], messages[1:], cut)

    def render_template(self, name: str, **context: Any) -> list[Message]:
        """Any other template (help); every message fitted to the limits."""
        state = _State()
        messages = parse_stream(self.env.get_template(name).render(more=state.more, **context))
        for m in messages:
            m.blocks, _ = fit(m.blocks)
        return messages

    @staticmethod
    def _recheck(diag: Diagnosis, argv: Sequence[str]) -> Markup | None:
        if not argv:
            return None
        codes = sorted({f.code for f in diag.findings})
        payload: dict[str, Any] = {"v": 1, "q": list(argv), "c": codes}
        try:
            return button_value(payload)
        except ValueError:
            payload.pop("c")  # a Re-check then cannot say what changed, but still works
            return button_value(payload)

    @staticmethod
    def _actions(diag: Diagnosis, problems: list[Finding], request_id: str | None
                 ) -> list[dict[str, Any]]:
        origin = {"r": request_id} if request_id else {}
        seen: dict[tuple[str, str], dict[str, Any]] = {}
        for f in problems:
            for action, target in f.actions:
                if (action, target) not in seen:
                    seen[(action, target)] = {
                        "label": action_label(action, target, f.code),
                        "value": button_value({"v": 1, "a": action, "t": diag.target,
                                               "n": target, "c": f.code, **origin}),
                        "code": f.code,
                    }
        return list(seen.values())


_USER = re.compile(r"^[UW][A-Z0-9]{2,20}$")


def _user(user: str | None) -> Markup | None:
    """``<@U123>``, only for a well-formed user id (it is the one thing written unescaped)."""
    return Markup(f"<@{user}>") if user and _USER.match(user) else None


def diff_codes(before: Iterable[str] | None, after: Iterable[str]) -> Changes:
    if before is None:
        return Changes([], [], known=False)
    b, a = set(before), set(after)
    return Changes(sorted(a - b), sorted(b - a))


def validate(blocks: list[dict[str, Any]]) -> None:
    """Raise ``ValueError`` unless every block parses with slack_sdk's models and passes
    their limit checks (tests call this on every rendered message)."""
    from slack_sdk.models.blocks import Block

    if len(blocks) > MAX_BLOCKS:
        raise ValueError(f"{len(blocks)} blocks: over {MAX_BLOCKS}")
    for raw in blocks:
        block = Block.parse(raw)
        if block is None:
            raise ValueError(f"slack_sdk cannot parse block {raw!r}")
        block.validate_json()
        if block.to_dict() != raw:
            raise ValueError(f"block changes in a round trip through slack_sdk:\n{raw}\n"
                             f"{block.to_dict()}")
