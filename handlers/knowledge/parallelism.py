"""How many GPUs a pod's workload is built to use, as data (``parallelism.yaml``).

``parallelism(container, asks, resource, controller)`` reads the container's launcher flags
(torchrun ``--nproc_per_node``, vLLM ``--tensor-parallel-size``, ...), its environment and
its controller's fields, and answers how many GPUs the pod needs (None when the launcher
takes as many as it is given), what says so, and what asking fewer would cost. Without a
signal, the container's own ask is what it needs: nothing shows it runs on fewer. Every
signal names its public source; its examples are checked when the file is first read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from handlers.knowledge import load_yaml

_DATA = Path(__file__).with_name("parallelism.yaml")
_DEFAULT_SHRINK = ("it must then start fewer processes (or be split over more pods), and "
                   "runs slower")
_ADAPTS_SHRINK = "it then runs on {n} GPUs instead, and slower"  # "{n} GPUs": counted


@dataclass(frozen=True)
class Parallelism:
    gpus: int | None  # GPUs per pod it is built for; None: as many as it is given
    evidence: str  # what says so
    shrink: str  # what asking fewer costs; "{n}" stands for the new count


@dataclass(frozen=True)
class Signal:
    id: str
    launcher: str
    shrink: str
    source: str
    flags: tuple[str, ...] = ()
    when: re.Pattern[str] | None = None
    env: str | None = None
    env_prefix: str | None = None
    field: str | None = None
    kind: str | None = None
    factor: bool = False
    adapts: frozenset[str] = frozenset()
    pins: bool = False

    def read(self, text: str, image: str, env: Mapping[str, str],
             controller: Mapping[str, Any] | None) -> tuple[str, str] | None:
        """(value, what was seen) when the signal is in the container, else None."""
        if self.flags:
            if self.when is not None and not (self.when.search(text) or self.when.search(image)):
                return None
            m = _flag_re(self.flags).search(text)
            return (m["value"], f"{m['flag']}={m['value']}") if m else None
        if self.env is not None:
            value = env.get(self.env)
            return (value, f"{self.env}={value}") if value is not None else None
        if self.env_prefix is not None:
            names = sorted(n for n in env if n.startswith(self.env_prefix))
            return ("", f"{names[0]} is set") if names else None
        if self.field is None or controller is None or controller.get("kind") != self.kind:
            return None
        value = _dig(controller, self.field)
        return (str(value), f"{self.kind} {self.field}: {value}") if value is not None else None


@cache
def _flag_re(flags: tuple[str, ...]) -> re.Pattern[str]:
    alts = "|".join(re.escape(f) for f in sorted(flags, key=len, reverse=True))
    return re.compile(rf"(?:^|[\s\"'])(?P<flag>{alts})(?:=|\s+)[\"']?(?P<value>[^\s\"';&|]+)")


def _dig(obj: Mapping[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return cur


def _signal(entry: Any, where: str) -> Signal:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: not a mapping")
    for key in ("id", "launcher", "shrink", "source"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise ValueError(f"{where}: {key} must be a non-empty string")
    kinds = [k for k in ("flags", "env", "env_prefix", "field") if entry.get(k)]
    if len(kinds) != 1:
        raise ValueError(f"{where} ({entry['id']}): give one of flags, env, env_prefix, field")
    if entry.get("field") and not entry.get("kind"):
        raise ValueError(f"{where} ({entry['id']}): a field needs the controller's kind")
    when = entry.get("when")
    return Signal(
        id=entry["id"], launcher=entry["launcher"], shrink=" ".join(entry["shrink"].split()),
        source=entry["source"], flags=tuple(entry.get("flags") or ()),
        when=re.compile(when) if when else None, env=entry.get("env"),
        env_prefix=entry.get("env_prefix"), field=entry.get("field"), kind=entry.get("kind"),
        factor=bool(entry.get("factor")), adapts=frozenset(entry.get("adapts") or ()),
        pins=bool(entry.get("pins")))


@cache
def signals() -> tuple[Signal, ...]:
    """Every signal of ``parallelism.yaml``, in its order, its examples checked."""
    doc = load_yaml(_DATA)
    out = tuple(_signal(e, f"parallelism.yaml signal {i}") for i, e in enumerate(doc["signals"]))
    if len({s.id for s in out}) != len(out):
        raise ValueError("parallelism.yaml: a signal id is listed twice")
    for i, entry in enumerate(doc["signals"]):
        for ex in entry.get("examples") or []:
            _check(out, ex, f"parallelism.yaml signal {i} ({entry['id']})")
    return out


def _check(sigs: tuple[Signal, ...], ex: Mapping[str, Any], where: str) -> None:
    container = {"name": "example", "image": ex.get("image", ""),
                 "command": [ex["command"]] if "command" in ex else [],
                 "env": [{"name": k, "value": str(v)} for k, v in (ex.get("env") or {}).items()]}
    controller: dict[str, Any] | None = None
    for path, value in (ex.get("field") or {}).items():
        kind = next(s.kind for s in sigs if s.field == path)
        controller = {"kind": kind}
        cur = controller
        *parents, last = path.split(".")
        for part in parents:
            cur = cur.setdefault(part, {})
        cur[last] = value
    got = _read(sigs, container, 99, "nvidia.com/gpu", controller).gpus
    want = {"adapts": None, "asks": 99}.get(str(ex["gpus"]), ex["gpus"])
    if got != want:
        raise ValueError(f"{where}: example {dict(ex)} reads {got}, expected {ex['gpus']}")


def parallelism(container: Mapping[str, Any], asks: int, resource: str,
                controller: Mapping[str, Any] | None = None) -> Parallelism:
    """What GPUs per pod the container's workload needs (see the module docstring)."""
    return _read(signals(), container, asks, resource, controller)


def _read(sigs: Sequence[Signal], container: Mapping[str, Any], asks: int, resource: str,
          controller: Mapping[str, Any] | None) -> Parallelism:
    text = " ".join(str(a) for a in [*(container.get("command") or []),
                                     *(container.get("args") or [])])
    image = str(container.get("image") or "")
    env = {str(e.get("name")): str(e["value"]) for e in container.get("env") or []
           if isinstance(e, Mapping) and "value" in e}
    name = container.get("name") or "?"
    launchers = list(dict.fromkeys(s.launcher for s in sigs))
    for launcher in launchers:
        hits: list[tuple[Signal, str, str]] = []
        for sig in sigs:
            got = sig.read(text, image, env, controller) if sig.launcher == launcher else None
            if got is not None:
                hits.append((sig, *got))
        if not hits:
            continue
        first, _, shown = hits[0]
        if first.pins:
            return Parallelism(asks, f"{shown} in container {name}: the job's ranks are fixed "
                               "when it starts", first.shrink)
        counts: list[tuple[Signal, int, str]] = []
        for sig, value, seen in hits:
            if value.lower() in sig.adapts:
                return Parallelism(None, f"{launcher} {seen} in container {name} starts one "
                                   "process per GPU it is given", _ADAPTS_SHRINK)
            if value.isdigit() and int(value) > 0:
                counts.append((sig, int(value), seen))
        if not counts:
            continue  # a shell variable or the like: not readable here
        used = [c for c in counts if c[0].factor] or counts[:1]
        first, _, shown = used[0]
        return Parallelism(math.prod(n for _, n, _ in used),
                           f"{launcher} " + " ".join(seen for _, _, seen in used)
                           + f" in container {name}",
                           first.shrink.replace("{flag}", shown.split("=", 1)[0]))
    return Parallelism(asks, f"container {name} asks {asks} {resource} and nothing in its spec "
                       "says it runs on fewer", _DEFAULT_SHRINK)
