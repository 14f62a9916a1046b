"""YAML documents, parsed one by one so that a broken document costs only itself."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import yaml

try:
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

# A column-0 `---` always starts a document (YAML forbids it inside content), so cutting
# there is exact.
_DOC_START = re.compile(r"^---(?=[ \t\r\n]|\Z)", re.M)
_CONTENT = re.compile(r"^[ \t]*[^\s#]", re.M)
# Kubernetes-looking top-level keys: files without any are not snapshots and are skipped
# without parsing (READMEs, notes, unrelated configs).
K8S_HINT = re.compile(rb"^(?:- )?(?:apiVersion|kind|items|metadata)[ \t]*:", re.M)


class _Loader(_BaseLoader):
    """Safe loading, with timestamps left as text the way `kubectl -o json` has them."""


class _AliasLoader(yaml.SafeLoader):
    """The pure-Python loader, for documents with anchors (kubectl never writes any): an
    alias counts the nodes it stands for, and a document whose aliases stand for more
    than ``MAX_ALIAS_NODES`` is refused. PyYAML shares an aliased object rather than
    copying it, but whatever walks the result (a list of a million items made of nine
    aliases nine deep) pays for every copy: a 900-byte "billion laughs" took 3 GB."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._expanded = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event: Any = self.peek_event()  # type: ignore[no-untyped-call]
            node = self.anchors.get(event.anchor)
            if node is not None:
                self._expanded += self._size(node)
                if self._expanded > MAX_ALIAS_NODES:
                    raise yaml.composer.ComposerError(
                        None, None, f"aliases expand to more than {MAX_ALIAS_NODES:,} "
                        "values (an anchor bomb?)", event.start_mark)
        return super().compose_node(parent, index)

    def _size(self, node: yaml.Node) -> int:
        known = self._sizes.get(id(node))
        if known is not None:
            return known
        size = 1
        if isinstance(node, yaml.SequenceNode):
            size += sum(self._size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size += sum(self._size(k) + self._size(v) for k, v in node.value)
        self._sizes[id(node)] = size
        return size


MAX_ALIAS_NODES = 100_000
_ANCHOR = re.compile(r"(?:^|[\s\[{,])&[^\s]", re.M)


def _timestamp_as_text(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)
_AliasLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


@dataclass(frozen=True)
class YamlDoc:
    value: Any


@dataclass(frozen=True)
class YamlFailure:
    line: int
    column: int
    message: str
    recovered: dict[str, Any] | None = None  # the list with its complete items, if it was one


def iter_docs(text: str, first_line: int = 1) -> Iterator[YamlDoc | YamlFailure]:
    """Documents that hold more than comments, in order; ``first_line`` is the file line
    ``text`` starts on, for error locations. A broken list keeps the items before the
    break (``YamlFailure.recovered``), as a truncated JSON list does."""
    for chunk, line in _split(text, first_line):
        if not _CONTENT.search(chunk):
            continue
        try:
            value = load(chunk)
        except yaml.YAMLError as err:
            failure = _failure(err, line)
        except (ValueError, RecursionError) as err:  # a 4,301-digit int; nesting
            failure = YamlFailure(line, 0, _value_error(err))
        else:
            yield YamlDoc(value)
            continue
        recovered = recover_list(chunk)
        yield replace(failure, recovered=recovered) if recovered else failure


def load(text: str) -> Any:
    """One YAML document; raises yaml.YAMLError, ValueError or RecursionError."""
    loader = _AliasLoader if _ANCHOR.search(text) else _Loader
    return yaml.load(text, Loader=loader)


def _value_error(err: Exception) -> str:
    if isinstance(err, RecursionError):
        return "nested too deep"
    text = str(err)
    return "a number too long to read" if "digits" in text else text[:200]


# `kubectl get -o yaml` lists: `items:` at column 0, each item a `- ` at one indentation.
_ITEMS = re.compile(r"^items:[ \t]*(?:#.*)?\n", re.M)
_ITEM = re.compile(r"^([ ]*)- ", re.M)


def recover_list(chunk: str) -> dict[str, Any] | None:
    """``{..., "items": [...]}`` with the list's complete items and its other top-level
    fields, from a list document that does not parse as a whole, or None if it is not a
    list or no item can be read. Items are cut at each ``- `` of the first item's indent
    and parsed one by one: a broken item costs only itself."""
    found = _ITEMS.search(chunk)
    if not found:
        return None
    body = chunk[found.end():]
    first = _ITEM.search(body)
    if first is None:
        return None
    indent = first.group(1)
    item_re = re.compile(rf"^{indent}- ", re.M)
    # The list ends at the first line less indented than its items (`kind: List`, ...).
    end_re = re.compile(r"^(?!" + indent + r"[ -])(?![ \t]*(?:#|$))", re.M)
    ended = end_re.search(body, first.start() + 1)
    stop = ended.start() if ended else len(body)
    starts = [m.start() for m in item_re.finditer(body, first.start(), stop)]
    items: list[Any] = []
    for start, end in zip(starts, [*starts[1:], stop], strict=True):
        try:
            value = load(body[start:end])
        except (yaml.YAMLError, ValueError, RecursionError):
            continue
        if isinstance(value, list):
            items.extend(value)
    out: dict[str, Any] = {}
    for part in (chunk[: found.start()], body[stop:]):
        try:
            fields = load(part) if part.strip() else None
        except (yaml.YAMLError, ValueError, RecursionError):
            continue
        if isinstance(fields, dict):
            out.update(fields)
    out["items"] = items
    return out if items else None


def _split(text: str, line: int) -> Iterator[tuple[str, int]]:
    """(document text, file line of its first line)."""
    start = 0
    for match in _DOC_START.finditer(text):
        yield text[start : match.start()], line
        line += text.count("\n", start, match.start())
        start = match.end()  # the rest of the `---` line belongs to the new document
    yield text[start:], line


def _failure(err: yaml.YAMLError, first_line: int) -> YamlFailure:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    parts = [getattr(err, "context", None), getattr(err, "problem", None)]
    message = ", ".join(p for p in parts if p) or str(err)
    return YamlFailure(
        line=first_line + (mark.line if mark else 0),
        column=mark.column + 1 if mark else 0,
        message=message,
    )
