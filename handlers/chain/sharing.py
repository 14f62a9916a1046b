"""GPU sharing configuration: the device plugin's time-slicing / MPS ConfigMap.

Where the config comes from (docs/design.md, detection conventions): the ConfigMap the
ClusterPolicy names in ``spec.devicePlugin.config.name`` (``.default`` names the key for
unlabelled nodes), or the ConfigMap a device-plugin DaemonSet mounts at
``/available-configs`` (standalone helm chart, ``DEFAULT_CONFIG`` env); without either, a
ConfigMap in the operator namespace whose values contain ``sharing:``. A node picks a key
with the label ``nvidia.com/device-plugin.config``; ``nvidia.com/gpu.replicas`` shows what
the plugin applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from handlers.chain.daemonsets import kind_was_read
from handlers.chain.placement import template_spec
from handlers.gpu import DEVICE_PLUGIN_CONFIG_LABEL, name_of, ns_of
from handlers.view import Reader

Obj = dict[str, Any]

REPLICAS_LABEL = "nvidia.com/gpu.replicas"
# The device plugin's time-slicing config, as its README shows it.
TIME_SLICING_DOCS = ("https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/"
                     "gpu-sharing.html")
TIME_SLICING_EXAMPLE = yaml.safe_dump({"version": "v1", "sharing": {"timeSlicing": {
    "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}, sort_keys=False)


@dataclass
class SharingConfig:
    source: str  # what names the ConfigMap, as evidence
    namespace: str
    name: str
    configmap: Obj | None = None
    checked: bool = True  # ConfigMaps were read at all
    default: str | None = None
    entries: dict[str, Obj] = field(default_factory=dict)  # key -> parsed config
    errors: dict[str, str] = field(default_factory=dict)  # key -> parse error
    named: bool = True  # named explicitly (ClusterPolicy/DaemonSet), not found by content

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.name}"

    def key_for(self, node_labels: dict[str, str]) -> tuple[str | None, str]:
        """The config key a node uses, and why (``label``/``default``/``single``)."""
        if node_labels.get(DEVICE_PLUGIN_CONFIG_LABEL):
            return node_labels[DEVICE_PLUGIN_CONFIG_LABEL], "label"
        if self.default:
            return self.default, "default"
        keys = list(self.entries) + list(self.errors)
        if len(keys) == 1:
            return keys[0], "single"
        return None, "none"


@dataclass
class Replicas:
    resource: str  # the resource name the shared GPUs are advertised under
    replicas: int
    strategy: str  # timeSlicing | mps


def replicas_of(config: Obj) -> list[Replicas]:
    sharing = config.get("sharing") if isinstance(config, dict) else None
    if not isinstance(sharing, dict):
        return []
    out = []
    for strategy in ("timeSlicing", "mps"):
        block = sharing.get(strategy)
        if not isinstance(block, dict):
            continue
        rename = bool(block.get("renameByDefault"))
        for r in block.get("resources") or []:
            if not isinstance(r, dict):
                continue
            try:
                n = int(r.get("replicas") or 0)
            except (TypeError, ValueError):
                continue
            name = str(r.get("name") or "nvidia.com/gpu")
            if n > 1:
                res = str(r.get("rename") or (f"{name}.shared" if rename else name))
                if "/" not in res:
                    res = f"nvidia.com/{res}"
                out.append(Replicas(res, n, strategy))
    return out


def _from_daemonsets(plugin_ds: list[Obj]) -> tuple[str, str, str, str | None] | None:
    for ds in plugin_ds:
        spec = template_spec(ds)
        cm_vols = {v.get("name"): (v.get("configMap") or {}).get("name")
                   for v in spec.get("volumes") or [] if v.get("configMap")}
        default = None
        mount_cm = None
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            for e in c.get("env") or []:
                if e.get("name") == "DEFAULT_CONFIG" and e.get("value"):
                    default = str(e["value"])
            for m in c.get("volumeMounts") or []:
                if m.get("mountPath") == "/available-configs" and cm_vols.get(m.get("name")):
                    mount_cm = str(cm_vols[m.get("name")])
        if mount_cm:
            src = (f"daemonset {ns_of(ds)}/{name_of(ds)} mounts configmap {mount_cm} at "
                   "/available-configs")
            return src, ns_of(ds), mount_cm, default
    return None


def _parse(cfg: SharingConfig) -> None:
    data = (cfg.configmap or {}).get("data") or {}
    for key, text in data.items():
        try:
            parsed = yaml.safe_load(text) if isinstance(text, str) else text
        except yaml.YAMLError as err:
            cfg.errors[str(key)] = " ".join(str(err).split())
            continue
        if not isinstance(parsed, dict):
            cfg.errors[str(key)] = f"not a YAML mapping (got {type(parsed).__name__})"
            continue
        cfg.entries[str(key)] = parsed


def find_sharing_config(reader: Reader, cluster_policies: list[Obj], plugin_ds: list[Obj],
                        operator_ns: str | None) -> SharingConfig | None:
    cfg: SharingConfig | None = None
    for cp in cluster_policies:
        dp = (cp.get("spec") or {}).get("devicePlugin") or {}
        conf = dp.get("config") or {}
        if conf.get("name"):
            ns = operator_ns or "gpu-operator"
            cfg = SharingConfig(
                f"clusterpolicy {name_of(cp)}: spec.devicePlugin.config.name={conf['name']}",
                ns, str(conf["name"]), default=str(conf.get("default") or "") or None)
            break
    if cfg is None:
        found = _from_daemonsets(plugin_ds)
        if found:
            src, ns, name, default = found
            cfg = SharingConfig(src, ns, name, default=default)
    if cfg is not None:
        cms = reader.list("ConfigMap", cfg.namespace)
        cfg.checked = kind_was_read(reader, "ConfigMap", cms)
        cfg.configmap = next((c for c in cms if name_of(c) == cfg.name), None)
        if cfg.configmap is None and cfg.checked:
            # The configmap might have been read without its namespace in a partial dump.
            cfg.configmap = reader.get("ConfigMap", cfg.name, cfg.namespace)
        _parse(cfg)
        return cfg
    if not operator_ns:
        return None
    for cm in reader.list("ConfigMap", operator_ns):
        values = (cm.get("data") or {}).values()
        if any(isinstance(v, str) and "sharing:" in v for v in values):
            cfg = SharingConfig(f"configmap {operator_ns}/{name_of(cm)} (holds a sharing: "
                                "config)", operator_ns, name_of(cm), configmap=cm, named=False)
            _parse(cfg)
            return cfg
    return None
