"""URL paths to resources: ``/api/v1/namespaces/ns/pods/name/log`` and friends."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .resources import Registry, ResourceType

TRUE = ("1", "true", "True")


@dataclass
class Route:
    rtype: ResourceType
    namespace: str | None  # None: all namespaces, or a cluster-scoped resource
    name: str | None
    sub: str | None
    legacy_watch: bool = False

    def verb(self, method: str, query: Mapping[str, str]) -> str:
        if method == "GET":
            if self.name is None:
                return "watch" if self.legacy_watch or query.get("watch") in TRUE else "list"
            return "watch" if self.legacy_watch else "get"
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        if method == "PATCH":
            return "patch"
        if method == "DELETE":
            return "delete" if self.name is not None else "deletecollection"
        return method.lower()


def route(registry: Registry, path: str) -> Route | None:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    legacy = bool(rest) and rest[0] == "watch"
    if legacy:
        rest = rest[1:]
    if not rest:
        return None
    ns: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and registry.lookup(group, version,
                                                                        rest[2]):
        ns, rest = rest[1], rest[2:]
    rt = registry.lookup(group, version, rest[0])
    if rt is None or len(rest) > 3:
        return None
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if ns is not None and not rt.namespaced:
        return None
    if rt.namespaced and ns is None and name is not None:
        return None
    if sub is not None:
        allowed = {s for s, _, _ in rt.extra_subresources}
        if rt.status_subresource:
            allowed.add("status")
        if sub not in allowed:
            return None
    return Route(rt, ns, name, sub, legacy)
