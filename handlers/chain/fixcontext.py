"""What the cluster's own setup says about a fix before gpubot offers it.

- A ClusterPolicy setting is offered only for a component the GPU operator manages on that
  node: the operator is installed (a ClusterPolicy exists), the component is not disabled
  (``spec.<component>.enabled: false``) and, for the driver, the node is not labelled
  ``nvidia.com/gpu.deploy.driver=pre-installed`` or ``=false`` (the operator labels a node
  ``pre-installed`` when it finds a host driver and then leaves it alone; ``false`` opts a
  node out: https://github.com/NVIDIA/gpu-operator/blob/main/controllers/state_manager.go).
- Versions come from the data: a driver version another node of the cluster runs, the
  ClusterPolicy's current version, a device-plugin image a running pod uses; never a
  version the cluster has not shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from handlers.gpu import driver_version, gpu_traits, labels, name_of
from handlers.memo import LastFor, Memos
from handlers.view import Obj

DEPLOY_DRIVER_LABEL = "nvidia.com/gpu.deploy.driver"


@dataclass(frozen=True)
class Managed:
    """Whether the operator manages a component on a node, and how we know."""

    yes: bool
    why: str  # "ClusterPolicy cluster-policy spec.driver" or why not
    policy: str = ""  # the ClusterPolicy's name
    version: str = ""  # its spec.<component>.version, when set
    known: bool = True  # False: ClusterPolicies could not be read (not checked)


def _spec(policy: Obj, component: str) -> dict[str, Any]:
    return ((policy.get("spec") or {}).get(component)) or {}


def manages(policies: list[Obj], component: str, node: Obj | None = None, *,
            readable: bool = True) -> Managed:
    """``component``: the ClusterPolicy spec key (driver, devicePlugin, toolkit, ...)."""
    if not policies and not readable:
        return Managed(False, "ClusterPolicy not checked (not in the data)", known=False)
    if not policies:
        return Managed(False, "no ClusterPolicy: the GPU operator does not manage the "
                       f"{component}")
    policy = policies[0]
    pname = name_of(policy)
    spec = _spec(policy, component)
    if spec.get("enabled") is False:
        return Managed(False, f"ClusterPolicy {pname} has spec.{component}.enabled=false",
                       pname)
    if component == "driver" and node is not None:
        v = labels(node).get(DEPLOY_DRIVER_LABEL)
        if v in ("pre-installed", "false"):
            return Managed(False, f"node {name_of(node)} has {DEPLOY_DRIVER_LABEL}={v}: the "
                           "driver is installed on the host, not by the operator", pname)
    return Managed(True, f"ClusterPolicy {pname} spec.{component}", pname,
                   str(spec.get("version") or ""))


def _version_key(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


@dataclass(frozen=True)
class NewerDriver:
    node: str
    driver: str  # full version as labelled
    major: str
    cuda: str


@dataclass(frozen=True)
class Setup:
    """The node's GPU setup as read, so that a fix names only what works here."""

    driver: Managed = field(default_factory=lambda: Managed(True, "unknown"))
    plugin: Managed = field(default_factory=lambda: Managed(True, "unknown"))
    newer: NewerDriver | None = None  # a newer driver another node runs
    plugin_image: str = ""  # a device-plugin image a Ready plugin pod runs
    os_image: str = ""  # the node's status.nodeInfo.osImage


@dataclass
class ClusterSetup:
    """Read once per chain run: the policies, who owns the plugin, the drivers in use."""

    policies: list[Obj]
    readable: bool  # ClusterPolicies could be read
    plugin: Managed
    drivers: Sequence[_Driver]  # newest first
    plugin_image: str

    @classmethod
    def read(cls, policies: list[Obj], readable: bool, plugin_daemonsets: list[Obj],
             nodes: list[Obj], plugin_pods: list[Obj]) -> ClusterSetup:
        return cls(policies, readable, _plugin_managed(policies, readable, plugin_daemonsets),
                   newest_drivers(nodes), _ready_image(plugin_pods))

    def for_node(self, node: Obj) -> Setup:
        mine = driver_version(node)
        key = _version_key(mine) if mine else None
        newer = next((NewerDriver(n, v, v.split(".")[0], c) for k, v, n, c in self.drivers
                      if n != name_of(node) and (key is None or k > key)), None)
        os_image = str(((node.get("status") or {}).get("nodeInfo") or {}).get("osImage") or "")
        return Setup(manages(self.policies, "driver", node, readable=self.readable),
                     self.plugin, newer,
                     self.plugin_image, os_image)


_Driver = tuple[tuple[int, ...], str, str, str]  # (version key, version, node, cuda)


def _drivers(nodes: Sequence[Obj], memos: Memos | None) -> tuple[_Driver, ...]:
    return tuple(sorted(((_version_key(t.driver), t.driver, t.name, t.cuda or "")
                         for t in (gpu_traits(n, memos) for n in nodes) if t.driver),
                        reverse=True))


newest_drivers = LastFor(_drivers)  # the nodes rarely change between two diagnoses


def _plugin_managed(policies: list[Obj], readable: bool, daemonsets: list[Obj]) -> Managed:
    m = manages(policies, "devicePlugin", readable=readable)
    if not m.yes or not daemonsets:
        return m
    for ds in daemonsets:
        owners = (ds.get("metadata") or {}).get("ownerReferences") or []
        if any(o.get("kind") == "ClusterPolicy" for o in owners) \
                or name_of(ds) == "nvidia-device-plugin-daemonset":
            return m
    names = ", ".join(name_of(ds) for ds in daemonsets[:3])
    return Managed(False, f"the device-plugin DaemonSet {names} is not the operator's (no "
                   "ClusterPolicy owner): it was installed on its own, e.g. by Helm", m.policy)


def _ready_image(pods: list[Obj]) -> str:
    for p in pods:
        for cs in (p.get("status") or {}).get("containerStatuses") or []:
            if cs.get("ready") and cs.get("image"):
                return str(cs["image"])
    return ""


# Names the GPU operator gives its DaemonSets (and so their pods' name prefixes).
OPERATOR_NAMES = ("nvidia-device-plugin-daemonset", "nvidia-driver-daemonset",
                  "nvidia-container-toolkit-daemonset", "nvidia-operator-validator",
                  "gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-mig-manager")


def operator_seen(daemonsets: list[Obj], pods: list[Obj]) -> bool:
    """GPU operator components run (by their names), whatever the data says of ClusterPolicy."""
    return any(name_of(o).startswith(OPERATOR_NAMES) for o in [*daemonsets, *pods])
