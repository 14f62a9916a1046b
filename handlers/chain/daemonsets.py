"""Checks on the GPU DaemonSets themselves: RuntimeClass, Pod Security, plugin privileges.

These are causes shared by every node the DaemonSet targets, so they are reported once per
DaemonSet (naming the DaemonSet, and the nodes in scope it keeps without a pod).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from handlers.cards import card
from handlers.chain.placement import template_spec
from handlers.gpu import dra_component, labels, name_of, ns_of
from handlers.knowledge.logs import active
from handlers.kube.commands import kubectl, line
from handlers.model import Fix, ObjectRef, Patch, Severity
from handlers.view import Reader

Obj = dict[str, Any]

DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
PSA_ENFORCE = "pod-security.kubernetes.io/enforce"
_MAX_NODE_REFS = 10


def ds_ref(ds: Obj) -> ObjectRef:
    return ObjectRef("DaemonSet", name_of(ds), ns_of(ds) or None)


def ds_label(ds: Obj) -> str:
    return f"{ns_of(ds)}/{name_of(ds)}"


def managed_by_operator(ds: Obj) -> bool:
    return any(r.get("kind") == "ClusterPolicy"
               for r in (ds.get("metadata") or {}).get("ownerReferences") or [])


def event_message(ev: Obj) -> str:
    return str(ev.get("message") or ev.get("note") or "").strip()


def kind_was_read(reader: Reader, kind: str, objs: list[Obj]) -> bool:
    """Whether objects of ``kind`` were read at all, so that "none of them is X" means it.

    A snapshot without any RuntimeClass (kubectl cluster-info dump leaves them out) says
    nothing about the cluster's RuntimeClasses; a live read that succeeded does.
    """
    # The views say so themselves: a snapshot that did not capture a kind raises on the
    # read, which the Reader records as "not checked".
    return bool(objs) or reader.readable(kind)


@dataclass
class DsIssue:
    """A DaemonSet-level cause, reported once and referred to by the nodes it hits."""

    code: str
    conditions: frozenset[str]
    summary: str
    evidence: list[str]
    fix: Fix
    extra_objects: list[ObjectRef] = field(default_factory=list)
    mechanism: str = "Pod Security admission"  # what refused pods (POD_SECURITY_BLOCKS_OPERATOR)

    @property
    def severity(self) -> Severity:
        return card(self.code).severity(self.conditions)


def _container_needs(c: Obj) -> list[str]:
    """Plugin settings that need privileged / SYS_ADMIN (upstream helm chart's rules)."""
    env = {e.get("name"): str(e.get("value", "")) for e in c.get("env") or []}
    out = []
    if env.get("PASS_DEVICE_SPECS", "").lower() == "true":
        out.append("env PASS_DEVICE_SPECS=true (compatWithCPUManager) needs privileged: true")
    if env.get("MIG_STRATEGY", "none") not in ("none", ""):
        out.append(f"env MIG_STRATEGY={env['MIG_STRATEGY']} needs privileged: true or "
                   "capabilities.add [SYS_ADMIN]")
    if "volume-mounts" in env.get("DEVICE_LIST_STRATEGY", ""):
        out.append(f"env DEVICE_LIST_STRATEGY={env['DEVICE_LIST_STRATEGY']} needs "
                   "privileged: true or capabilities.add [SYS_ADMIN]")
    return out


def _plugin_containers(spec: Obj) -> list[Obj]:
    """The plugin container itself, not its config-manager / MPS sidecars (same image)."""
    cs = [c for c in spec.get("containers") or []
          if not any(x in str(c.get("name", "")) for x in ("config-manager", "mps", "gfd",
                                                            "feature-discovery"))]
    picked = [c for c in cs if "device-plugin" in str(c.get("name", ""))]
    picked = picked or [c for c in cs if "device-plugin" in str(c.get("image", ""))]
    return picked or cs[:1]


def privilege_issue(ds: Obj) -> DsIssue | None:
    """DEVICE_PLUGIN_NOT_PRIVILEGED: the plugin cannot create its socket or see devices.

    Upstream (NVIDIA/k8s-device-plugin static manifests and helm chart): a hostPath volume
    for /var/lib/kubelet/device-plugins mounted at the same path, as root; privileged when
    PASS_DEVICE_SPECS (compatWithCPUManager); SYS_ADMIN or privileged for MIG strategies
    and the volume-mounts device list strategy.
    """
    tmpl = (ds.get("spec") or {}).get("template") or {}
    if "kubelet-plugin" in (dra_component(tmpl), dra_component(ds)):
        return None  # a DRA kubelet plugin registers under /var/lib/kubelet/plugins instead
    spec = template_spec(ds)
    host_vols = {v.get("name"): str((v.get("hostPath") or {}).get("path", "")).rstrip("/")
                 for v in spec.get("volumes") or [] if v.get("hostPath")}
    dp_vols = {n for n, p in host_vols.items()
               if p.endswith("/device-plugins") or p.endswith("/kubelet")}
    evidence: list[str] = []
    critical = False
    pod_sc = spec.get("securityContext") or {}
    for c in _plugin_containers(spec):
        cname = c.get("name", "")
        mounts = [m for m in c.get("volumeMounts") or [] if m.get("name") in dp_vols
                  and str(m.get("mountPath", "")).rstrip("/") in (DEVICE_PLUGIN_DIR,
                                                                  "/var/lib/kubelet")]
        if not mounts:
            critical = True
            if not dp_vols:
                evidence.append(f"daemonset {ds_label(ds)}: no hostPath volume for "
                                f"{DEVICE_PLUGIN_DIR}")
            else:
                evidence.append(f"daemonset {ds_label(ds)}: container {cname} does not mount "
                                f"{DEVICE_PLUGIN_DIR}")
        elif all(m.get("readOnly") for m in mounts):
            critical = True
            evidence.append(f"daemonset {ds_label(ds)}: container {cname} mounts "
                            f"{DEVICE_PLUGIN_DIR} readOnly: true")
        sc = c.get("securityContext") or {}
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        user = sc.get("runAsUser", pod_sc.get("runAsUser"))
        if non_root is True or (user not in (None, 0)):
            critical = True
            what = f"runAsUser: {user}" if user not in (None, 0) else "runAsNonRoot: true"
            evidence.append(f"daemonset {ds_label(ds)}: container {cname} securityContext "
                            f"{what}: cannot create its socket in {DEVICE_PLUGIN_DIR}")
        privileged = bool(sc.get("privileged"))
        caps = [str(x) for x in ((sc.get("capabilities") or {}).get("add") or [])]
        for need in _container_needs(c):
            if privileged or ("SYS_ADMIN" in caps and "PASS_DEVICE_SPECS" not in need):
                continue
            evidence.append(f"daemonset {ds_label(ds)}: container {cname}: {need}; "
                            f"securityContext is {sc or '{}'}")
    if not evidence:
        return None
    fix = _privilege_fix(ds, spec, any("privileged" in e for e in evidence))
    return DsIssue(
        "DEVICE_PLUGIN_NOT_PRIVILEGED",
        frozenset() if critical else frozenset({"feature-only"}),
        f"Device-plugin DaemonSet {ds_label(ds)} lacks the mounts or privileges it needs.",
        evidence, fix)


# The upstream manifests that mount the directory (and run privileged for compat mode).
_PLUGIN_MANIFESTS = (
    "https://github.com/NVIDIA/k8s-device-plugin/blob/main/deployments/static/"
    "nvidia-device-plugin.yml",
    "https://github.com/NVIDIA/k8s-device-plugin/blob/main/deployments/static/"
    "nvidia-device-plugin-compat-with-cpumanager.yml")
_OPERATOR_UPGRADE = ("https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/"
                     "upgrade.html")


def _privilege_fix(ds: Obj, spec: Obj, privileged: bool) -> Fix:
    if managed_by_operator(ds):
        return Fix("This DaemonSet is rendered by the GPU operator: do not patch it; reinstall "
                   "or upgrade the operator chart so that it renders the stock device-plugin "
                   "DaemonSet again.", docs=(_OPERATOR_UPGRADE,))
    container: dict[str, Any] = {
        "name": str((_plugin_containers(spec) or [{}])[0].get("name") or
                    "nvidia-device-plugin-ctr")}
    if privileged:  # PASS_DEVICE_SPECS, MIG strategies, volume-mounts device lists
        container["securityContext"] = {"privileged": True}
    container["volumeMounts"] = [{"name": "device-plugin", "mountPath": DEVICE_PLUGIN_DIR}]
    return Fix(
        "The plugin container needs the kubelet's device-plugin directory, as root (as the "
        "upstream manifests mount it).",
        (kubectl("edit", "ds", name_of(ds), namespace=ns_of(ds)),),
        Patch("DaemonSet", name_of(ds), "spec.template.spec", {
            "containers": [container],
            "volumes": [{"name": "device-plugin", "hostPath": {"path": DEVICE_PLUGIN_DIR}}]},
            ns_of(ds)),
        _PLUGIN_MANIFESTS)


def _needs_privileged(spec: Obj) -> list[str]:
    out = []
    for key in ("hostPID", "hostIPC", "hostNetwork"):
        if spec.get(key):
            out.append(f"{key}: true")
    hp = [v.get("name") for v in spec.get("volumes") or [] if v.get("hostPath")]
    if hp:
        out.append(f"hostPath volumes {', '.join(str(x) for x in hp[:4])}")
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        if (c.get("securityContext") or {}).get("privileged"):
            out.append(f"privileged container {c.get('name')}")
            break
    return out


# Knowledge-base entries (knowledge/logs.yaml) for each admission mechanism that refuses pods.
MECHANISMS = {
    "pod-security-admission": "Pod Security admission",
    "pod-security-policy": "PodSecurityPolicy",
    "openshift-scc": "OpenShift SecurityContextConstraints",
}


def refusals(events: list[Obj]) -> list[tuple[str, str]]:
    """``(entry id, message)`` for each event in which an admission mechanism refused pods."""
    out = []
    for e in events:
        msg = event_message(e)
        ids = [x.id for x in active().matching(msg) if x.id in MECHANISMS]
        if ids:
            out.append((ids[0], msg))
    return out


def _security_fix(mechanism: str, ds: Obj) -> Fix:
    ns, sa = ns_of(ds), template_spec(ds).get("serviceAccountName") or "default"
    role = f"{name_of(ds)}-psp"
    if mechanism == "pod-security-policy":
        return Fix(
            f"PodSecurityPolicy (Kubernetes <= 1.24): let service account {ns}/{sa} use a "
            "policy that allows privileged pods, host namespaces and hostPath volumes. The "
            f"role {role} these commands create may use every policy; name the privileged one "
            "with --resource-name to narrow it. The GPU operator's chart creates such a "
            "policy with psp.enabled=true.",
            (kubectl("get", "podsecuritypolicies"),
             kubectl("create", "role", role, "--verb=use",
                     "--resource=podsecuritypolicies.policy", namespace=ns),
             kubectl("create", "rolebinding", role, f"--role={role}",
                     f"--serviceaccount={ns}:{sa}", namespace=ns)))
    if mechanism == "openshift-scc":
        return Fix(
            "On OpenShift, install the GPU operator and NFD from OperatorHub: their bundles "
            "bring the SecurityContextConstraints their pods need. Or let the service "
            "account use the privileged SCC.",
            (line("oc", "adm", "policy", "add-scc-to-user", "privileged", "-z", sa, "-n", ns),))
    return Fix(
        "GPU operator components need privileged pods and hostPath volumes: let the "
        "namespace admit them; the DaemonSet controller then creates the missing pods.",
        (kubectl("label", "--overwrite", "namespace", ns, f"{PSA_ENFORCE}=privileged"),
         kubectl("get", "ds", name_of(ds), namespace=ns)))


def pod_security_issue(reader: Reader, ds: Obj, events: list[Obj]) -> DsIssue | None:
    """POD_SECURITY_BLOCKS_OPERATOR: FailedCreate refused by Pod Security admission,
    PodSecurityPolicy or an OpenShift SCC (each with its own fix), or a namespace that
    enforces baseline/restricted under a DaemonSet that needs privileged pods."""
    ns = ns_of(ds)
    ns_obj = reader.get("Namespace", ns) if ns else None
    level = labels(ns_obj or {}).get(PSA_ENFORCE)
    refused = refusals(events)
    status = ds.get("status") or {}
    desired = int(status.get("desiredNumberScheduled") or 0)
    current = int(status.get("currentNumberScheduled") or 0)
    label_ev = (f"namespace {ns}: {PSA_ENFORCE}={level}" if level else
                f"namespace {ns}: no {PSA_ENFORCE} label (the cluster's default level applies)")
    refs = [ObjectRef("Namespace", ns)] if ns else []
    if refused:
        mechanism = refused[-1][0]
        ev = [f"daemonset {ds_label(ds)} FailedCreate: {m}" for _, m in refused[-2:]]
        if mechanism == "pod-security-admission":
            ev.append(label_ev)
        ev.append(f"daemonset {ds_label(ds)}: desired {desired}, current {current}")
        return DsIssue("POD_SECURITY_BLOCKS_OPERATOR", frozenset(),
                       f"{MECHANISMS[mechanism]} rejects the pods of {ds_label(ds)}.", ev,
                       _security_fix(mechanism, ds), refs, MECHANISMS[mechanism])
    fix = _security_fix("pod-security-admission", ds)
    if level in ("baseline", "restricted"):
        needs = _needs_privileged(template_spec(ds))
        if not needs:
            return None
        ev = [label_ev, f"daemonset {ds_label(ds)} pod template: {', '.join(needs)}",
              f"daemonset {ds_label(ds)}: desired {desired}, current {current}"]
        if current < desired:
            return DsIssue("POD_SECURITY_BLOCKS_OPERATOR", frozenset(),
                           f"Namespace {ns} enforces Pod Security '{level}': {ds_label(ds)} "
                           "cannot create its privileged pods.", ev, fix, refs)
        return DsIssue("POD_SECURITY_BLOCKS_OPERATOR", frozenset({"on-recreate"}),
                       f"Namespace {ns} enforces Pod Security '{level}': pods of "
                       f"{ds_label(ds)} will be rejected when they are recreated.", ev, fix,
                       refs)
    return None


def runtimeclass_issue(ds: Obj, events: list[Obj], runtime_classes: list[Obj] | None,
                       ) -> tuple[DsIssue | None, bool]:
    """RUNTIMECLASS_MISSING for a GPU DaemonSet; the bool says whether it could be checked."""
    rc = template_spec(ds).get("runtimeClassName")
    if not rc:
        return None, True
    rejected = [event_message(e) for e in events
                if f'RuntimeClass "{rc}" not found' in event_message(e)
                or ("RuntimeClass" in event_message(e) and "not found" in event_message(e))]
    if runtime_classes is None and not rejected:
        return None, False
    names = sorted(name_of(r) for r in runtime_classes or [])
    if runtime_classes is not None and rc in names:
        return None, True
    ev = [f"daemonset {ds_label(ds)}: spec.template.spec.runtimeClassName={rc}"]
    if runtime_classes is not None:
        ev.append(f"runtimeclasses in the cluster: {', '.join(names) if names else 'none'} "
                  f"(no {rc!r})")
    ev += [f"daemonset {ds_label(ds)} FailedCreate: {m}" for m in rejected[-2:]]
    operator = (" The GPU operator creates RuntimeClass nvidia itself: its controller's log "
                "says why it did not." if managed_by_operator(ds) else "")
    fix = Fix(
        "Create the RuntimeClass (the patch is the whole object). Its handler must be a "
        "runtime configured in containerd or CRI-O on the GPU nodes, which the NVIDIA "
        f"container toolkit adds.{operator}",
        (kubectl("get", "runtimeclass"),),
        Patch("RuntimeClass", str(rc), "", {
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": str(rc)}, "handler": "nvidia"}),
        ("https://kubernetes.io/docs/concepts/containers/runtime-class/",))
    return DsIssue("RUNTIMECLASS_MISSING", frozenset(),
                   f"DaemonSet {ds_label(ds)} names RuntimeClass {rc!r}, which does not exist.",
                   ev, fix, [ObjectRef("RuntimeClass", str(rc))]), True


def node_refs(nodes: list[str]) -> list[ObjectRef]:
    return [ObjectRef("Node", n) for n in nodes[:_MAX_NODE_REFS]]
