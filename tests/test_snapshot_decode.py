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
    return _read_items([obj], fast=fast)


def _read_items(items: list[Obj], *, fast: bool
                ) -> tuple[list[Obj], list[str], set[Any], bool, set[str]]:
    kind = items[0]["kind"]
    head = {"kind": f"{kind}List", "apiVersion": "v1"}
    doc = {**head, "items": items} if fast else {"apiVersion": "v1", "kind": head["kind"],
                                                  "items": items}
    loader = snapshot_loader._Loader()
    loader.load_bytes(Path("objects.json"), _dumps(doc))
    return (loader.objects.get(kind, []), [p.message for p in loader.problems],
            loader.stamps, loader.from_dump, loader.kinds)


def _decodes(obj: Obj) -> bool:
    return _decodes_items([obj])


def _decodes_items(items: list[Obj]) -> bool:
    loader = snapshot_loader._Loader()
    ctx = snapshot_loader._FileContext("objects.json", None, None)
    return loader._read_typed(ctx, _dumps({"kind": f"{items[0]['kind']}List", "items": items}))


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


def _replicas(count: int) -> list[Obj]:
    pod = next(o for o in OBJECTS if o["kind"] == "Pod" and o["spec"].get("tolerations")
               and o["metadata"].get("labels") and o["spec"]["containers"][0].get("env"))
    replicas = [copy.deepcopy(pod) for _ in range(count)]
    for n, replica in enumerate(replicas):
        replica["metadata"]["name"] = f"replica-{n}"
    return replicas


def test_replicas_share_the_subtrees_they_carry_alike() -> None:
    replicas = _replicas(3)
    replicas[2]["spec"]["containers"][0]["image"] = "other:2"
    kept, problems, *_ = _read_items(copy.deepcopy(replicas), fast=True)
    assert not problems and [p["metadata"]["name"] for p in kept] == [
        "replica-0", "replica-1", "replica-2"]
    assert _read_items(copy.deepcopy(replicas), fast=True) == \
        _read_items(copy.deepcopy(replicas), fast=False)
    first, second, third = (p["spec"] for p in kept)
    assert first["containers"] is second["containers"]
    assert third["containers"] is not first["containers"]
    assert third["containers"][0]["image"] == "other:2"
    assert first["tolerations"] is second["tolerations"] is third["tolerations"]
    assert kept[0]["metadata"]["labels"] is kept[2]["metadata"]["labels"]


def test_a_text_one_shared_field_takes_is_still_checked_as_another() -> None:
    # {"bad": 1} is a valid affinity (unknown keys are skipped) and not a valid nodeSelector
    # (values are strings): the second must not pass on the strength of the first.
    first, second = _replicas(2)
    first["spec"]["affinity"] = {"bad": 1}
    second["spec"]["nodeSelector"] = {"bad": 1}
    assert not _decodes_items([copy.deepcopy(first), copy.deepcopy(second)])
    fast = _read_items([copy.deepcopy(first), copy.deepcopy(second)], fast=True)
    assert fast == _read_items([first, second], fast=False)
    assert [p["metadata"]["name"] for p in fast[0]] == ["replica-0"] and fast[1]


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
    view = load_snapshot(s.snapshot)
    read_every_kind(view)
    before = copy.deepcopy(view._raw)
    cut = run_on(s, view)
    # Replicas share subtrees: a handler that changed one would change them all.
    assert view._raw == before, "a diagnosis changed an object of the view"
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
