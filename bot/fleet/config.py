"""The clusters setting: which clusters one gpubot serves, and each channel's default.

    clusters:                       # the YAML config file (or GPUBOT_CLUSTERS, same YAML)
      - name: prod                  # what `/gpu -c prod` and `--cluster prod` name
        context: prod-admin         # a kubeconfig context (kubeconfig: FILE, optional)
        prometheus_url: http://prometheus.prod:9090
        store_namespace: gpubot
      - name: local
        in_cluster: true            # the service account of the pod gpubot runs in
    channel_clusters: "C012AB3CD=prod;#inference=local"

No ``clusters``: one cluster, from ``kubeconfig``/``context``/``snapshot``, as before.
Access per cluster: a channel map entry ``prod:ml-team`` (or ``prod:*``) holds in that
cluster only; a bare namespace holds in every cluster (``bot/slack/access.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import yaml

NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class ClusterConfig:
    """One cluster of the fleet: where to read it, and what is its own."""

    name: str
    context: str | None = None
    kubeconfig: str | None = None
    in_cluster: bool = False
    snapshot: str | None = None  # a snapshot served as a cluster (demos, tests)
    prometheus_url: str | None = None  # None: the top-level prometheus_url
    store_namespace: str | None = None  # None: the top-level store_namespace

    def source_settings(self) -> dict[str, Any]:
        """The single-cluster settings that open this cluster (``bot.serve.open_cluster``)."""
        return {"snapshot": self.snapshot, "kubeconfig": self.kubeconfig,
                "context": self.context}


_KEYS = {f.name for f in fields(ClusterConfig)}


def parse_clusters(value: Any) -> tuple[ClusterConfig, ...] | None:
    """A YAML list of mappings (or its text) -> clusters; None or empty: no fleet.
    Raises ValueError saying which entry is wrong."""
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ValueError(f"clusters is not YAML: {err}") from None
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise ValueError("clusters must be a list of {name, context | kubeconfig | "
                         "in_cluster | snapshot, prometheus_url, store_namespace}")
    out: list[ClusterConfig] = []
    for i, item in enumerate(value):
        out.append(_one(item, i))
    names = [c.name for c in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"clusters: {', '.join(dupes)} named twice")
    return tuple(out)


def _one(item: Any, i: int) -> ClusterConfig:
    if not isinstance(item, Mapping):
        raise ValueError(f"clusters[{i}] must be a mapping, got {type(item).__name__}")
    data = {str(k).replace("-", "_"): v for k, v in item.items()}
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ValueError(f"clusters[{i}]: unknown key {unknown[0]!r} "
                         f"(known: {', '.join(sorted(_KEYS))})")
    name = str(data.get("name") or "")
    if not NAME.match(name):
        raise ValueError(f"clusters[{i}]: name {name!r} must be lowercase letters, digits, "
                         "'-', '.' or '_' (as in `/gpu -c NAME`)")
    in_cluster = data.get("in_cluster", False)
    if not isinstance(in_cluster, bool):
        raise ValueError(f"clusters[{i}] ({name}): in_cluster must be true or false")
    strings = {k: data.get(k) for k in _KEYS - {"name", "in_cluster"}}
    for key, text in strings.items():
        if text is not None and not (isinstance(text, str) and text.strip()):
            raise ValueError(f"clusters[{i}] ({name}): {key} must be a non-empty string")
    config = ClusterConfig(name=name, in_cluster=in_cluster, **strings)
    sources = [k for k in ("snapshot", "in_cluster") if getattr(config, k)]
    if config.context or config.kubeconfig:
        sources.append("context/kubeconfig")
    if len(sources) != 1:
        raise ValueError(f"clusters[{i}] ({name}): give one of context (with kubeconfig if "
                         "not the default one), kubeconfig, in_cluster: true or snapshot")
    return config


def parse_channel_clusters(value: Any) -> dict[str, str] | None:
    """``"C1=prod;#ops=staging"`` or a mapping -> {channel: default cluster}."""
    if value is None or value == "" or value == {}:
        return None
    pairs: list[tuple[str, Any]]
    if isinstance(value, str):
        pairs = []
        for part in value.replace("\n", ";").split(";"):
            if part.strip():
                channel, sep, cluster = part.partition("=")
                if not sep:
                    raise ValueError(f"{part.strip()!r} is not CHANNEL=CLUSTER")
                pairs.append((channel, cluster))
    elif isinstance(value, Mapping):
        pairs = list(value.items())
    else:
        raise ValueError(f"expected CHANNEL=CLUSTER;... or a mapping, got "
                         f"{type(value).__name__}")
    out: dict[str, str] = {}
    for channel, cluster in pairs:
        name = str(cluster).strip()
        if not str(channel).strip() or not NAME.match(name):
            raise ValueError(f"{channel}={cluster}: give a channel and a cluster name")
        out[str(channel).strip()] = name
    return out or None


def check(clusters: tuple[ClusterConfig, ...] | None,
          channel_clusters: Mapping[str, str] | None,
          channel_namespaces: Mapping[str, frozenset[str]] | None) -> str | None:
    """What is inconsistent between the cluster settings, or None."""
    names = {c.name for c in clusters or ()}
    if not clusters:
        if channel_clusters:
            return "channel_clusters needs a clusters list"
        return None
    for channel, cluster in (channel_clusters or {}).items():
        if cluster not in names:
            return (f"channel_clusters: {channel} defaults to {cluster!r}, which is not in "
                    f"clusters ({', '.join(sorted(names))})")
    for channel, entries in (channel_namespaces or {}).items():
        for entry in entries:
            cluster, sep, _ = entry.partition(":")
            if sep and cluster not in names:
                return (f"channel_namespaces: {channel} names cluster {cluster!r}, which is "
                        f"not in clusters ({', '.join(sorted(names))})")
    return None
