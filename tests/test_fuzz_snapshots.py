"""Property: whatever is done to a bundled example snapshot (fields deleted, nulled or
given values of other types, odd quantities, files cut short or garbled), every command
exits 0 or 1 with bounded output and no traceback, and exit 1 says what is wrong in one
line. Budget: tests/fuzzing.py."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import MAX_OUTPUT, budget, run_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _targets() -> dict[str, list[str]]:
    """Example name -> why-pending arguments, from the example scenarios."""
    out: dict[str, list[str]] = {}
    for f in sorted((ROOT / "tests" / "scenarios").glob("*/scenario.yaml")):
        s = yaml.safe_load(f.read_text())
        snap = (f.parent / str(s.get("snapshot", ""))).resolve()
        if s.get("command") == "why-pending" and snap.parent == EXAMPLES:
            ns = ["-n", s["namespace"]] if s.get("namespace") else []
            out.setdefault(snap.name, [str(s["target"]), *ns])
    return out


TARGETS = _targets()


@dataclass(frozen=True)
class Source:
    example: str
    rel: str  # file inside the example
    text: str
    docs: tuple[Any, ...] | None  # parsed documents, None for a stream file


def _sources() -> list[Source]:
    out = []
    for name in sorted(TARGETS):
        for f in sorted((EXAMPLES / name).rglob("*")):
            if not f.is_file() or f.name.endswith(".md"):
                continue
            text = f.read_text()
            docs: tuple[Any, ...] | None = None
            if f.suffix == ".json":
                docs = (json.loads(text),)
            elif f.suffix == ".yaml":
                docs = tuple(d for d in yaml.safe_load_all(text) if d is not None)
            out.append(Source(name, str(f.relative_to(EXAMPLES / name)), text, docs))
    return out


SOURCES = _sources()

ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2**63, 2**70, 1.5, 1e308, "", "abc", "1.5x", "1e400", "-1",
    "0.5", "500m", "8Ei", "9" * 400, "2024-13-45T99:99:99Z", "Exists", "NoSchedule", "True",
    [], [None], [1], ["x"], [{}], {}, {"a": 1}, {"name": None}, {"kind": []}, "x" * 5000,
]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Source, bytes, list[str]]:
    """(the file, its new bytes, what was done). Choices are drawn from one seeded random
    stream, uniformly: Hypothesis's own draws favour the simplest values and the first
    fields, which the loader guarded long ago."""
    src = draw(st.sampled_from(SOURCES))
    rnd = draw(st.randoms(use_true_random=False))
    done: list[str] = []
    if src.docs is not None:
        docs = json.loads(json.dumps(src.docs))  # a deep copy
        for _ in range(rnd.randint(1, 6)):
            paths = [p for p in _paths(docs) if len(p) > 1]
            if not paths:
                break
            path = rnd.choice(paths)
            parent = docs
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict) and rnd.random() < 0.3:
                del parent[path[-1]]
                done.append(f"delete {path}")
            else:
                parent[path[-1]] = value = copy.deepcopy(rnd.choice(ODD_VALUES))
                done.append(f"set {path} = {value!r:.40}")
        if src.rel.endswith(".json"):
            data = json.dumps(docs[0], indent=2).encode()
        else:
            data = yaml.safe_dump_all(docs, sort_keys=False).encode()
    else:
        data = src.text.encode()
    if rnd.random() < 0.25:
        at = rnd.randint(0, len(data))
        data = data[:at]
        done.append(f"cut at byte {at}")
    if rnd.random() < 0.15:
        at = rnd.randint(0, len(data))
        data = data[:at] + rnd.randbytes(rnd.randint(1, 8)) + data[at:]
        done.append(f"garble at byte {at}")
    return src, data, done


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    for name in TARGETS:
        shutil.copytree(EXAMPLES / name, root / name)
    return root


def commands(example: str) -> list[list[str]]:
    return [["why-pending", *TARGETS[example]], ["doctor"], ["nodes"], ["pending"], ["quota"],
            ["quota", "default"], ["doctor", "no-such-node"], ["why-pending", "nope"]]


@budget(ci_examples=40)
@given(case=mutated())
def test_every_command_survives_a_mutated_snapshot(
        workdir: Path, case: tuple[Source, bytes, list[str]]) -> None:
    src, data, done = case
    target = workdir / src.example / src.rel
    target.write_bytes(data)
    why = f"{src.example}/{src.rel}: {'; '.join(done)}"
    try:
        for argv in commands(src.example):
            for fmt in ("text", "json"):
                code, out, err = run_cli([*argv, "--snapshot", str(workdir / src.example),
                                          "-o", fmt])
                assert code in (0, 1), (why, argv, code, err)
                assert len(out) + len(err) < MAX_OUTPUT, (why, argv)
                assert "Traceback" not in out + err, (why, argv)
                if code == 1:
                    assert err.startswith("gpubot: ") and err.count("\n") == 1, (why, err)
                elif fmt == "json":
                    json.loads(out)
    finally:
        target.write_text(src.text)
