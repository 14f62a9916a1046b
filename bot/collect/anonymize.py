"""``gpubot snapshot --anonymize``: a snapshot fit to leave the company.

Names are replaced, consistently: one original string gets one pseudonym wherever it stands
(metadata, labels, selectors, ownerReferences, nodeName, claim and volume references, event
messages, log lines, image paths), so every relation a diagnosis follows still holds.
Replaced: node names and their addresses and hostnames (``node-3``, ``192.0.2.7``),
namespaces (``ns-2``), the names of every object in a workload namespace (``pod-12``,
``deployment-4``), service accounts and e-mail addresses (``user-1``), and every other IPv4
address. Kept, because diagnoses match on them and they carry no one's data: the system
namespaces (``kube-system``, ``*-system``, ``default``) and those running the GPU stack with
their objects' names (``nvidia-device-plugin-daemonset-x7k2p``: plugins are found by name),
cluster-level configuration (PriorityClasses, RuntimeClasses, queues, DeviceClasses), label
keys and the values that are not names (GFD/NFD labels, instance types, pools), taints,
resources, conditions, images, versions.

Dropped: environment values (but those diagnoses read: the GPU stack's own, NVIDIA_/CUDA_
and the parallelism variables of ``handlers/knowledge/parallelism.yaml``), every reference
to a Secret (``secretKeyRef``, ``envFrom`` secrets, secret volumes' names,
``imagePullSecrets``), annotations other than the few diagnoses read (a
``last-applied-configuration`` holds the whole spec, env included), values of
password/token/key flags in commands, node provider IDs, pod CIDRs, machine IDs and pod IPs.
What stays readable is said in the README (Snapshots): container logs are text of the
workload's own and can hold anything the names above do not cover.
"""

from __future__ import annotations

import copy
import ipaddress
import re
from collections.abc import Iterable
from typing import Any

from bot.live.kinds import KINDS
from handlers.knowledge.parallelism import signals
from handlers.view import CLUSTER_SCOPED, Obj

from . import plan

SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease", "default"})
# Annotations a diagnosis reads (their values are names, which are replaced like any other).
KEEP_ANNOTATIONS = frozenset({
    "deployment.kubernetes.io/revision", "kubernetes.io/limit-ranger",
    "resource.kubernetes.io/pod-claim-name", "kueue.x-k8s.io/queue-name",
    "scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name",
    "scheduling.volcano.sh/queue-name",
})
KEEP_ANNOTATION_PREFIXES = ("gpubot.io/",)
ENV_KEEP_PREFIXES = ("NVIDIA_", "CUDA_")
# Words that name Kubernetes and GPU things: an object named so keeps its name, or every
# "gpu" in every message would be rewritten.
VOCABULARY = frozenset({
    "gpu", "gpus", "nvidia", "cuda", "node", "nodes", "pod", "pods", "default", "true",
    "false", "none", "all", "kube", "system", "cpu", "memory", "plugin", "driver", "operator",
})
_SECRET_FLAG = re.compile(r"(?i)^(--?[\w.-]*(?:pass(?:word|wd)?|secret|token|api[-_]?key|"
                          r"access[-_]?key|credential|auth)[\w.-]*)(=.*)?$")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_USER_QUOTED = re.compile(r'(?i)(\buser ")([^"]+)(")')
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_KEPT_IPS = frozenset({"0.0.0.0", "127.0.0.1", "255.255.255.255"})
_IP_RANGES = ("192.0.2.", "198.51.100.", "203.0.113.")  # RFC 5737: documentation only
_REDACTED = "REDACTED"


class Anonymizer:
    """Built from every object of a capture, so that each name gets its pseudonym before
    any text is rewritten."""

    def __init__(self, objects: dict[str, list[Obj]]) -> None:
        self.names: dict[str, str] = {}  # original -> pseudonym
        self._counts: dict[str, int] = {}
        self._ips = 0
        self._originals = {plan.ns_name(o)[1] for os in objects.values() for o in os}
        self.env_keep = {s.env for s in signals() if s.env}
        self.env_keep_prefixes = ENV_KEEP_PREFIXES + tuple(
            s.env_prefix for s in signals() if s.env_prefix)
        infra = set(SYSTEM_NAMESPACES) | plan.stack_namespaces(objects)
        infra |= {n for n in (plan.ns_name(o)[1] for o in objects.get("Namespace", []))
                  if n.endswith("-system")}
        self.infra = infra
        self.renamed = {"namespaces": 0, "nodes": 0, "objects": 0, "users": 0}
        for name in sorted(plan.ns_name(o)[1] for o in objects.get("Node", [])):
            self._name(name, "node", "nodes")
        for node in objects.get("Node", []):
            self._addresses(node)
        namespaces = {plan.ns_name(o)[1] for o in objects.get("Namespace", [])}
        namespaces |= {plan.ns_name(o)[0] for os in objects.values() for o in os}
        for ns in sorted(namespaces - infra - {""}):
            self._name(ns, "ns", "namespaces")
        for kind in sorted(objects):
            for obj in sorted(objects[kind], key=plan.ns_name):
                self._object_name(kind, obj)

    # -- pseudonyms ---------------------------------------------------------------------

    def _name(self, original: str, prefix: str, tally: str) -> str:
        if not original or original in VOCABULARY or len(original) < 2:
            return original
        if original not in self.names:
            n = self._counts.get(prefix, 0)
            while True:
                n += 1
                pseudo = f"{prefix}-{n}"
                if pseudo not in self._originals:
                    break
            self._counts[prefix] = n
            self.names[original] = pseudo
            self.renamed[tally] += 1
        return self.names[original]

    def _ip(self, original: str) -> str:
        if original in _KEPT_IPS:
            return original
        if original not in self.names:
            self._ips += 1
            block, host = divmod(self._ips - 1, 254)
            base = _IP_RANGES[block] if block < len(_IP_RANGES) else f"240.0.{block}."
            self.names[original] = f"{base}{host + 1}"
        return self.names[original]

    def _addresses(self, node: Obj) -> None:
        name = plan.ns_name(node)[1]
        for a in (node.get("status") or {}).get("addresses") or []:
            addr = str(a.get("address") or "") if isinstance(a, dict) else ""
            if _is_ip(addr):
                self._ip(addr)
            elif addr and addr != name and addr not in self.names:
                self.names[addr] = self.names.get(name, name)  # the node's hostname

    def _object_name(self, kind: str, obj: Obj) -> None:
        ns, name = plan.ns_name(obj)
        if kind in CLUSTER_SCOPED:
            node = str((obj.get("spec") or {}).get("nodeName") or "")
            if kind not in ("Node", "Namespace") and node in self.names:
                self._with_node(name, node)  # a ResourceSlice's name starts with its node's
            return
        if ns in self.infra or plan.is_stack(obj):
            node = str((obj.get("spec") or {}).get("nodeName") or "")
            if node in self.names:
                self._with_node(name, node)  # static pods: kube-proxy-<node>
            return
        info = KINDS.get(kind)
        self._name(name, kind.lower() if info is None else _singular(info.plural), "objects")
        if kind == "Pod":
            sa = str((obj.get("spec") or {}).get("serviceAccountName") or "")
            if sa and sa != "default":
                self._name(sa, "user", "users")

    def _with_node(self, name: str, node: str) -> None:
        if name not in self.names and node in name:
            self.names[name] = re.sub(rf"(?<![A-Za-z0-9]){re.escape(node)}(?![A-Za-z0-9])",
                                      self.names[node], name)

    # -- rewriting ----------------------------------------------------------------------

    def text(self, s: str) -> str:
        """Names, IPv4 addresses and e-mail addresses in free text replaced."""
        s = _EMAIL.sub(lambda m: self._name(m.group(), "user", "users"), s)
        s = _USER_QUOTED.sub(lambda m: m.group(1) + self._name(m.group(2), "user", "users")
                             + m.group(3), s)
        return _TOKEN.sub(lambda m: self._token(m.group()), s)

    def _token(self, tok: str) -> str:
        hit = self.names.get(tok)
        if hit is not None:
            return hit
        if _is_ip(tok):
            return self._ip(tok)
        core = tok.rstrip(".-")  # a sentence's full stop, generateName's dash
        if core != tok and core in self.names:
            return self.names[core] + tok[len(core):]
        # A name and a suffix after a dot: an Event's name (<object>.<hash>), a FQDN.
        for i in reversed([i for i, ch in enumerate(tok) if ch == "."]):
            head = tok[:i]
            if head in self.names:
                rest = tok[i + 1:]
                return f"{self.names[head]}.{self._token(rest) if rest else ''}"
        return tok

    def value(self, s: str) -> str:
        hit = self.names.get(s)
        return hit if hit is not None else self.text(s)

    def object(self, kind: str, obj: Obj) -> Obj:
        """A redacted, renamed copy."""
        out = copy.deepcopy(obj)
        public = plan.ns_name(obj)[0] in self.infra or plan.is_stack(obj) or kind in (
            CLUSTER_SCOPED - {"Node", "Namespace"})
        _redact_meta(out)
        if kind == "Node":
            _redact_node(out)
        if kind == "Pod":
            status = out.get("status") or {}
            for key in ("podIP", "podIPs"):
                status.pop(key, None)
        self._redact_specs(out, keep_env=public)
        rewritten: Obj = self._rewrite(out)
        return rewritten

    def logs(self, logs: Iterable[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
        return [(self.value(ns), self.value(pod), c, self.text(text))
                for ns, pod, c, text in logs]

    def _rewrite(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.value(value)
        if isinstance(value, dict):
            return {k: self._rewrite(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._rewrite(v) for v in value]
        return value

    def _redact_specs(self, value: Any, *, keep_env: bool) -> None:
        """Environment values, Secret references and secret flags, wherever a pod spec or
        template sits (Deployments, Jobs, JobSets, Kueue Workloads' pod sets, ...)."""
        if isinstance(value, list):
            for v in value:
                self._redact_specs(v, keep_env=keep_env)
            return
        if not isinstance(value, dict):
            return
        for key in ("secretKeyRef", "secretRef", "imagePullSecrets", "secretName"):
            value.pop(key, None)
        if isinstance(value.get("secret"), dict):
            value["secret"] = {}  # a secret volume stays a volume, naming no Secret
        if isinstance(value.get("env"), list):
            value["env"] = [self._env(e, keep_env) for e in value["env"] if isinstance(e, dict)]
        if isinstance(value.get("envFrom"), list):
            value["envFrom"] = [e for e in value["envFrom"]
                                if isinstance(e, dict) and "secretRef" not in e]
        for key in ("args", "command"):
            if isinstance(value.get(key), list):
                value[key] = _redact_flags(value[key])
        for v in value.values():
            self._redact_specs(v, keep_env=keep_env)

    def _env(self, e: dict[str, Any], keep: bool) -> dict[str, Any]:
        name = str(e.get("name") or "")
        out: dict[str, Any] = {"name": name}
        if "value" in e and (keep or name in self.env_keep
                             or name.startswith(self.env_keep_prefixes)):
            out["value"] = e["value"]
        source = e.get("valueFrom")
        if isinstance(source, dict):
            kept = {k: v for k, v in source.items() if k in ("fieldRef", "resourceFieldRef")}
            if kept:
                out["valueFrom"] = kept
        return out


def _singular(plural: str) -> str:
    return {"persistentvolumeclaims": "pvc"}.get(plural, plural.removesuffix("es")
                                                  if plural.endswith("sses") else
                                                  plural.removesuffix("s"))


def _is_ip(s: str) -> bool:
    if not _IPV4.match(s):
        return False
    try:
        ipaddress.IPv4Address(s)
    except ValueError:
        return False
    return True


def _redact_meta(obj: Obj) -> None:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return
    meta.pop("managedFields", None)
    ann = meta.get("annotations")
    if isinstance(ann, dict):
        kept = {k: v for k, v in ann.items()
                if k in KEEP_ANNOTATIONS or k.startswith(KEEP_ANNOTATION_PREFIXES)}
        if kept:
            meta["annotations"] = kept
        else:
            meta.pop("annotations")


def _redact_node(node: Obj) -> None:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    for key in ("providerID", "podCIDR", "podCIDRs", "externalID"):
        spec.pop(key, None)
    info = status.get("nodeInfo")
    if isinstance(info, dict):
        for key in ("machineID", "systemUUID", "bootID"):
            info.pop(key, None)


def _redact_flags(args: list[Any]) -> list[Any]:
    out: list[Any] = []
    hide_next = False
    for a in args:
        if hide_next and isinstance(a, str) and not a.startswith("-"):
            out.append(_REDACTED)
            hide_next = False
            continue
        hide_next = False
        m = _SECRET_FLAG.match(a) if isinstance(a, str) else None
        if m and m.group(2):
            out.append(f"{m.group(1)}={_REDACTED}")
        else:
            hide_next = bool(m)
            out.append(a)
    return out
