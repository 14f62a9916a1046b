"""check_chain: the discovery chain over a set of GPU nodes, plus its cluster-level causes."""

from __future__ import annotations

from typing import Any

from handlers import dra
from handlers.chain.daemonsets import (
    DsIssue,
    ds_label,
    ds_ref,
    kind_was_read,
    node_refs,
    pod_security_issue,
    privilege_issue,
    runtimeclass_issue,
)
from handlers.chain.facts import ChainContext
from handlers.chain.fixtext import Where
from handlers.chain.inventory import (
    SCOPE_FRACTION,
    Inventory,
    build_inventory,
    device_plugin_nodes,
)
from handlers.chain.model import (
    CHECK_POD_SECURITY,
    CHECK_PRIVILEGES,
    CHECK_RUNTIMECLASS,
    DAEMONSET_CHECKS,
    ChainReport,
    NodeChain,
)
from handlers.chain.placement import selects, template_spec
from handlers.chain.pods import IMAGE_PULL, pod_state
from handlers.chain.runner import default_plan, run_node
from handlers.chain.sharing import (
    TIME_SLICING_DOCS,
    TIME_SLICING_EXAMPLE,
    find_sharing_config,
)
from handlers.chain.stages.sharing import CHECK as CHECK_SHARING
from handlers.chain.words import say
from handlers.gpu import (
    advertises_gpus,
    dra_component,
    has_gpu_labels,
    name_of,
    nfd_pci_nvidia,
    nfd_running,
    ns_of,
)
from handlers.kube.commands import kubectl
from handlers.logpatterns import classify_log, last_lines
from handlers.model import Finding, Fix, ObjectRef, Patch, Severity
from handlers.rollout import with_rollouts
from handlers.view import Reader

Obj = dict[str, Any]


def is_chain_node(node: Obj, plugin_nodes: set[str]) -> bool:
    """A GPU node per the spec; a node that only runs a device-plugin pod counts unless NFD
    says it has no NVIDIA PCI device (a plugin DaemonSet without a nodeSelector)."""
    if advertises_gpus(node) or has_gpu_labels(node):
        return True
    if name_of(node) in plugin_nodes:
        return not (nfd_running(node) and not nfd_pci_nvidia(node))
    return False


def _ds_findings(ctx: ChainContext, scope: list[Obj], checks: list[str]) -> list[Finding]:
    inv = ctx.inv
    reader = ctx.reader
    rc_unchecked: list[str] = []
    rcs: list[Obj] | None = None  # read only when a GPU DaemonSet names a RuntimeClass
    rc_read = False
    out: list[Finding] = []
    psa_hits: dict[str, list[tuple[Obj, DsIssue, list[str]]]] = {}
    gpu_ds = [("plugin", ds) for ds in inv.plugin_daemonsets] + inv.component_daemonsets
    for comp, ds in gpu_ds:
        targets = [name_of(n) for n in scope if selects(ds, n)]
        if not targets:
            continue
        events = reader.events("DaemonSet", name_of(ds), ns_of(ds))
        issues: list[DsIssue] = []
        if rcs is None and template_spec(ds).get("runtimeClassName"):
            listed = reader.list("RuntimeClass")
            rcs = listed if kind_was_read(reader, "RuntimeClass", listed) else []
            rc_read = kind_was_read(reader, "RuntimeClass", listed)
        rc_issue, rc_checked = runtimeclass_issue(ds, events, rcs if rc_read else None)
        if not rc_checked:
            rc_unchecked.append(ds_label(ds))
        if rc_issue:
            issues.append(rc_issue)
        psa = pod_security_issue(reader, ds, events)
        if psa:
            issues.append(psa)
        if comp == "plugin":
            priv = privilege_issue(ds)
            if priv:
                issues.append(priv)
        ctx.ds_issues[(ns_of(ds), name_of(ds))] = issues
        for i in issues:
            if i.code == "POD_SECURITY_BLOCKS_OPERATOR":
                psa_hits.setdefault(ns_of(ds), []).append((ds, i, targets))
                continue
            ev = list(i.evidence)
            if len(targets) > 1:
                ev.append(f"nodes affected: {len(targets)}")
            out.append(Finding(i.code, i.summary,
                               objects=(ds_ref(ds), *i.extra_objects, *node_refs(targets)),
                               evidence=tuple(ev), fix=i.fix, conditions=i.conditions))
    out += [_merge_psa(ns, hits) for ns, hits in psa_hits.items()]
    checks.append(CHECK_POD_SECURITY)
    checks.append(CHECK_PRIVILEGES)
    if rc_unchecked:
        ctx.unchecked.append(
            f"{CHECK_RUNTIMECLASS}: not checked for {', '.join(rc_unchecked)} (their pods name "
            "a RuntimeClass, and no RuntimeClass objects were read)")
    else:
        checks.append(CHECK_RUNTIMECLASS)
    return out


def _merge_psa(ns: str, hits: list[tuple[Obj, DsIssue, list[str]]]) -> Finding:
    """One finding per namespace: the namespace's Pod Security level is the one cause."""
    hits.sort(key=lambda h: h[1].severity.rank)
    sev = hits[0][1].severity
    evidence: list[str] = []
    for _, issue, _ in hits:
        for e in issue.evidence:
            if e not in evidence:
                evidence.append(e)
    nodes = sorted({n for _, _, targets in hits for n in targets})
    blocked = [ds_label(ds) for ds, i, _ in hits if i.severity == sev]
    summary = (f"{hits[0][1].mechanism} in namespace {ns} rejects GPU operator pods "
               f"({', '.join(blocked[:3])}{', ...' if len(blocked) > 3 else ''})."
               if sev == Severity.CRITICAL else hits[0][1].summary)
    return Finding("POD_SECURITY_BLOCKS_OPERATOR", summary,
                   objects=(*hits[0][1].extra_objects, *(ds_ref(ds) for ds, _, _ in hits),
                            *node_refs(nodes)),
                   evidence=tuple(evidence[:16]), fix=hits[0][1].fix,
                   conditions=hits[0][1].conditions)


def _cluster_pods(ctx: ChainContext) -> list[Finding]:
    """The operator's own controller and NFD master/gc: not per node."""
    out = []
    for comp, pod in ctx.inv.cluster_pods:
        st = pod_state(pod, ctx.now)
        if not st.failing:
            continue
        code = "OPERATOR_IMAGE_PULL" if st.kind == IMAGE_PULL else "OPERATOR_COMPONENT_FAILING"
        ev = [f"component {comp}", *st.state_evidence()]
        if code == "OPERATOR_COMPONENT_FAILING":
            for c in st.log_containers()[:1]:
                text = ctx.reader.logs(st.namespace, st.name, c)
                lines = [ln for _, ln in classify_log(text)] or last_lines(text, 4)
                ev += [f"pod {st.label} log: {ln}" for ln in lines[:4]]
        w = Where(str((pod.get("spec") or {}).get("nodeName") or "-"), st.namespace, st.name,
                  (st.log_containers() or [""])[0])
        # The operator's own controller stops every component; NFD master or GC does not.
        cond = ("operator-controller" if code == "OPERATOR_COMPONENT_FAILING" else None) \
            if comp == "operator" else ("cluster-helper" if code == "OPERATOR_IMAGE_PULL"
                                        else None)
        out.append(Finding(code, f"GPU operator component {comp} ({st.label}) is not ready.",
                           objects=(st.ref,), evidence=tuple(ev), fix=say(code, w).fix,
                           conditions=frozenset({cond} if cond else ())))
    return out


def _sharing_findings(ctx: ChainContext, scope: list[Obj]) -> list[Finding]:
    cfg = ctx.sharing
    if cfg is None:
        return []
    cm_ref = ObjectRef("ConfigMap", cfg.name, cfg.namespace)
    if cfg.configmap is None:
        if not cfg.checked:
            ctx.unchecked.append(f"{CHECK_SHARING}: configmap {cfg.label} not checked (no "
                                 "ConfigMaps in the snapshot)")
            return []
        return [Finding(
            "TIMESLICING_CONFIG_INVALID",
            f"The device plugin's sharing configmap {cfg.label} does not exist.",
            objects=(cm_ref, *node_refs([name_of(n) for n in scope])),
            evidence=(cfg.source, f"configmap {cfg.label}: not found"),
            fix=Fix("Create it (the patch is the whole object; 4 replicas per GPU is an "
                    "example), or point the ClusterPolicy's spec.devicePlugin.config.name at "
                    "the ConfigMap that exists.", patch=Patch(
                        "ConfigMap", cfg.name, "", {
                            "apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                            "data": {"any": TIME_SLICING_EXAMPLE}}, cfg.namespace),
                    docs=(TIME_SLICING_DOCS,)))]
    out = []
    for key, err in cfg.errors.items():
        out.append(Finding(
            "TIMESLICING_CONFIG_INVALID",
            f"Key {key!r} of the sharing configmap {cfg.label} is not valid YAML.",
            objects=(cm_ref,),
            evidence=(f"configmap {cfg.label} key {key}: {err}", cfg.source),
            fix=Fix(f"Make key {key} valid YAML.",
                    (kubectl("edit", "configmap", cfg.name, namespace=cfg.namespace),),
                    docs=(TIME_SLICING_DOCS,))))
    return out


def _inventory_of_gpu_nodes(reader: Reader) -> Inventory:
    """On a cluster where GPU nodes are few, read only their pods; else every pod once."""
    all_nodes = reader.list("Node")
    labelled = [n for n in all_nodes if is_chain_node(n, set())]
    if len(labelled) * SCOPE_FRACTION > len(all_nodes):
        return build_inventory(reader)
    plugin_nodes = device_plugin_nodes(reader)
    return build_inventory(reader, [name_of(n) for n in all_nodes
                                    if is_chain_node(n, plugin_nodes)], cluster_pods=True)


def check_chain(reader: Reader, nodes: list[Obj] | None = None) -> ChainReport:
    """Run the discovery chain over ``nodes`` (None: every GPU node)."""
    if nodes is None:
        inv = _inventory_of_gpu_nodes(reader)
        scope = [n for n in inv.nodes if is_chain_node(n, inv.plugin_nodes)]
    else:
        inv = build_inventory(reader, [name_of(n) for n in nodes])
        scope = list(nodes)
    plugin_nodes = inv.plugin_nodes
    ctx = ChainContext(reader, inv, inv.now)
    if any(dra_component(p) == "kubelet-plugin" for pods in inv.plugin_pods.values()
           for p in pods):
        ctx.dra_devices = {n: c["published"] for n, c in dra.node_counts(reader).items()}
    checks: list[str] = []
    findings: list[Finding] = []
    findings += _ds_findings(ctx, scope, checks)
    findings += _cluster_pods(ctx)
    ctx.sharing = find_sharing_config(reader, inv.cluster_policies, inv.plugin_daemonsets,
                                      inv.operator_namespace)
    findings += _sharing_findings(ctx, scope)
    chains: list[NodeChain] = []
    for node in scope:
        if nodes is not None and not is_chain_node(node, plugin_nodes):
            chains.append(NodeChain(name_of(node), [], [], _cpu_row(node)))
            continue
        chain = run_node(ctx, node)
        chains.append(chain)
        findings += chain.findings
    # The checks that applied to some node (a node without an agent's conditions says
    # nothing of them), then the DaemonSets' own.
    ran = {c for chain in chains for c in chain.ran}
    order = [*(c for c in default_plan().checks if c in ran),
             *(c for c in DAEMONSET_CHECKS if c in checks)]
    findings = with_rollouts(reader, findings)
    return ChainReport(chains, findings, order, ctx.unchecked)


def _cpu_row(node: Obj) -> dict[str, str]:
    return {"node": name_of(node), "product": "-", "gpus": "0/0", "labels": "-",
            "driver": "-", "toolkit": "-", "plugin": "-", "runtime": str(
                (node.get("status") or {}).get("nodeInfo", {}).get(
                    "containerRuntimeVersion", "") or "-"),
            "mig": "-", "sharing": "-", "verdict": "not a GPU node"}
