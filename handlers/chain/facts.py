"""What the chain knows about the cluster (``ChainContext``) and about one node
(``NodeFacts``), worked out once and read by every stage; neither changes while the stages
run. Reads of logs and events go through the Reader, which keeps them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any

from handlers.chain.daemonsets import DsIssue, event_message
from handlers.chain.fixcontext import ClusterSetup, operator_seen
from handlers.chain.fixtext import Where
from handlers.chain.inventory import Inventory
from handlers.chain.outcome import Draft, Waiting
from handlers.chain.pods import PodState, fmt_age, owner, pod_state
from handlers.chain.sharing import SharingConfig
from handlers.chain.words import say
from handlers.gpu import (
    cuda_version,
    driver_version,
    gpu_resources,
    has_gpu_labels,
    labels,
    name_of,
)
from handlers.knowledge.logs import active
from handlers.kube.workload import spec_owner
from handlers.logpatterns import classify_log, last_lines
from handlers.model import ObjectRef
from handlers.view import Reader

Obj = dict[str, Any]

# The stage an operator validation init container waits for.
VALIDATION_STAGE = {
    "driver-validation": "DRIVER_NOT_READY",
    # GKE's managed plugin waits here until the node's driver is installed (auto
    # installation disabled: GoogleCloudPlatform/container-engine-accelerators#407).
    "nvidia-driver-installer": "DRIVER_NOT_READY",
    "toolkit-validation": "CONTAINER_RUNTIME_NOT_CONFIGURED",
}
# Codes a log line can prove that are causes further up the chain than the pod it came from.
UPSTREAM = ("DRIVER_NOT_READY", "CONTAINER_RUNTIME_NOT_CONFIGURED", "NVML_INIT_FAILED",
            "CUDA_DRIVER_MISMATCH")
_MAX_LOG_EVIDENCE = 4
# Labels a DaemonSet's pods share and no other app's pods carry (not the revision hashes).
_POD_NAME_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app", "name",
                    "k8s-app")

Found = list[tuple[str, str]]  # (code, "<source>: <line>")


def sourced(text: str | None, source: str) -> Found:
    """``(code, "<source>: <line>")`` for the known lines of a log, event or message."""
    return [(code, f"{source}: {line}") for code, line in classify_log(text)]


def evidence_only(code: str) -> bool:
    """A code a log line proves only as evidence for another finding (its card says)."""
    from handlers.cards import card

    return card(code).evidence_only


@dataclass
class ChainContext:
    reader: Reader
    inv: Inventory
    now: datetime
    sharing: SharingConfig | None = None
    ds_issues: dict[tuple[str, str], list[DsIssue]] = field(default_factory=dict)
    unchecked: list[str] = field(default_factory=list)
    # DRA GPU devices each node publishes in ResourceSlices (read only where a DRA kubelet
    # plugin runs): such a node advertises its GPUs without nvidia.com/gpu.
    dra_devices: dict[str, int] = field(default_factory=dict)

    @cached_property
    def setup(self) -> ClusterSetup:
        return ClusterSetup.read(
            self.inv.cluster_policies,
            # No ClusterPolicy while operator components run: the data left it out.
            self.reader.readable("ClusterPolicy") and bool(
                self.inv.cluster_policies or not operator_seen(
                    [ds for _, ds in self.inv.component_daemonsets] + self.inv.plugin_daemonsets,
                    [p for pods in self.inv.plugin_pods.values() for p in pods]
                    + [p for comps in self.inv.component_pods.values()
                       for pods in comps.values() for p in pods])),
            self.inv.plugin_daemonsets, self.reader.list("Node"),
            [p for pods in self.inv.plugin_pods.values() for p in pods])


def node_ready(node: Obj) -> tuple[bool, str]:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            ok = c.get("status") == "True"
            return ok, f"Ready={c.get('status')}: {c.get('reason', '')} {c.get('message', '')}"
    return True, ""


def _chart_release(obj: Obj, chart: str) -> tuple[str, str]:
    """(release, chart version) of the Helm release that installed ``obj`` from ``chart``
    (Helm's own annotation, or the chart's standard labels), or ("", "")."""
    meta = obj.get("metadata") or {}
    lab = meta.get("labels") or {}
    label = str(lab.get("helm.sh/chart", ""))
    if not label.startswith(f"{chart}-"):
        return "", ""
    release = str((meta.get("annotations") or {}).get("meta.helm.sh/release-name")
                  or lab.get("app.kubernetes.io/instance") or "")
    return (release, label.removeprefix(f"{chart}-")) if release else ("", "")


class NodeFacts:
    """One GPU node as the chain sees it: labels, GPU resources, its GPU pods' states."""

    def __init__(self, ctx: ChainContext, node: Obj) -> None:
        self.ctx = ctx
        self.node = node
        self.name = name_of(node)
        self.ref = ObjectRef("Node", self.name)
        self.lab = labels(node)
        self.cap = gpu_resources(node, "capacity")
        self.alloc = gpu_resources(node, "allocatable")
        self.dra = ctx.dra_devices.get(self.name, 0)
        self.advertised = any(v > 0 for v in self.cap.values()) or self.dra > 0
        # Nothing shows a GPU but a device-plugin pod: maybe not a GPU node at all.
        self.plugin_only = not self.advertised and not has_gpu_labels(node)
        now = ctx.now
        comps = ctx.inv.component_pods.get(self.name, {})
        self.comp: dict[str, list[PodState]] = {
            c: [pod_state(p, now) for p in pods] for c, pods in comps.items()}
        self.plugins = [pod_state(p, now) for p in ctx.inv.plugin_pods.get(self.name, [])]
        self.plugin_ok = any(s.ready for s in self.plugins)
        sel_ns, sel, chart = self._plugin_selector()
        self.where = Where(self.name, driver=driver_version(node) or "",
                           cuda=cuda_version(node) or "", setup=ctx.setup.for_node(node),
                           plugin_selector=sel, plugin_namespace=sel_ns,
                           plugin_chart=chart)
        self.ns = ctx.inv.operator_namespace or "gpu-operator"

    def _plugin_selector(self) -> tuple[str, str, tuple[str, str]]:
        """(namespace, label selector, Helm release and chart version) of the DaemonSet of the
        node's first plugin pod: a restart that names no pod, for fixes that speak of the
        plugin beside another pod, and a chart setting."""
        for st in self.plugins:
            ns, ds_name = self.plugin_ds_key(st)
            ds = next((d for d in self.ctx.inv.plugin_daemonsets
                       if name_of(d) == ds_name and (d.get("metadata") or {}).get(
                           "namespace") == ns), None) or {}
            match = ((ds.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            release = _chart_release(ds, "nvidia-device-plugin")
            if match:
                return ns, ",".join(f"{k}={v}" for k, v in sorted(match.items())), release
            # The DaemonSet was not read: the pod's own stable labels select its siblings.
            lab = labels(st.pod)
            keys = [k for k in _POD_NAME_LABELS if lab.get(k)][:2]
            if keys:
                return ns, ",".join(f"{k}={lab[k]}" for k in keys), release
        return "", "", ("", "")

    # -- the words of a finding ------------------------------------------------------------

    def where_for(self, st: PodState | None, container: str = "") -> Where:
        if st is None:
            return replace(self.where, namespace=self.ns)
        c = container or (st.log_containers() or [""])[0]
        ds = str((owner(st.pod, "DaemonSet") or {}).get("name") or "")
        return replace(self.where, namespace=st.namespace, pod=st.name, container=c,
                       daemonset=ds, owner=spec_owner(st.pod))

    def draft(self, code: str, evidence: list[str], *, st: PodState | None = None,
              conditions: frozenset[str] = frozenset(), objects: list[ObjectRef] | None = None,
              actions: list[tuple[str, str]] | None = None, where: Where | None = None
              ) -> Draft:
        """A finding about this node (and ``st``'s pod) in the words of ``code``'s owner."""
        w = where or self.where_for(st)
        said = say(code, w)
        objs = [self.ref] + ([st.ref] if st is not None else []) + (objects or [])
        return Draft(code, said.summary, said.fix, tuple(objs), tuple(evidence),
                     tuple(actions or ()), conditions)

    # -- what pods say ---------------------------------------------------------------------

    def logs(self, st: PodState) -> tuple[Found, list[str]]:
        """Known lines in the failing containers' logs and messages; the tail as fallback."""
        found: Found = []
        tail: list[str] = []
        for msg in st.messages():
            found += sourced(msg, "status message")
        for c in st.log_containers()[:2]:
            text = self.ctx.reader.logs(st.namespace, st.name, c)
            found += sourced(text, "log")
            if not tail:
                tail = [f"pod {st.label} log ({c}): {ln}" for ln in last_lines(text, 4)]
        return found, tail

    @staticmethod
    def log_evidence(st: PodState, found: Found, code: str) -> list[str]:
        return [f"pod {st.label} {ln}" for c, ln in found if c == code][:_MAX_LOG_EVIDENCE]

    def log_drafts(self, st: PodState, found: Found, skip: tuple[str, ...] = ()
                   ) -> tuple[list[Draft], list[str]]:
        """One finding per code the lines prove (naming the pod), and the codes proven."""
        codes: list[str] = []
        out: list[Draft] = []
        # A cause already reported for the pod's DaemonSet (its mounts, its RuntimeClass)
        # is not reported again per node.
        ds_codes = {i.code for i in self.ctx.ds_issues.get(self.plugin_ds_key(st), [])}
        for code in dict.fromkeys(c for c, _ in found):
            if evidence_only(code) or code in skip:
                continue
            if code not in ds_codes:
                out.append(self.draft(code, self.log_evidence(st, found, code), st=st))
            codes.append(code)
        return out, codes

    def events(self, st: PodState) -> list[str]:
        evs = self.ctx.reader.events("Pod", st.name, st.namespace)
        return [event_message(e) for e in evs if e.get("type") == "Warning"][-3:]

    def hard_errors(self, st: PodState) -> Found:
        """Known error lines in a not-ready pod's Warning events: a hard error (no runtime
        handler, a hook that cannot load the driver) is reported at once, before the pod
        has been stuck long enough to count as failing."""
        if st.ready or st.phase in ("Succeeded", "Failed"):
            return []
        return [x for m in self.events(st) for x in sourced(m, "event")]

    @staticmethod
    def waiting(st: PodState) -> Waiting | None:
        """The pod only waits in a validation init container: evidence for that stage."""
        init = st.blocked_on
        code = VALIDATION_STAGE.get(init or "")
        if code is None:
            return None
        line = (f"pod {st.label} waits in init container {init}"
                + (f" for {fmt_age(st.age)}" if st.age else ""))
        return Waiting(code, line, st)

    def image_pull(self, st: PodState, code: str) -> Draft:
        issue = st.primary
        ev = st.state_evidence()
        if issue and issue.image:
            ev.append(f"image: {issue.image}")
        os_image = (self.node.get("status") or {}).get("nodeInfo", {}).get("osImage")
        if os_image and code == "OPERATOR_IMAGE_PULL":
            ev.append(f"node {self.name} osImage: {os_image}")
        return self.draft(code, ev, st=st)

    def component_of(self, st: PodState) -> str:
        return next((c for c, sts in self.comp.items() if st in sts), "")

    @staticmethod
    def plugin_ds_key(st: PodState) -> tuple[str, str]:
        ref = owner(st.pod, "DaemonSet") or {}
        return st.namespace, str(ref.get("name", ""))

    @staticmethod
    def plugin_container(st: PodState) -> str | None:
        cs = ((st.pod.get("spec") or {}).get("containers") or [])
        names = [str(c.get("name")) for c in cs]
        return next((n for n in names if "device-plugin" in n), names[0] if names else None)

    @staticmethod
    def entry_matches(line: str, entry_id: str) -> bool:
        """The line is matched by the log-pattern entry ``entry_id`` (knowledge/logs.yaml)."""
        return any(e.id == entry_id for e in active().matching(line))
