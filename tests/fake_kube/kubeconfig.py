"""One kubeconfig for several fake API servers: a context per server (a fleet in tests).

    write_kubeconfig_many(tmp / "kubeconfig", {"train": fk1, "lab": fk2,
                                               "down": "http://127.0.0.1:9"})

A URL in place of a server makes a context for an address where nothing answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .server import FakeKube


def write_kubeconfig_many(path: str | Path, servers: Mapping[str, FakeKube | str],
                          namespace: str = "default") -> Path:
    """A kubeconfig with one context (and cluster and user) per entry; the first is the
    current context."""
    if not servers:
        raise ValueError("no servers")
    clusters: list[dict[str, Any]] = []
    users: list[dict[str, Any]] = []
    contexts: list[dict[str, Any]] = []
    for name, server in servers.items():
        url = server if isinstance(server, str) else server.url
        token = None if isinstance(server, str) else server.token
        clusters.append({"name": name, "cluster": {"server": url}})
        users.append({"name": name, "user": {"token": token} if token else {}})
        contexts.append({"name": name, "context": {"cluster": name, "user": name,
                                                   "namespace": namespace}})
    config = {"apiVersion": "v1", "kind": "Config", "preferences": {}, "clusters": clusters,
              "users": users, "contexts": contexts, "current-context": next(iter(servers))}
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    return out
