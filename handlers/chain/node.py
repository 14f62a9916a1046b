"""One GPU node's discovery chain: hardware -> driver -> toolkit -> plugin -> kubelet.

Each stage looks at its own pods and labels. A pod that only waits for an earlier stage
(an init container ``driver-validation`` still polling) is not a cause of its own: it is
evidence for the earlier stage's finding. Log lines are read only from failing pods.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any

from handlers.chain import hook_context
from handlers.chain.daemonsets import DsIssue, event_message
from handlers.chain.extras import labels_check, make_row, mig_check, sharing_check
from handlers.chain.fixcontext import ClusterSetup, operator_seen
from handlers.chain.fixes import INFO, Where, fix, summary
from handlers.chain.health import admission, health, partial, workloads
from handlers.chain.inventory import Inventory
from handlers.chain.missing import plugin_missing
from handlers.chain.model import (
    CHECK_ADMISSION,
    CHECK_DRIVER,
    CHECK_HARDWARE,
    CHECK_HEALTH,
    CHECK_OPERATOR,
    CHECK_PLUGIN,
    CHECK_REGISTRATION,
    CHECK_TOOLKIT,
    CHECK_WORKLOADS,
    EVIDENCE_ONLY,
    UPSTREAM,
    Findings,
    NodeChain,
    sourced,
)
from handlers.chain.pods import (
    BLOCKED,
    CRASHLOOP,
    CREATE_ERROR,
    CREATING,
    IMAGE_PULL,
    UNSCHEDULED,
    PodState,
    fmt_age,
    owner,
    pod_state,
)
from handlers.chain.runtime_context import drop_hints
from handlers.chain.sharing import SharingConfig
from handlers.chain.xid import check as xid_check
from handlers.codes import code_rank
from handlers.gpu import (
    GPU_RESOURCE,
    cuda_version,
    dra_component,
    driver_version,
    gpu_meant_by,
    gpu_resources,
    has_gpu_labels,
    labels,
    name_of,
    nfd_pci_nvidia,
    nfd_running,
)
from handlers.logpatterns import last_lines
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
# Component -> the code its own failure is reported as.
COMPONENT_CODE = {
    "driver": "DRIVER_NOT_READY",
    "toolkit": "CONTAINER_RUNTIME_NOT_CONFIGURED",
    "mig-manager": "MIG_CONFIG_FAILED",
}
# The codes that mean a check did not pass on the node.
FAILS: dict[str, frozenset[str]] = {
    CHECK_HARDWARE: frozenset({"GPU_HARDWARE_NOT_DETECTED"}),
    CHECK_DRIVER: frozenset({"DRIVER_NOT_READY", "OPERATOR_IMAGE_PULL"}),
    CHECK_TOOLKIT: frozenset({"CONTAINER_RUNTIME_NOT_CONFIGURED"}),
    CHECK_PLUGIN: frozenset({"DEVICE_PLUGIN_MISSING", "DEVICE_PLUGIN_CRASHLOOP",
                             "DEVICE_PLUGIN_IMAGE_PULL", "DEVICE_PLUGIN_NOT_PRIVILEGED",
                             "NVML_INIT_FAILED"}),
    CHECK_REGISTRATION: frozenset({"KUBELET_REGISTRATION_FAILED", "GPU_NOT_ADVERTISED"}),
    CHECK_HEALTH: frozenset({"GPU_UNHEALTHY"}),
    CHECK_ADMISSION: frozenset({"DEVICE_ADMISSION_FAILED"}),
    CHECK_WORKLOADS: frozenset({"CUDA_DRIVER_MISMATCH", "NVML_INIT_FAILED"}),
    CHECK_OPERATOR: frozenset({"OPERATOR_COMPONENT_FAILING", "OPERATOR_IMAGE_PULL"}),
}
_MAX_LOG_EVIDENCE = 4


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


class NodeRun:
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
        self.plugin_only = not self.advertised and not has_gpu_labels(node)
        self.f = Findings()
        self.passed: list[str] = []
        self.row: dict[str, str] = {}
        now = ctx.now
        comps = ctx.inv.component_pods.get(self.name, {})
        self.comp: dict[str, list[PodState]] = {
            c: [pod_state(p, now) for p in pods] for c, pods in comps.items()}
        self.plugins = [pod_state(p, now) for p in ctx.inv.plugin_pods.get(self.name, [])]
        self.plugin_ok = any(s.ready for s in self.plugins)
        self.where = Where(self.name, driver=driver_version(node) or "",
                           cuda=cuda_version(node) or "", setup=ctx.setup.for_node(node))
        self.ns = ctx.inv.operator_namespace or "gpu-operator"
        self.stuck: list[str] = []  # why a plugin pod hangs, when no known line says
        self.waiting: list[tuple[str, str, PodState]] = []  # pods blocked in validation
        self.pulls: dict[str, bool] = {}  # component -> its image cannot be pulled

    # -- helpers ---------------------------------------------------------------------------

    def _where(self, st: PodState | None, container: str = "") -> Where:
        if st is None:
            return replace(self.where, namespace=self.ns)
        c = container or (st.log_containers() or [""])[0]
        return replace(self.where, namespace=st.namespace, pod=st.name, container=c)

    def add(self, code: str, evidence: list[str], *, st: PodState | None = None,
            conditions: frozenset[str] = frozenset(), objects: list[ObjectRef] | None = None,
            actions: list[tuple[str, str]] | None = None, where: Where | None = None) -> None:
        w = where or self._where(st)
        objs = [self.ref] + ([st.ref] if st is not None else []) + (objects or [])
        self.f.add(code, summary(code, w), conditions=conditions, objects=objs,
                   evidence=evidence, fix=fix(code, w), actions=actions or [])

    def logs(self, st: PodState) -> tuple[list[tuple[str, str]], list[str]]:
        """Known lines in the failing containers' logs and messages; the tail as fallback."""
        found: list[tuple[str, str]] = []
        tail: list[str] = []
        for msg in st.messages():
            found += sourced(msg, "status message")
        for c in st.log_containers()[:2]:
            text = self.ctx.reader.logs(st.namespace, st.name, c)
            found += sourced(text, "log")
            if not tail:
                tail = [f"pod {st.label} log ({c}): {ln}" for ln in last_lines(text, 4)]
        return found, tail

    def log_evidence(self, st: PodState, found: list[tuple[str, str]], code: str) -> list[str]:
        return [f"pod {st.label} {ln}" for c, ln in found if c == code][:_MAX_LOG_EVIDENCE]

    def log_findings(self, st: PodState, found: list[tuple[str, str]],
                     skip: tuple[str, ...] = ()) -> list[str]:
        """One finding per code the lines prove (naming the pod); returns the codes."""
        codes = []
        # A cause already reported for the pod's DaemonSet (its mounts, its RuntimeClass)
        # is not reported again per node.
        ds_codes = {i.code for i in self.ctx.ds_issues.get(self.plugin_ds_key(st), [])}
        for code in dict.fromkeys(c for c, _ in found):
            if code in EVIDENCE_ONLY or code in skip:
                continue
            if code in ds_codes:
                codes.append(code)
                continue
            self.add(code, self.log_evidence(st, found, code), st=st)
            codes.append(code)
        return codes

    def events(self, st: PodState) -> list[str]:
        evs = self.ctx.reader.events("Pod", st.name, st.namespace)
        return [event_message(e) for e in evs if e.get("type") == "Warning"][-3:]

    def hard_errors(self, st: PodState) -> list[tuple[str, str]]:
        """Known error lines in a not-ready pod's Warning events: a hard error (no runtime
        handler, a hook that cannot load the driver) is reported at once, before the pod
        has been stuck long enough to count as failing."""
        if st.ready or st.phase in ("Succeeded", "Failed"):
            return []
        return [x for m in self.events(st) for x in sourced(m, "event")]

    def blocked(self, st: PodState) -> bool:
        """The pod only waits in a validation init container: evidence for that stage,
        attached once every stage has spoken (see resolve_waiting)."""
        init = st.blocked_on
        code = VALIDATION_STAGE.get(init or "")
        if code is None:
            return False
        line = (f"pod {st.label} waits in init container {init}"
                + (f" for {fmt_age(st.age)}" if st.age else ""))
        self.waiting.append((code, line, st))
        return True

    def resolve_waiting(self) -> None:
        """Attach each waiting pod to the earliest broken stage it waits for; a stage that
        nothing else explains becomes a finding of its own."""
        driver_codes = ["DRIVER_NOT_READY"] + (["OPERATOR_IMAGE_PULL"]
                                               if self.pulls.get("driver") else [])
        toolkit_codes = ["CONTAINER_RUNTIME_NOT_CONFIGURED"] + (
            ["OPERATOR_IMAGE_PULL"] if self.pulls.get("toolkit") else [])
        for code, line, st in self.waiting:
            if code == "DRIVER_NOT_READY":
                order = driver_codes
            else:
                order = [c for c in driver_codes if self.f.has(c)] + toolkit_codes
            target = next((c for c in order if self.f.has(c)), None)
            if target is not None:
                self.f.note(target, line)
            else:
                self.add(code, [line], st=st)

    def image_pull(self, st: PodState, code: str) -> None:
        issue = st.primary
        ev = st.state_evidence()
        if issue and issue.image:
            ev.append(f"image: {issue.image}")
        os_image = (self.node.get("status") or {}).get("nodeInfo", {}).get("osImage")
        if os_image and code == "OPERATOR_IMAGE_PULL":
            ev.append(f"node {self.name} osImage: {os_image}")
        comp = next((c for c, sts in self.comp.items() if st in sts), "")
        if comp:
            self.pulls[comp] = True
        self.add(code, ev, st=st)

    # -- stages ----------------------------------------------------------------------------

    def hardware(self) -> bool:
        """False when the node has no NVIDIA PCI device: the rest of the chain is moot."""
        pci = nfd_pci_nvidia(self.node)
        if self.advertised or pci:
            self.passed.append(CHECK_HARDWARE)
            return True
        if not nfd_running(self.node):
            self.ctx.unchecked.append(
                f"{CHECK_HARDWARE} on {self.name}: not checked (no NFD labels on the node)")
            return True
        meant = gpu_meant_by(self.node)
        if not meant:
            return True
        nfd = next(f"{k}={v}" for k, v in self.lab.items()
                   if k.startswith("feature.node.kubernetes.io/"))
        self.add("GPU_HARDWARE_NOT_DETECTED", [
            *meant, f"{nfd} (NFD labels the node)",
            "feature.node.kubernetes.io/pci-10de.present: absent (no NVIDIA PCI device)"])
        return False

    def driver(self) -> None:
        for st in self.comp.get("driver", []):
            if not st.failing:
                continue
            if st.kind == IMAGE_PULL:
                self.image_pull(st, "OPERATOR_IMAGE_PULL")
                continue
            found, tail = self.logs(st)
            ev = st.state_evidence() + self.log_evidence(st, found, "DRIVER_NOT_READY")
            if not any(c == "DRIVER_NOT_READY" for c, _ in found):
                ev += tail
            self.add("DRIVER_NOT_READY", ev, st=st)
            self.log_findings(st, found, skip=("DRIVER_NOT_READY",))
        if not self.f.has("DRIVER_NOT_READY", "OPERATOR_IMAGE_PULL"):
            self.passed.append(CHECK_DRIVER)

    def toolkit(self) -> None:
        for st in self.comp.get("toolkit", []):
            if not st.failing:
                continue
            if st.kind == IMAGE_PULL:
                self.image_pull(st, "OPERATOR_IMAGE_PULL")
                continue
            if self.blocked(st):
                continue
            found, tail = self.logs(st)
            up = [c for c, _ in found if c == "DRIVER_NOT_READY"]
            if up:
                self.log_findings(st, found)
                continue
            code = "CONTAINER_RUNTIME_NOT_CONFIGURED"
            ev = st.state_evidence() + self.log_evidence(st, found, code)
            self.add(code, ev + ([] if len(ev) > len(st.state_evidence()) else tail), st=st)
            self.log_findings(st, found, skip=(code,))
        if not self.f.has("CONTAINER_RUNTIME_NOT_CONFIGURED"):
            self.passed.append(CHECK_TOOLKIT)

    def plugin(self) -> None:
        if not self.plugins:
            plugin_missing(self)
            return
        if self.plugin_ok:
            self.passed.append(CHECK_PLUGIN)
            return
        for st in self.plugins:
            if not st.failing and not self.hard_errors(st):
                continue
            kind = st.kind
            if kind == IMAGE_PULL:
                self.image_pull(st, "DEVICE_PLUGIN_IMAGE_PULL")
            elif kind == UNSCHEDULED:
                self.add("DEVICE_PLUGIN_MISSING", st.state_evidence(), st=st)
            elif kind == BLOCKED and self.blocked(st):
                pass
            elif kind in (CRASHLOOP, CREATE_ERROR):
                found, tail = self.logs(st)
                found += [x for m in self.events(st) for x in sourced(m, "event")]
                found, twin_ev = drop_hints(self, st, found)
                causes = [ln for c, ln in found if c not in EVIDENCE_ONLY][:_MAX_LOG_EVIDENCE]
                ev = st.state_evidence() + [f"pod {st.label} {ln}" for ln in causes] + twin_ev
                self.add("DEVICE_PLUGIN_CRASHLOOP", ev + ([] if causes else tail), st=st)
                self.log_findings(st, hook_context.chain_reading(self, st, found))
            else:
                msgs = self.events(st) if kind == CREATING else []
                found = [x for m in msgs for x in sourced(m, "event")]
                if not found:
                    more, tail = self.logs(st)
                    found += more
                if not self.log_findings(st, found):
                    self.stuck = [*st.state_evidence(), *[f"event: {m}" for m in msgs]]

    def components(self) -> None:
        """validator, gfd, dcgm, dcgm-exporter, nfd, mig-manager: their own failures."""
        for comp, states in self.comp.items():
            if comp in ("driver", "toolkit"):
                continue
            for st in states:
                if not st.failing:
                    continue
                if st.kind == IMAGE_PULL:
                    self.image_pull(st, "OPERATOR_IMAGE_PULL")
                    continue
                if self.blocked(st):
                    continue
                found, tail = self.logs(st)
                if st.kind == CREATING:
                    found += [x for m in self.events(st) for x in sourced(m, "event")]
                upstream = [c for c, _ in found if c in UPSTREAM]
                if upstream:
                    self.log_findings(st, found)
                    continue
                code = COMPONENT_CODE.get(comp, "OPERATOR_COMPONENT_FAILING")
                own = self.log_evidence(st, found, code)
                self.add(code, [f"component {comp}", *st.state_evidence(), *own,
                                *([] if own else tail)], st=st)
                self.log_findings(st, found, skip=(code,))
        for pod in self.ctx.inv.failed_validators.get(self.name, [])[:2]:
            st = pod_state(pod, self.ctx.now)
            found, _ = self.logs(st)
            if not found:
                text = self.ctx.reader.logs(st.namespace, st.name)
                found = sourced(text, "log")
            self.log_findings(st, found)
        if not self.f.has("OPERATOR_COMPONENT_FAILING", "OPERATOR_IMAGE_PULL"):
            self.passed.append(CHECK_OPERATOR)

    def advertising(self) -> None:
        cap = self.cap.get(GPU_RESOURCE)
        if self.advertised:
            self.passed.append(CHECK_REGISTRATION)
            partial(self, cap)
            return
        causes = [c for c in self.f.problems() if c != "GPU_NOT_ADVERTISED"]
        causes += [i.code for st in self.plugins
                   for i in self.ctx.ds_issues.get(self.plugin_ds_key(st), [])]
        if not causes and self.plugin_ok:
            st = next(s for s in self.plugins if s.ready)
            text = self.ctx.reader.logs(st.namespace, st.name, self.plugin_container(st))
            found = sourced(text, "log")
            causes = self.log_findings(st, found)
            if not causes and dra_component(st.pod) == "kubelet-plugin":
                ev = [f"pod {st.label} (DRA kubelet plugin) is Running and Ready",
                      f"ResourceSlices with GPU devices for node {self.name}: none",
                      *[f"pod {st.label} log: {ln}" for ln in last_lines(text, 3)]]
                self.add("KUBELET_REGISTRATION_FAILED", ev, st=st,
                         where=self._where(st, self.plugin_container(st) or ""))
                causes = ["KUBELET_REGISTRATION_FAILED"]
            if not causes:
                ready_since = next((c.get("lastTransitionTime") for c in
                                    (st.pod.get("status") or {}).get("conditions") or []
                                    if c.get("type") == "Ready"), None)
                ev = [f"pod {st.label} is Running and Ready"
                      + (f" since {ready_since}" if ready_since else ""),
                      f"node {self.name} capacity nvidia.com/gpu: "
                      + ("absent" if cap is None else f"{cap:g}")]
                ev += [f"pod {st.label} log: {ln}" for ln in last_lines(text, 3)]
                self.add("KUBELET_REGISTRATION_FAILED", ev, st=st,
                         actions=[("restart-device-plugin", self.name)],
                         where=self._where(st, self.plugin_container(st) or ""))
                causes = ["KUBELET_REGISTRATION_FAILED"]
        ev = [f"node {self.name} capacity nvidia.com/gpu: "
              + ("absent" if cap is None else f"{cap:g}"), *gpu_meant_by(self.node)]
        if causes:
            ev.append("cause: " + ", ".join(dict.fromkeys(causes)))
        ev += self.stuck
        if self.plugin_only:
            ev.append("the node carries no GPU labels: if it has no GPU, keep the "
                      "device-plugin DaemonSet off it with a nodeSelector")
        self.add("GPU_NOT_ADVERTISED", ev)

    def plugin_ds_key(self, st: PodState) -> tuple[str, str]:
        ref = owner(st.pod, "DaemonSet") or {}
        return st.namespace, str(ref.get("name", ""))

    @staticmethod
    def plugin_container(st: PodState) -> str | None:
        cs = ((st.pod.get("spec") or {}).get("containers") or [])
        names = [str(c.get("name")) for c in cs]
        return next((n for n in names if "device-plugin" in n), names[0] if names else None)

    def run(self) -> NodeChain:
        ready, why = node_ready(self.node)
        if not ready:
            self.ctx.unchecked.append(f"chain on {self.name}: not checked (node {why.strip()})")
            return NodeChain(self.name, [], [], self.make_row("NotReady"))
        if self.hardware():
            self.driver()
            self.toolkit()
            self.plugin()
            self.components()
            self.resolve_waiting()
            self.advertising()
            health(self)
            workloads(self)
            xid_check(self)
            labels_check(self)
            mig_check(self)
            sharing_check(self)
        else:
            ev = [f"node {self.name} capacity nvidia.com/gpu: absent",
                  "cause: GPU_HARDWARE_NOT_DETECTED"]
            self.add("GPU_NOT_ADVERTISED", ev)
        admission(self)
        if self.plugin_only:
            for code in self.f.codes:
                d = self.f.get(code)
                if d is not None:
                    d.conditions |= {"unconfirmed-node"}
        problems_now = set(self.f.problems())
        self.passed = [c for c in dict.fromkeys(self.passed)
                       if not problems_now & FAILS.get(c, frozenset())]
        findings = self.f.findings()
        problems = [f for f in findings if f.severity.is_problem]
        verdict = "ok" if not problems else min(
            problems, key=lambda f: (f.severity.rank, code_rank(f.code))).code
        if not problems and any(f.severity == INFO for f in findings):
            verdict = "ok"
        return NodeChain(self.name, findings, self.passed, self.make_row(verdict))

    def make_row(self, verdict: str) -> dict[str, str]:
        return make_row(self, verdict)
