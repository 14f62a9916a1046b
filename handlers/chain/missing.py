"""Why a GPU node has no device-plugin pod: no DaemonSet, or which rule keeps it off."""

from __future__ import annotations

from typing import TYPE_CHECKING

from handlers.chain.daemonsets import ds_label, event_message, managed_by_operator
from handlers.chain.fixes import summary
from handlers.chain.placement import exclusions, untolerated_taints
from handlers.gpu import name_of, ns_of
from handlers.model import ObjectRef

if TYPE_CHECKING:
    from handlers.chain.node import NodeRun


def plugin_missing(run: NodeRun) -> None:
    inv = run.ctx.inv
    ev: list[str] = []
    fix_text = ""
    if not inv.plugin_daemonsets:
        ev.append("no device-plugin DaemonSet in the cluster (none labelled, named or "
                  "imaged as the NVIDIA plugin, GKE's, HAMi's or Volcano's, and none "
                  "mounting /var/lib/kubelet/device-plugins)")
        for cp in inv.cluster_policies:
            dp = (cp.get("spec") or {}).get("devicePlugin") or {}
            if dp.get("enabled") is False:
                ev.append(f"clusterpolicy {name_of(cp)}: spec.devicePlugin.enabled=false")
                fix_text = ("kubectl patch clusterpolicy " + name_of(cp) + " --type merge "
                            "-p '{\"spec\":{\"devicePlugin\":{\"enabled\":true}}}'")
        fix_text = fix_text or (
            "Install the device plugin: helm upgrade -i nvdp nvidia/nvidia-device-plugin "
            "-n nvidia-device-plugin --create-namespace (or the GPU operator), or kubectl "
            "apply -f https://raw.githubusercontent.com/NVIDIA/k8s-device-plugin/v0.17.1/"
            "deployments/static/nvidia-device-plugin.yml")
    objects: list[ObjectRef] = []
    for ds in inv.plugin_daemonsets:
        objects.append(ObjectRef("DaemonSet", name_of(ds), ns_of(ds)))
        excl = exclusions(ds, run.node)
        if excl:
            ev += [f"daemonset {ds_label(ds)}: {e}" for e in excl]
            if fix_text:
                continue
            taints = untolerated_taints(ds, run.node)
            if taints:
                t = taints[0]
                tol = (f"- key: {t.get('key')}\n  operator: Exists\n  effect: "
                       f"{t.get('effect')}")
                if managed_by_operator(ds):
                    fix_text = ("Add the toleration to the ClusterPolicy (the operator "
                                "copies it to its DaemonSets):\nspec:\n  daemonsets:\n"
                                "    tolerations:\n    " + tol.replace("\n", "\n    "))
                else:
                    fix_text = (f"kubectl -n {ns_of(ds)} patch ds {name_of(ds)} --type=json "
                                "-p '[{\"op\":\"add\",\"path\":\"/spec/template/spec/"
                                "tolerations/-\",\"value\":{\"key\":\"" + str(t.get("key"))
                                + "\",\"operator\":\"Exists\",\"effect\":\""
                                + str(t.get("effect")) + "\"}}]'\n(tolerations:\n" + tol
                                + ")")
            else:
                sel = ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get(
                    "nodeSelector") or {}
                pairs = " ".join(f"{k}={v}" for k, v in sel.items()
                                 if run.lab.get(k) != str(v))
                if pairs:
                    fix_text = f"kubectl label node {run.name} {pairs} --overwrite"
                    if managed_by_operator(ds):
                        fix_text += ("\n(the GPU operator sets nvidia.com/gpu.deploy.* "
                                     "labels on nodes with an NVIDIA PCI device; a value "
                                     "of false disables the component on purpose)")
                else:
                    fix_text = (f"kubectl -n {ns_of(ds)} edit ds {name_of(ds)}   # make "
                                "spec.template.spec.affinity match the node's labels")
            continue
        st = ds.get("status") or {}
        ev.append(f"daemonset {ds_label(ds)} selects this node but has no pod on it "
                  f"(desired {st.get('desiredNumberScheduled', '?')}, current "
                  f"{st.get('currentNumberScheduled', '?')}, ready "
                  f"{st.get('numberReady', '?')})")
        issues = run.ctx.ds_issues.get((ns_of(ds), name_of(ds)), [])
        for issue in issues:
            ev.append(f"cause: {issue.code}: {issue.evidence[0]}")
            fix_text = fix_text or issue.fix
        failed = [e for e in run.ctx.reader.events("DaemonSet", name_of(ds), ns_of(ds))
                  if e.get("reason") == "FailedCreate"]
        if failed and not issues:
            ev.append(f"daemonset {ds_label(ds)} FailedCreate: {event_message(failed[-1])}")
        fix_text = fix_text or (f"kubectl -n {ns_of(ds)} describe ds {name_of(ds)}   # "
                                "events say why the pod is not created")
    run.f.add("DEVICE_PLUGIN_MISSING", summary("DEVICE_PLUGIN_MISSING", run.where),
               objects=[run.ref, *objects], evidence=ev, fix=fix_text)
