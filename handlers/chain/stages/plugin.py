"""Device plugin: a plugin pod runs Ready on the node and registers its GPUs.

No pod: no DaemonSet, or the rule that keeps it off the node (selector, affinity, taint),
or why the DaemonSet creates none (Pod Security, RuntimeClass). A failing pod: its image
cannot be pulled, it crash-loops (its log's known lines name the cause: CUDA, NVML, the
runtime, privileges), or it hangs. A failing plugin pod is one even when another plugin on
the node is Ready (a VM passthrough plugin beside a container one, two plugin DaemonSets).
Its runtime hints are read in context (``runtime_context``): where the node's runtime is
shown to serve GPUs, the plugin itself is at fault.
"""

from __future__ import annotations

from dataclasses import replace

from handlers.chain import hook_context
from handlers.chain.daemonsets import (
    DEVICE_PLUGIN_DIR,
    ds_label,
    event_message,
    managed_by_operator,
)
from handlers.chain.facts import NodeFacts, evidence_only, sourced
from handlers.chain.fixtext import (
    Where,
    logs_cmd,
    managed,
    policy_name,
    policy_patch,
    restart_pod,
    why,
)
from handlers.chain.outcome import Draft, Outcome, Waiting
from handlers.chain.placement import exclusions, untolerated_taints
from handlers.chain.pods import BLOCKED, CRASHLOOP, CREATE_ERROR, CREATING, IMAGE_PULL, UNSCHEDULED
from handlers.chain.runtime_context import drop_hints
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, say, words
from handlers.gpu import name_of, ns_of
from handlers.kube.commands import json_patch_add, kubectl, line, merge_patch
from handlers.model import Fix, ObjectRef, Patch
from handlers.view import Obj

_MAX_LOG_EVIDENCE = 4


@stage("plugin", after=("toolkit",), check="device plugin")
def plugin(n: NodeFacts, before: Before) -> Outcome:
    if not n.plugins:
        return Outcome((_missing(n),))
    failing = [st for st in n.plugins if st.failing or n.hard_errors(st)]
    if n.plugin_ok and not failing:
        return Outcome(passed=True)
    out: list[Draft] = []
    waiting: list[Waiting] = []
    stuck: list[str] = []
    for st in failing:
        kind = st.kind
        w = n.waiting(st) if kind == BLOCKED else None
        if kind == IMAGE_PULL:
            out.append(n.image_pull(st, "DEVICE_PLUGIN_IMAGE_PULL"))
        elif kind == UNSCHEDULED:
            out.append(n.draft("DEVICE_PLUGIN_MISSING", st.state_evidence(), st=st))
        elif w is not None:
            waiting.append(w)
        elif kind in (CRASHLOOP, CREATE_ERROR):
            found, tail = n.logs(st)
            found += [x for m in n.events(st) for x in sourced(m, "event")]
            reading = drop_hints(n, st, found, before)
            found = reading.found
            causes = [ln for c, ln in found if not evidence_only(c)][:_MAX_LOG_EVIDENCE]
            ev = st.state_evidence() + [f"pod {st.label} {ln}" for ln in causes]
            crash = n.draft("DEVICE_PLUGIN_CRASHLOOP",
                            ev + reading.evidence + ([] if causes else tail), st=st)
            if reading.runtime_works and not causes:
                crash = replace(crash, fix=_plugin_at_fault(n.where_for(st)))
            out.append(crash)
            found, runtime = hook_context.chain_reading(n, st, found)
            out += runtime
            out += n.log_drafts(st, found)[0]
        else:
            msgs = n.events(st) if kind == CREATING else []
            found = [x for m in msgs for x in sourced(m, "event")]
            if not found:
                found += n.logs(st)[0]
            drafts, codes = n.log_drafts(st, found)
            out += drafts
            if not codes:
                stuck = [*st.state_evidence(), *[f"event: {m}" for m in msgs]]
    return Outcome(tuple(out), waiting=tuple(waiting), stuck=tuple(stuck))


def _missing(run: NodeFacts) -> Draft:
    """Why the node has no device-plugin pod: no DaemonSet, or which rule keeps it off."""
    inv = run.ctx.inv
    ev: list[str] = []
    fix = Fix()
    if not inv.plugin_daemonsets:
        ev.append("no device-plugin DaemonSet in the cluster (none labelled, named or "
                  "imaged as the NVIDIA plugin, GKE's, HAMi's or Volcano's, and none "
                  "mounting /var/lib/kubelet/device-plugins)")
        for cp in inv.cluster_policies:
            dp = (cp.get("spec") or {}).get("devicePlugin") or {}
            if dp.get("enabled") is False:
                ev.append(f"clusterpolicy {name_of(cp)}: spec.devicePlugin.enabled=false")
                fix = Fix(f"Enable the device plugin in ClusterPolicy {name_of(cp)}.", (
                    merge_patch("clusterpolicy", name_of(cp),
                                {"spec": {"devicePlugin": {"enabled": True}}}),))
        fix = fix or _INSTALL
    objects: list[ObjectRef] = []
    for ds in inv.plugin_daemonsets:
        objects.append(ObjectRef("DaemonSet", name_of(ds), ns_of(ds)))
        excl = exclusions(ds, run.node)
        if excl:
            ev += [f"daemonset {ds_label(ds)}: {e}" for e in excl]
            if not fix:
                fix = _admit(run, ds, inv.cluster_policies)
            continue
        st = ds.get("status") or {}
        ev.append(f"daemonset {ds_label(ds)} selects this node but has no pod on it "
                  f"(desired {st.get('desiredNumberScheduled', '?')}, current "
                  f"{st.get('currentNumberScheduled', '?')}, ready "
                  f"{st.get('numberReady', '?')})")
        issues = run.ctx.ds_issues.get((ns_of(ds), name_of(ds)), [])
        for issue in issues:
            ev.append(f"cause: {issue.code}: {issue.evidence[0]}")
            fix = fix or issue.fix
        failed = [e for e in run.ctx.reader.events("DaemonSet", name_of(ds), ns_of(ds))
                  if e.get("reason") == "FailedCreate"]
        if failed and not issues:
            ev.append(f"daemonset {ds_label(ds)} FailedCreate: {event_message(failed[-1])}")
        fix = fix or Fix("Its events say why the DaemonSet creates no pod.", (
            kubectl("describe", "ds", name_of(ds), namespace=ns_of(ds)),))
    said = say("DEVICE_PLUGIN_MISSING", run.where)
    return Draft("DEVICE_PLUGIN_MISSING", said.summary, fix, (run.ref, *objects), tuple(ev))


# The upstream install (NVIDIA/k8s-device-plugin README, "Deployment via helm").
_PLUGIN_VERSION = "0.17.1"
_INSTALL = Fix(
    "Install the NVIDIA device plugin with its Helm chart (or install the GPU operator, "
    "which deploys it), or apply its static manifest.",
    ("helm repo add nvdp https://nvidia.github.io/k8s-device-plugin",
     "helm repo update",
     line("helm", "upgrade", "-i", "nvdp", "nvdp/nvidia-device-plugin", "--namespace",
          "nvidia-device-plugin", "--create-namespace", "--version", _PLUGIN_VERSION)),
    docs=("https://github.com/NVIDIA/k8s-device-plugin#deployment-via-helm",
          f"https://raw.githubusercontent.com/NVIDIA/k8s-device-plugin/v{_PLUGIN_VERSION}/"
          "deployments/static/nvidia-device-plugin.yml"))


def _admit(run: NodeFacts, ds: Obj, policies: list[Obj]) -> Fix:
    """What lets the DaemonSet that excludes the node place its pod there."""
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    taints = untolerated_taints(ds, run.node)
    if taints:
        t = taints[0]
        tol = {"key": str(t.get("key")), "operator": "Exists"}
        if t.get("effect"):
            tol["effect"] = str(t["effect"])
        if managed_by_operator(ds) and policies:
            cp = policies[0]
            have = "tolerations" in ((cp.get("spec") or {}).get("daemonsets") or {})
            return Fix(
                "Add the toleration to the ClusterPolicy: the operator copies it to its "
                "DaemonSets.",
                (json_patch_add("clusterpolicy", name_of(cp), "/spec/daemonsets/tolerations",
                                [tol], exists=have),),
                Patch("ClusterPolicy", name_of(cp), "spec.daemonsets.tolerations", [tol]))
        return Fix(
            f"Let DaemonSet {ds_label(ds)} tolerate the node's taint.",
            (json_patch_add("ds", name_of(ds), "/spec/template/spec/tolerations", [tol],
                            exists="tolerations" in spec, namespace=ns_of(ds)),),
            Patch("DaemonSet", name_of(ds), "spec.template.spec.tolerations", [tol],
                  ns_of(ds)))
    sel = spec.get("nodeSelector") or {}
    pairs = [f"{k}={v}" for k, v in sel.items() if run.lab.get(k) != str(v)]
    if pairs:
        why = (" The GPU operator sets nvidia.com/gpu.deploy.* labels on nodes with an NVIDIA "
               "PCI device; a value of false disables the component on purpose."
               if managed_by_operator(ds) else "")
        return Fix(f"Label {run.name} the way DaemonSet {ds_label(ds)} selects nodes.{why}",
                   (kubectl("label", "node", run.name, *pairs, "--overwrite"),))
    return Fix(f"Make DaemonSet {ds_label(ds)}'s spec.template.spec.affinity match the "
               "node's labels.", (kubectl("edit", "ds", name_of(ds), namespace=ns_of(ds)),))


@words("DEVICE_PLUGIN_MISSING")
def _missing_words(w: Where) -> Words:
    return Words(f"No device-plugin pod runs on {w.node}.")


@words("DEVICE_PLUGIN_CRASHLOOP")
def _crashloop(w: Where) -> Words:
    return Words(
        f"The device plugin on {w.node} keeps crashing.",
        Fix("Fix the cause its log shows (the other findings on this node), then restart it.",
            logs_cmd(w) + restart_pod(w)))


def _plugin_at_fault(w: Where) -> Fix:
    """The crash's fix when the node's runtime is shown to serve GPUs: the plugin's own
    release or settings, not the node."""
    return Fix(
        f"The plugin finds no NVML although containers get their GPUs through the runtime "
        f"on {w.node}: its image or settings are at fault, not the node. Run the image "
        "that worked before, or a release that fixes it (the runbook names releases "
        "known to fail so), or skip the platform auto-detection that fails: set "
        "DEVICE_DISCOVERY_STRATEGY=nvml on its container. Then restart it.",
        logs_cmd(w) + restart_pod(w))


@words("DEVICE_PLUGIN_IMAGE_PULL")
def _image_pull(w: Where) -> Words:
    img = w.setup.plugin_image if w.setup else ""
    tag = img.rsplit(":", 1)[1] if ":" in img.rsplit("/", 1)[-1] else ""
    where = (f"the image the running plugin pods use ({img})" if img else
             "a published tag")
    look = (kubectl("describe", "pod", w.pod, namespace=w.namespace,
                    note="the registry's answer"),) if w.pod else ()
    docs = ("https://github.com/NVIDIA/k8s-device-plugin/releases",)
    if managed(w, "plugin"):
        return Words(
            f"The device-plugin image cannot be pulled on {w.node}.",
            Fix(f"Set the device plugin to {where} through the GPU operator, ClusterPolicy "
                f"{policy_name(w, 'devicePlugin')}; for a private registry set "
                "spec.devicePlugin.repository and imagePullSecrets.",
                look + ((policy_patch(w, "devicePlugin", tag),) if tag else ()), docs=docs))
    why_not = f" ({why(w, 'plugin')})" if why(w, "plugin") else ""
    can_set = bool(img and w.daemonset and w.container)
    return Words(
        f"The device-plugin image cannot be pulled on {w.node}.",
        Fix(f"Point the DaemonSet at {where} and add imagePullSecrets for a private "
            f"registry{why_not}.",
            look + ((kubectl("set", "image", f"daemonset/{w.daemonset}",
                             f"{w.container}={img}", namespace=w.namespace),)
                    if can_set else ()), docs=docs))


@words("DEVICE_PLUGIN_NOT_PRIVILEGED")
def _not_privileged(w: Where) -> Words:
    mount = {"name": "device-plugin", "mountPath": DEVICE_PLUGIN_DIR}
    content = {"containers": [{"name": w.container or "nvidia-device-plugin-ctr",
                               "volumeMounts": [mount]}],
               "volumes": [{"name": "device-plugin",
                            "hostPath": {"path": DEVICE_PLUGIN_DIR}}]}
    return Words(
        f"The device plugin on {w.node} cannot create its socket in /var/lib/kubelet/"
        "device-plugins.",
        Fix("Mount the kubelet's device-plugin directory into the plugin, which runs as root.",
            patch=Patch("DaemonSet", w.daemonset, "spec.template.spec", content, w.namespace)
            if w.daemonset else None))
