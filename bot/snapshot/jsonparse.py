"""JSON documents: one per file (orjson, the fast path), several printed one after another
(the `cluster-info dump` stream), and what can be saved from a document cut short."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

_WS = re.compile(r"[ \t\r\n]*")
_WS_BYTES = b" \t\r\n"
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class JsonDoc:
    value: Any


@dataclass(frozen=True)
class JsonFailure:
    line: int
    column: int
    message: str
    truncated: bool
    recovered: dict[str, Any] | None  # the list with its complete items, if it was one


def loads(data: bytes | memoryview) -> Any:
    """orjson.loads; raises json.JSONDecodeError (orjson's error subclasses it)."""
    return orjson.loads(data)


def iter_docs(data: bytes, start: int, end: int) -> Iterator[JsonDoc | JsonFailure]:
    """The JSON documents in ``data[start:end]``, printed one after another.

    kubectl pretty-prints each document and closes it with ``}`` at the start of a line,
    which no line inside a document can do: cut there and let orjson parse each piece.
    Anything else (compact documents, syntax errors, a cut-short end) goes the slow way.
    """
    view = memoryview(data)
    pos = _skip_ws(data, start, end)
    while pos < end:
        if data[pos] not in b"{[":  # stray text between documents: skip the line
            eol = data.find(b"\n", pos, end)
            pos = _skip_ws(data, end if eol < 0 else eol + 1, end)
            continue
        stop = _pretty_end(data, pos, end)
        value = _try_loads(view[pos:stop]) if stop > 0 else _FAILED
        if value is _FAILED:
            yield from _slow_docs(data, pos, end)
            return
        yield JsonDoc(value)
        pos = _skip_ws(data, stop, end)


_FAILED = object()


def _try_loads(data: memoryview) -> Any:
    try:
        return loads(data)
    except json.JSONDecodeError:
        return _FAILED


def _pretty_end(data: bytes, pos: int, end: int) -> int:
    """Offset just past the first closing bracket at the start of a line, or -1."""
    marker = b"\n}" if data[pos] == ord("{") else b"\n]"
    i = data.find(marker, pos, end)
    while i >= 0:
        after = i + 2
        if after >= end or data[after] in b"\r\n \t":
            return after
        i = data.find(marker, after, end)
    return -1


def _skip_ws(data: bytes, pos: int, end: int) -> int:
    while pos < end and data[pos] in _WS_BYTES:
        pos += 1
    return pos


def _slow_docs(data: bytes, start: int, end: int) -> Iterator[JsonDoc | JsonFailure]:
    """Documents with the stdlib decoder, which reports where each one ends; after a
    broken document, go on at the next line that opens one."""
    first_line = data.count(b"\n", 0, start) + 1
    text = data[start:end].decode("utf-8", "replace")
    pos = _skip(text, 0)
    while pos < len(text):
        if text[pos] not in "{[":
            pos = _next_doc_start(text, pos)
            continue
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            yield _failure(text, pos, err, first_line)
            pos = _next_doc_start(text, max(err.pos, pos + 1))
            continue
        except (ValueError, RecursionError) as err:  # a 4,301-digit int; nesting
            line = first_line + text.count("\n", 0, pos)
            why = "nested too deep" if isinstance(err, RecursionError) else (
                "a number too long to read" if "digits" in str(err) else str(err)[:200])
            yield JsonFailure(line, 1, why, False, _recovered(text, pos))
            pos = _next_doc_start(text, pos + 1)
            continue
        yield JsonDoc(value)
        pos = _skip(text, pos)


def _next_doc_start(text: str, pos: int) -> int:
    found = [i for i in (text.find("\n{", pos), text.find("\n[", pos)) if i >= 0]
    return min(found) + 1 if found else len(text)


def _failure(text: str, doc_start: int, err: json.JSONDecodeError, first_line: int) -> JsonFailure:
    truncated = err.msg.startswith("Unterminated string") or not text[err.pos :].strip()
    return JsonFailure(
        line=first_line + err.lineno - 1,
        column=err.colno,
        message=err.msg,
        truncated=truncated,
        recovered=_recovered(text, doc_start),
    )


def _recovered(text: str, doc_start: int) -> dict[str, Any] | None:
    recovered = recover_list(text, doc_start)
    return recovered if recovered and "items" in recovered else None


def recover_list(text: str, pos: int) -> dict[str, Any] | None:
    """The complete top-level fields of a broken JSON object at ``pos``, and the complete
    items of its ``items`` array: a list cut short keeps every item before the cut."""
    if not text.startswith("{", pos):
        return None
    out: dict[str, Any] = {}
    try:
        pos += 1
        while True:
            key, pos = _DECODER.raw_decode(text, _skip(text, pos))
            pos = _expect(text, pos, ":")
            if key == "items" and text.startswith("[", pos):
                items: list[Any] = []
                out["items"] = items
                pos = _recover_items(text, pos + 1, items)
            else:
                out[key], pos = _DECODER.raw_decode(text, pos)
            pos = _expect(text, pos, ",")
    except (ValueError, IndexError, RecursionError):
        return out


def _recover_items(text: str, pos: int, items: list[Any]) -> int:
    """Append complete items until the array ends; raise ValueError where it breaks for
    good. A broken item is skipped when the next one can be found by its indentation
    (pretty-printed lists): one bad pod costs that pod, not all after it."""
    pos = _skip(text, pos)
    if text.startswith("]", pos):
        return pos + 1
    next_item = _item_opener(text, pos)
    while True:
        try:
            item, pos = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            if next_item is None or (found := text.find(next_item, pos + 1)) < 0:
                raise
            pos = found + len(next_item) - 1
            continue
        items.append(item)
        pos = _skip(text, pos)
        if text.startswith("]", pos):
            return pos + 1
        pos = _expect(text, pos, ",")


def _item_opener(text: str, pos: int) -> str | None:
    """``"\n" + indent + "{"`` when the first item opens a line of its own."""
    line_start = text.rfind("\n", 0, pos) + 1
    indent = text[line_start:pos]
    if line_start == 0 or indent.strip(" \t") or not text.startswith("{", pos):
        return None
    return "\n" + indent + "{"


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def _expect(text: str, pos: int, char: str) -> int:
    pos = _skip(text, pos)
    if not text.startswith(char, pos):
        raise ValueError(f"expected {char!r} at {pos}")
    return _skip(text, pos + 1)
