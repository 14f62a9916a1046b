"""The shape check's fast path (functions generated from handlers/kube/shape.py's tables)
decides exactly as the checkers do, and leaves an object exactly as they do: every object
of the bundled snapshots, each with a few fields nulled or given values of other types."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.snapshot import load_snapshot
from handlers.kube import shape
from handlers.view import ViewError

ROOT = Path(__file__).resolve().parents[1]
ODD_VALUES = [None, 0, -1, 2**64, 1.5, float("nan"), True, "", "x", "1.5x", "1e400", "8",
              [], [None], ["a"], [1], {}, {"a": None}, {"a": 1}, {"a": "b"}, "y" * 5000]


def _objects() -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for snapshot in sorted((ROOT / "examples").iterdir()):
        if snapshot.is_dir() or snapshot.suffix in (".json", ".yaml"):
            view = load_snapshot(snapshot)
            read_every_kind(view)
            for objs in view._raw.values():
                for obj in objs:
                    seen.setdefault(repr(obj), obj)
    return list(seen.values())


def read_every_kind(view: Any) -> None:
    """Asks for every kind, so that a dump's files read on first ask (ReplicaSets,
    Deployments) are read."""
    for kind in view.kinds:
        with contextlib.suppress(ViewError):
            view.list(kind)


OBJECTS = _objects()


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if path and path != ("kind",):
        yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, child in items:
        yield from _paths(child, (*path, key))


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def _checkers_only(obj: dict[str, Any]) -> str | None:
    check = shape._BY_KIND.get(str(obj.get("kind")), shape._OBJECT)
    saved = shape._FITS.pop(check, None)
    shape._FITS[check] = lambda _obj: False  # every object takes the slow path
    try:
        return shape.misfit(obj)
    finally:
        shape._FITS.pop(check)
        if saved is not None:
            shape._FITS[check] = saved


def _same_verdict(obj: dict[str, Any]) -> None:
    fast, slow = copy.deepcopy(obj), copy.deepcopy(obj)
    assert shape.misfit(fast) == _checkers_only(slow)
    assert repr(fast) == repr(slow)  # nulls removed and messages cut alike


def test_every_bundled_object_fits_both_ways() -> None:
    assert len(OBJECTS) > 100
    for obj in OBJECTS:
        assert shape.misfit(copy.deepcopy(obj)) is None
        _same_verdict(obj)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_odd_fields_get_the_checkers_verdict(data: st.DataObject) -> None:
    obj = copy.deepcopy(data.draw(st.sampled_from(OBJECTS)))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = list(_paths(obj))
        if not paths:
            break
        _set(obj, data.draw(st.sampled_from(paths)), copy.deepcopy(
            data.draw(st.sampled_from(ODD_VALUES))))
    _same_verdict(obj)


@pytest.mark.parametrize("kind", sorted(shape._BY_KIND))
def test_every_kind_compiles(kind: str) -> None:
    assert shape.misfit({"kind": kind, "metadata": {"name": "a"}}) is None
