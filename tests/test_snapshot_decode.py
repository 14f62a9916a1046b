"""A snapshot's JSON lists of the bulk kinds are decoded straight into the fields handlers
read (handlers/kube/shape_types.py). What the loader keeps is what the careful way keeps
(orjson, misfit(), project()), whatever odd values an object holds; and every scenario
gives the same findings from cut-down objects as from whole ones."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.snapshot import load_snapshot
from bot.snapshot import loader as snapshot_loader
from handlers.kube import shape
from handlers.kube.shape_types import NULLABLE, PROJECTED, QUANTITY
from handlers.view import Obj
from tests.scenarios import Scenario, load_scenarios
from tests.test_scenarios import run_on
from tests.test_shape_fast_path import ODD_VALUES, _paths, _set, read_every_kind

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = load_scenarios()


def _whole(path: Path) -> Any:
    """The snapshot at ``path`` with no object cut down."""
    return load_snapshot(path, whole=True)


def _objects() -> list[Obj]:
    seen: dict[str, Obj] = {}
    for snapshot in [*sorted((ROOT / "examples").iterdir()), *(s.snapshot for s in SCENARIOS)]:
        if snapshot.is_dir() or snapshot.suffix in (".json", ".yaml"):
            view = _whole(snapshot)
            read_every_kind(view)
            for kind, objs in view._raw.items():
                if kind in PROJECTED:
                    for obj in objs:
                        seen.setdefault(repr(obj), obj)
    return list(seen.values())


OBJECTS = _objects()


def _read(obj: Obj, *, fast: bool) -> tuple[list[Obj], list[str], set[Any], bool, set[str]]:
    """What the loader keeps of a one-item list of ``obj``: decoded (``fast``), or with
    ``apiVersion`` first, a head the decoder does not take, so the careful way."""
    kind = obj["kind"]
    head = {"kind": f"{kind}List", "apiVersion": "v1"}
    doc = {**head, "items": [obj]} if fast else {"apiVersion": "v1", "kind": head["kind"],
                                                  "items": [obj]}
    loader = snapshot_loader._Loader()
    loader.load_bytes(Path("objects.json"), _dumps(doc))
    return (loader.objects.get(kind, []), [p.message for p in loader.problems],
            loader.stamps, loader.from_dump, loader.kinds)


def _decodes(obj: Obj) -> bool:
    loader = snapshot_loader._Loader()
    ctx = snapshot_loader._FileContext("objects.json", None, None)
    doc = {"kind": f"{obj['kind']}List", "items": [obj]}
    return loader._read_typed(ctx, _dumps(doc))


def _dumps(doc: Obj) -> bytes:
    """JSON as kubectl prints it; the stdlib's, for numbers past 64 bits."""
    return json.dumps(doc, indent=4).encode()


def _read_get_list(obj: Obj, *, fast: bool) -> tuple[list[Obj], list[str], set[Any]]:
    """The same as ``kubectl get -o json`` prints it (a ``List``, keys sorted); with its
    ``kind`` first, a head the decoder does not take."""
    item = {"apiVersion": "v1", "kind": obj["kind"],
            **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}}
    doc = ({"apiVersion": "v1", "items": [item], "kind": "List"} if fast
           else {"kind": "List", "apiVersion": "v1", "items": [item]})
    loader = snapshot_loader._Loader()
    loader.load_bytes(Path("objects.json"), _dumps(doc))
    return loader.objects.get(obj["kind"], []), [p.message for p in loader.problems], \
        loader.stamps


def _same_both_ways(obj: Obj) -> None:
    assert _read(copy.deepcopy(obj), fast=True) == _read(copy.deepcopy(obj), fast=False)
    assert _read_get_list(copy.deepcopy(obj), fast=True) == \
        _read_get_list(copy.deepcopy(obj), fast=False)


def test_every_bundled_object_decodes_to_what_the_careful_way_keeps() -> None:
    assert {o["kind"] for o in OBJECTS} == PROJECTED and len(OBJECTS) > 500
    for obj in OBJECTS:
        assert _decodes(copy.deepcopy(obj)), obj["metadata"]["name"]
        _same_both_ways(obj)
    pod = next(o for o in OBJECTS if o["kind"] == "Pod")
    loader = snapshot_loader._Loader()
    ctx = snapshot_loader._FileContext("objects.json", None, None)
    item = {"apiVersion": "v1", "kind": "Pod",
            **{k: v for k, v in pod.items() if k not in ("apiVersion", "kind")}}
    get_list = {"apiVersion": "v1", "items": [item], "kind": "List"}
    assert loader._read_typed(ctx, _dumps(get_list))  # kubectl get -o json: decoded too


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_odd_fields_are_kept_or_refused_as_the_careful_way_does(data: st.DataObject) -> None:
    obj = copy.deepcopy(data.draw(st.sampled_from(OBJECTS)))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if p != ("metadata", "name")]
        if not paths:
            break
        _set(obj, data.draw(st.sampled_from(paths)), copy.deepcopy(
            data.draw(st.sampled_from(ODD_VALUES))))
    _same_both_ways(obj)


@pytest.mark.parametrize("path", [("spec", "containers", 0, "env"),
                                  ("spec", "containers", 0, "command"),
                                  ("spec", "resourceClaims"), ("status", "phase")])
def test_a_null_in_any_listed_field_is_dropped(path: tuple[Any, ...]) -> None:
    pod = copy.deepcopy(next(o for o in OBJECTS if o["kind"] == "Pod"
                             and o["spec"]["containers"][0].get("command")))
    _set(pod, path, None)
    kept, problems, *_ = _read(pod, fast=True)
    assert kept and not problems
    assert path[-1] not in _at(kept[0], path[:-1])
    _same_both_ways(pod)


def _with_null_stamps(check: Any, depth: int = 0) -> Any:
    """A value for ``check`` holding a null at every NULLABLE key beneath it."""
    if check in shape._SHAPES and depth < 12:
        tag, *rest = shape._SHAPES[check]
        if tag == "list":
            inner = _with_null_stamps(rest[0], depth + 1)
            return [inner] if inner is not None else None
        if tag == "fields":
            out = {}
            for key, sub in rest[0].items():
                value = None if key in NULLABLE else _with_null_stamps(sub, depth + 1)
                if value is not None or key in NULLABLE:
                    out[key] = value
            return out
    return None


@pytest.mark.parametrize("kind", sorted(PROJECTED))
def test_a_null_timestamp_anywhere_in_the_tables_is_dropped(kind: str) -> None:
    obj = _with_null_stamps(shape._BY_KIND[kind])
    obj["kind"], obj["metadata"]["name"] = kind, "a"
    assert _decodes(copy.deepcopy(obj))
    kept, problems, *_ = _read(obj, fast=True)
    assert kept and not problems
    assert all(value is not None for path in _paths(kept[0])
               for value in [_at(kept[0], path)])
    _same_both_ways(obj)


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


@settings(max_examples=300, deadline=None)
@given(st.from_regex(QUANTITY, fullmatch=True))
def test_every_quantity_the_decoder_takes_fits(text: str) -> None:
    assert shape._quantity_ok(text)


@pytest.mark.parametrize("s", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_cut_down_objects_give_the_findings_of_whole_ones(s: Scenario) -> None:
    whole = run_on(s, _whole(s.snapshot))
    cut = run_on(s, load_snapshot(s.snapshot))
    assert [f.to_json() for f in cut.findings] == [f.to_json() for f in whole.findings]
    assert [n.to_json() for n in cut.nodes] == [n.to_json() for n in whole.nodes]
    assert cut.unchecked == whole.unchecked


def test_whole_keeps_every_field_and_the_default_only_those_read(tmp_path: Path) -> None:
    pod = {"metadata": {"name": "p", "namespace": "ml"},
           "spec": {"containers": [{"name": "c", "image": "x", "env": [{"name": "A", "value": "1"}],
                                    "livenessProbe": {"exec": {"command": ["true"]}}}]},
           "status": {"phase": "Running", "podIP": "10.0.0.1"}}
    (tmp_path / "pods.json").write_text(_dumps({"kind": "PodList", "items": [pod]}).decode())
    cut = load_snapshot(tmp_path).list("Pod")[0]
    whole = load_snapshot(tmp_path, whole=True).list("Pod")[0]
    assert "livenessProbe" not in cut["spec"]["containers"][0] and "podIP" not in cut["status"]
    assert cut["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]
    assert whole["spec"]["containers"][0]["livenessProbe"] == {"exec": {"command": ["true"]}}
    assert whole["status"]["podIP"] == "10.0.0.1"
