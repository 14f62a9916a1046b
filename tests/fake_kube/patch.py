"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) over plain JSON values.

Strategic merge patch is served as a merge patch: lists are replaced whole rather than
merged by key, and ``$patch``/``$retainKeys`` directives are not understood.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    pass


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"invalid JSON pointer {pointer!r}")
    return [_unescape(t) for t in pointer[1:].split("/")]


def _parent(doc: Any, tokens: list[str], pointer: str) -> Any:
    cur = doc
    for tok in tokens[:-1]:
        if isinstance(cur, dict):
            if tok not in cur:
                raise PatchError(f"doc is missing path: {pointer!r}")
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(cur, tok, pointer, allow_end=False)]
        else:
            raise PatchError(f"doc is missing path: {pointer!r}")
    return cur


def _index(lst: list[Any], tok: str, pointer: str, *, allow_end: bool) -> int:
    if tok == "-" and allow_end:
        return len(lst)
    if not tok.isdigit():
        raise PatchError(f"invalid array index {tok!r} in {pointer!r}")
    idx = int(tok)
    if idx > len(lst) or (idx == len(lst) and not allow_end):
        raise PatchError(f"array index out of bounds in {pointer!r}")
    return idx


def _get(doc: Any, pointer: str) -> Any:
    tokens = _split(pointer)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"doc is missing path: {pointer!r}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, pointer, allow_end=False)]
    raise PatchError(f"doc is missing path: {pointer!r}")


def _remove(doc: Any, pointer: str) -> Any:
    tokens = _split(pointer)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"doc is missing path: {pointer!r}")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, pointer, allow_end=False))
    raise PatchError(f"doc is missing path: {pointer!r}")


def _add(doc: Any, pointer: str, value: Any, *, replace: bool = False) -> Any:
    tokens = _split(pointer)
    if not tokens:
        return value
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"doc is missing key: {pointer!r}")
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(parent, last, pointer, allow_end=False)] = value
        else:
            parent.insert(_index(parent, last, pointer, allow_end=True), value)
    else:
        raise PatchError(f"doc is missing path: {pointer!r}")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=True)
        elif kind == "move":
            value = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op["from"])))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchError(f"testing value {path} failed")
        else:
            raise PatchError(f"unexpected kind: {kind}")
    return doc
