"""How many physical GPUs a node has, as data (``gpu_counts.yaml``, format in its header).

    counts().labels: the count labels (GFD, Karpenter, GKE), in the file's order
    instance_type_gpus(name): an instance type's GPUs, provider family and source, or None

Every entry names its public source; a malformed entry fails at first use with the entry named.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from handlers.knowledge import load_yaml

DATA = Path(__file__).with_name("gpu_counts.yaml")


@dataclass(frozen=True)
class CountLabel:
    key: str
    id: str
    machine: bool  # the machine type's count, not what the driver saw
    requires: str | None
    source: str


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpus: int
    family: str  # "AWS P4d / P4de (A100)"
    source: str


@dataclass(frozen=True)
class Counts:
    labels: tuple[CountLabel, ...]
    instance_type_keys: tuple[str, ...]
    instance_types: Mapping[str, InstanceType]  # by lowercased name


def _str(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: '{key}' must be a non-empty string")
    return value


def _source(raw: Mapping[str, Any], where: str) -> str:
    url = _str(raw, "source", where)
    if not url.startswith("https://"):
        raise ValueError(f"{where}: source must be an https URL")
    return url


def _parse(doc: Any) -> Counts:
    if not isinstance(doc, dict):
        raise ValueError("gpu_counts.yaml: not a mapping")
    labels = []
    for i, raw in enumerate(doc.get("labels") or []):
        where = f"gpu_counts.yaml labels[{i}]"
        if not isinstance(raw.get("machine"), bool):
            raise ValueError(f"{where}: 'machine' must be true or false")
        labels.append(CountLabel(_str(raw, "key", where), _str(raw, "id", where),
                                 raw["machine"], raw.get("requires"), _source(raw, where)))
    keys = []
    for i, raw in enumerate(doc.get("instance_type_labels") or []):
        where = f"gpu_counts.yaml instance_type_labels[{i}]"
        _source(raw, where)
        keys.append(_str(raw, "key", where))
    types: dict[str, InstanceType] = {}
    for i, raw in enumerate(doc.get("instance_types") or []):
        where = f"gpu_counts.yaml instance_types[{i}]"
        family = f"{_str(raw, 'provider', where)} {_str(raw, 'family', where)}"
        source = _source(raw, where)
        gpus = raw.get("gpus")
        if not isinstance(gpus, dict) or not gpus:
            raise ValueError(f"{where} ({family}): 'gpus' must map instance types to counts")
        for name, n in gpus.items():
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"{where} ({family}): {name}: a GPU count must be >= 1")
            if str(name).lower() in types:
                raise ValueError(f"{where} ({family}): {name} is listed twice")
            types[str(name).lower()] = InstanceType(str(name), n, family, source)
    return Counts(tuple(labels), tuple(keys), types)


@cache
def counts() -> Counts:
    return _parse(load_yaml(DATA))


def instance_type_gpus(name: str) -> InstanceType | None:
    return counts().instance_types.get(name.lower())
