"""YAML documents, parsed one by one so that a broken document costs only itself."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
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


def _timestamp_as_text(loader: _Loader, node: yaml.Node) -> Any:
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


@dataclass(frozen=True)
class YamlDoc:
    value: Any


@dataclass(frozen=True)
class YamlFailure:
    line: int
    column: int
    message: str


def iter_docs(text: str, first_line: int = 1) -> Iterator[YamlDoc | YamlFailure]:
    """Documents that hold more than comments, in order; ``first_line`` is the file line
    ``text`` starts on, for error locations."""
    for chunk, line in _split(text, first_line):
        if not _CONTENT.search(chunk):
            continue
        try:
            value = yaml.load(chunk, Loader=_Loader)
        except yaml.YAMLError as err:
            yield _failure(err, line)
            continue
        yield YamlDoc(value)


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
