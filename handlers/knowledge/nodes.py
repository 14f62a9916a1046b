"""GPU nodes and device-plugin pods as data (``gpu_nodes.yaml``, ``device_plugins.yaml``).

``gpu_label_evidence(labels)`` says which labels mark a node as meant to have NVIDIA GPUs
(``key=value`` strings, empty when none do); ``plugin_evidence(pod)`` says why a pod is a
device plugin (the label, image or hostPath mount), or None. Both files name the public
source of every entry; a malformed entry fails at import with the entry named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from handlers.knowledge import load_yaml

_HERE = Path(__file__).parent
_ABSENT = (None, "", "false", "0")


@dataclass(frozen=True)
class LabelRule:
    key: str
    match: re.Pattern[str] | None  # None: any value but "", "false", "0"
    source: str

    def hit(self, value: str | None) -> bool:
        if value in _ABSENT:
            return False
        return self.match is None or bool(self.match.fullmatch(str(value)))


@dataclass(frozen=True)
class NodeKnowledge:
    labels: tuple[LabelRule, ...]
    instance_type_keys: tuple[str, ...]
    instance_types: tuple[tuple[str, re.Pattern[str]], ...]  # (provider, family pattern)
    pool_keys: tuple[str, ...]
    pool_match: re.Pattern[str]

    @property
    def label_keys(self) -> tuple[str, ...]:
        return tuple(r.key for r in self.labels)


@dataclass(frozen=True)
class PluginKnowledge:
    labels: tuple[tuple[str, str], ...]  # (key, value)
    images: tuple[re.Pattern[str], ...]
    name_prefixes: tuple[str, ...]
    hostpath: str
    gpu_hint: re.Pattern[str]
    not_plugin_markers: tuple[str, ...]

    def selectors(self) -> tuple[str, ...]:
        """Label selectors that list the labelled layouts: one ``key in (...)`` per key."""
        by_key: dict[str, list[str]] = {}
        for key, value in self.labels:
            by_key.setdefault(key, []).append(value)
        return tuple(f"{k} in ({','.join(v)})" for k, v in by_key.items())


def _load(name: str) -> dict[str, Any]:
    data = load_yaml(_HERE / name)
    if not isinstance(data, dict):
        raise ValueError(f"{name}: not a mapping")
    return data


def _str(entry: Mapping[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: {key} must be a non-empty string")
    return value


def _regex(text: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error as err:
        raise ValueError(f"{where}: bad pattern {text!r}: {err}") from err


@cache
def node_knowledge() -> NodeKnowledge:
    data = _load("gpu_nodes.yaml")
    rules = []
    for i, e in enumerate(data.get("labels") or []):
        where = f"gpu_nodes.yaml labels[{i}]"
        key, match = _str(e, "key", where), _str(e, "match", where)
        _str(e, "source", f"{where} ({key})")
        rules.append(LabelRule(key, None if match == "present" else _regex(match, where),
                               e["source"]))
    types = []
    for i, e in enumerate(data.get("instance_types") or []):
        where = f"gpu_nodes.yaml instance_types[{i}]"
        _str(e, "source", where)
        types.append((_str(e, "provider", where), _regex(_str(e, "match", where), where)))
    keys = [_str(e, "key", f"gpu_nodes.yaml instance_type_labels[{i}]")
            for i, e in enumerate(data.get("instance_type_labels") or [])]
    pools = data.get("pools") or {}
    pool_keys = [_str(e, "key", f"gpu_nodes.yaml pools.labels[{i}]")
                 for i, e in enumerate(pools.get("labels") or [])]
    return NodeKnowledge(tuple(rules), tuple(keys), tuple(types), tuple(pool_keys),
                         _regex(_str(pools, "match", "gpu_nodes.yaml pools"), "pools"))


@cache
def plugin_knowledge() -> PluginKnowledge:
    data = _load("device_plugins.yaml")
    labels = []
    for i, e in enumerate(data.get("labels") or []):
        where = f"device_plugins.yaml labels[{i}]"
        _str(e, "source", where)
        labels.append((_str(e, "key", where), _str(e, "value", where)))
    images = []
    for i, e in enumerate(data.get("images") or []):
        where = f"device_plugins.yaml images[{i}]"
        _str(e, "source", where)
        images.append(_regex(_str(e, "match", where), where))
    hp = data.get("hostpath") or {}
    not_plugins = data.get("not_plugins") or {}
    markers = not_plugins.get("name_markers") or []
    prefixes = data.get("name_prefixes") or []
    for what, items in (("not_plugins.name_markers", markers), ("name_prefixes", prefixes)):
        if not all(isinstance(m, str) and m for m in items):
            raise ValueError(f"device_plugins.yaml {what}: non-empty strings only")
    return PluginKnowledge(tuple(labels), tuple(images), tuple(prefixes),
                           _str(hp, "path", "hostpath"),
                           _regex(_str(hp, "gpu_hint", "hostpath"), "hostpath"),
                           tuple(markers))


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def gpu_label_evidence(node: Mapping[str, Any]) -> list[str]:
    """The labels saying the node is meant to have NVIDIA GPUs, as ``key=value``."""
    k = node_knowledge()
    lab = _labels(node)
    out = [f"{r.key}={lab[r.key]}" for r in k.labels if r.key in lab and r.hit(lab[r.key])]
    for key in k.instance_type_keys:
        value = str(lab.get(key) or "")
        if value and any(p.match(value) for _, p in k.instance_types):
            out.append(f"{key}={value}")
            break  # the GA and beta labels say the same thing
    out += [f"{key}={lab[key]}" for key in k.pool_keys
            if k.pool_match.search(str(lab.get(key) or ""))]
    return out


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = pod.get("spec") or {}
    return list(spec.get("containers") or []) + list(spec.get("initContainers") or [])


def plugin_evidence(pod: Mapping[str, Any]) -> str | None:
    """Why ``pod`` (or a DaemonSet's pod template) is an NVIDIA device plugin, or None."""
    k = plugin_knowledge()
    meta = pod.get("metadata") or {}
    name = str(meta.get("name") or meta.get("generateName") or "")
    if any(m in name for m in k.not_plugin_markers):
        return None
    lab = _labels(pod)
    for key, value in k.labels:
        if lab.get(key) == value:
            return f"label {key}={value}"
    for prefix in k.name_prefixes:
        if name.startswith(prefix):
            return f"name {name}"
    images = [str(c.get("image") or "") for c in _containers(pod)]
    for image in images:
        if any(p.search(image) for p in k.images):
            return f"image {image}"
    mounts_dir = any(
        str((v.get("hostPath") or {}).get("path") or "").rstrip("/") == k.hostpath
        for v in (pod.get("spec") or {}).get("volumes") or [])
    if mounts_dir and (k.gpu_hint.search(name) or any(k.gpu_hint.search(i) for i in images)):
        return f"hostPath {k.hostpath}"
    return None
