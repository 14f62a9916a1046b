"""A node's kubelet resource-manager policies, from wherever the snapshot or cluster holds them.

Most exact first:

1. The node's ``/configz`` (``kubectl get --raw /api/v1/nodes/NODE/proxy/configz``): what its
   kubelet runs, flags and config file merged. A snapshot carries it as a file
   (docs/snapshot-format.md: ``configz/NODE.json``); a live read would need
   ``nodes/proxy``, which gpubot is not granted (it reaches every kubelet API).
2. The node's NodeResourceTopology, whose ``attributes`` (v1alpha2; ``topologyPolicies`` in
   v1alpha1) carry the Topology Manager's policy and scope as its node agent read them from
   the kubelet: those two fields only.
3. kubeadm's ConfigMap ``kube-system/kubelet-config`` (kubeadm 1.24+; before,
   ``kubelet-config-1.<minor>``), key ``kubelet``: the KubeletConfiguration kubeadm gave the
   nodes when they joined. A node's own flags or config file may differ, so it is said as the
   cluster's default, not as the node's.

Fields read (KubeletConfiguration v1beta1, defaults when absent): ``topologyManagerPolicy``
(``none``), ``topologyManagerScope`` (``container``), ``topologyManagerPolicyOptions``,
``cpuManagerPolicy`` (``none``), ``cpuManagerPolicyOptions``, ``memoryManagerPolicy``
(``None``), ``reservedSystemCPUs``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from handlers.gpu import name_of
from handlers.numa import topologies
from handlers.view import Obj, Reader

NAMESPACE = "kube-system"
CONFIGMAP = "kubelet-config"
KEY = "kubelet"
# Only these refuse a pod the Topology Manager cannot align; best-effort and none admit it.
REFUSING_POLICIES = ("restricted", "single-numa-node")
_DEFAULTS = {"topologyManagerPolicy": "none", "topologyManagerScope": "container",
             "cpuManagerPolicy": "none", "memoryManagerPolicy": "None"}
_SHOWN = ("topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions",
          "cpuManagerPolicy", "cpuManagerPolicyOptions", "memoryManagerPolicy",
          "reservedSystemCPUs")
_MINOR = re.compile(r"^v?1\.(\d+)")
_UNVERSIONED_SINCE = 24  # kubeadm's UnversionedKubeletConfigMap, on by default
# NodeResourceTopology v1alpha1's topologyPolicies: (policy, scope).
_NRT_POLICIES = {
    "SingleNUMANodeContainerLevel": ("single-numa-node", "container"),
    "SingleNUMANodePodLevel": ("single-numa-node", "pod"),
    "RestrictedContainerLevel": ("restricted", "container"),
    "RestrictedPodLevel": ("restricted", "pod"),
    "BestEffortContainerLevel": ("best-effort", "container"),
    "BestEffortPodLevel": ("best-effort", "pod"),
    "None": ("none", "container"),
}


@dataclass(frozen=True)
class KubeletConfig:
    """A KubeletConfiguration as read, and where from. ``per_node``: the node's own
    (configz), else the cluster's default (kubeadm's ConfigMap)."""

    values: Mapping[str, Any]
    source: str
    per_node: bool
    # The fields the source speaks of: others are unknown, not their defaults.
    fields: tuple[str, ...] = _SHOWN

    def get(self, name: str) -> Any:
        return self.values.get(name, _DEFAULTS.get(name))

    @property
    def topology_policy(self) -> str:
        return str(self.get("topologyManagerPolicy"))

    @property
    def topology_scope(self) -> str:
        return str(self.get("topologyManagerScope"))

    @property
    def cpu_policy(self) -> str:
        return str(self.get("cpuManagerPolicy"))

    @property
    def memory_policy(self) -> str:
        return str(self.get("memoryManagerPolicy"))

    @property
    def refuses(self) -> bool:
        """Its Topology Manager refuses pods it cannot align."""
        return self.topology_policy in REFUSING_POLICIES

    def evidence(self) -> list[str]:
        """``field: value`` for each policy field, set or defaulted, naming the source."""
        out = []
        for name in self.fields:
            if name in self.values:
                out.append(f"{name}: {_text(self.values[name])}")
            elif name in _DEFAULTS:
                out.append(f"{name}: {_DEFAULTS[name]} (not set: the default)")
        return [f"{self.source}: " + "; ".join(out)]


@dataclass
class Reading:
    """What could be read about a node's kubelet config, and what not (said to the user)."""

    config: KubeletConfig | None
    not_checked: list[str] = field(default_factory=list)


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)


def _configz(reader: Reader, node: str) -> tuple[Obj, str] | None:
    """The node's /configz, when the view holds one (a snapshot carrying it)."""
    get: Callable[[str], tuple[Obj, str] | None] | None = getattr(
        reader.view, "kubelet_configz", None)
    return get(node) if callable(get) else None


def _configmap_names(node: Obj) -> list[str]:
    """kubeadm's name for the kubelet's ConfigMap, and before 1.24 its versioned one (read
    only for such kubelets: gpubot's RBAC grants the unversioned name alone)."""
    version = str(((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or "")
    m = _MINOR.match(version)
    old = m is not None and int(m.group(1)) < _UNVERSIONED_SINCE
    return [CONFIGMAP] + ([f"{CONFIGMAP}-1.{m.group(1)}"] if m and old else [])


def _parse(text: str) -> Mapping[str, Any] | None:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return doc if isinstance(doc, Mapping) else None


def _from_topology(nrt: Obj) -> dict[str, str]:
    """The Topology Manager's policy and scope a NodeResourceTopology names, if any."""
    attrs = {str(a.get("name")): str(a.get("value")) for a in nrt.get("attributes") or ()
             if isinstance(a, Mapping)}
    out: dict[str, str] = {k: attrs[k] for k in ("topologyManagerPolicy", "topologyManagerScope")
                           if k in attrs}
    for legacy in nrt.get("topologyPolicies") or ():
        if not out and legacy in _NRT_POLICIES:
            out = dict(zip(("topologyManagerPolicy", "topologyManagerScope"),
                           _NRT_POLICIES[legacy], strict=True))
    return out


def read(reader: Reader, node: Obj) -> Reading:
    """The node's kubelet config: its configz, else its NodeResourceTopology's attributes,
    else kubeadm's ConfigMap, else what was not checked and why."""
    name = name_of(node)
    found = _configz(reader, name)
    if found is not None:
        values, path = found
        return Reading(KubeletConfig(values, f"configz of node {name} ({path})", True))
    nrt = topologies(reader).get(name)
    from_nrt = _from_topology(nrt) if nrt is not None else None
    if from_nrt:
        return Reading(KubeletConfig(from_nrt, f"NodeResourceTopology {name} (published by its "
                                     "node agent)", True, tuple(from_nrt)))
    for cm_name in _configmap_names(node):
        cm = reader.get("ConfigMap", cm_name, NAMESPACE)
        if cm is None:
            if not reader.readable("ConfigMap"):
                break
            continue
        text = (cm.get("data") or {}).get(KEY)
        parsed = _parse(str(text)) if text is not None else None
        label = f"configmap {NAMESPACE}/{cm_name}"
        if parsed is None:
            return Reading(None, [f"the kubelet's policies on {name}: {label} has no "
                                  f"KubeletConfiguration under key {KEY!r}"])
        return Reading(KubeletConfig(parsed, f"{label} (key {KEY}, kubeadm's default for "
                                             "every node)", False))
    why = ("ConfigMaps could not be read" if not reader.readable("ConfigMap")
           else f"no configmap {NAMESPACE}/{CONFIGMAP}")
    return Reading(None, [
        f"the kubelet's topologyManagerPolicy, topologyManagerScope and cpuManagerPolicy on "
        f"{name}: not checked (no configz or NodeResourceTopology of the node in the data, "
        f"{why}); read them with "
        f"kubectl get --raw /api/v1/nodes/{name}/proxy/configz"])
