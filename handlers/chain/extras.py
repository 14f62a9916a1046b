"""The chain's last stages on a node (GFD labels, MIG, time-slicing) and its table row."""

from __future__ import annotations

from typing import TYPE_CHECKING

from handlers.chain.fixes import Where
from handlers.chain.model import CHECK_LABELS, CHECK_MIG, CHECK_SHARING
from handlers.chain.placement import selects
from handlers.chain.sharing import REPLICAS_LABEL, replicas_of
from handlers.gpu import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    GFD_LABELS,
    MIG_CONFIG_STATE_LABEL,
    MIG_STRATEGY_LABEL,
    driver_version,
    expected_gpu_count,
    gpu_product,
    nfd_running,
)
from handlers.logpatterns import classify_log, last_lines
from handlers.model import ObjectRef

if TYPE_CHECKING:
    from handlers.chain.node import NodeRun

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
_CLOUD_ACCEL = ("cloud.google.com/gke-accelerator", "k8s.amazonaws.com/accelerator")


def labels_check(run: NodeRun) -> None:
    if not run.advertised:
        return
    missing = [k for k in GFD_LABELS if not run.lab.get(k)]
    if not missing:
        run.passed.append(CHECK_LABELS)
        return
    present = [f"{k}={run.lab[k]}" for k in GFD_LABELS if run.lab.get(k)]
    ev = [f"{k}: absent" for k in missing] + present
    gfd = run.comp.get("gfd", [])
    if any(s.failing for s in gfd):
        ev.append("gpu-feature-discovery pod on the node is not ready: "
                  + "; ".join(gfd[0].state_evidence()[:1]))
    elif not gfd:
        ev.append("no gpu-feature-discovery pod runs on the node")
    gfd_anywhere = any(c == "gfd" for c, _ in run.ctx.inv.component_daemonsets)
    cloud = [k for k in _CLOUD_ACCEL if run.lab.get(k)]
    cond: frozenset[str] = frozenset()
    if cloud and not gfd_anywhere:
        # GKE/EKS accelerator labels stand in for GFD's: selectors usually use those.
        cond = frozenset({"cloud-labels"})
        ev.append(f"{cloud[0]}={run.lab[cloud[0]]} (cloud accelerator label)")
    run.add("NFD_LABELS_MISSING", ev, conditions=cond,
            where=Where(run.name, run.ns, driver=run.where.driver))


def mig_check(run: NodeRun) -> None:
    state = run.lab.get(MIG_CONFIG_STATE_LABEL)
    failing_mgr = [s for s in run.comp.get("mig-manager", []) if s.failing]
    if state != "failed":
        if not run.f.has("MIG_CONFIG_FAILED") and not failing_mgr:
            run.passed.append(CHECK_MIG)
        return
    ev = [f"{MIG_CONFIG_LABEL}={run.lab.get(MIG_CONFIG_LABEL, '<absent>')}",
          f"{MIG_CONFIG_STATE_LABEL}=failed"]
    if run.lab.get(MIG_STRATEGY_LABEL):
        ev.append(f"{MIG_STRATEGY_LABEL}={run.lab[MIG_STRATEGY_LABEL]}")
    mgr = run.comp.get("mig-manager", [])
    st = mgr[0] if mgr else None
    if st is not None:
        text = run.ctx.reader.logs(st.namespace, st.name, None)
        lines = [ln for c, ln in classify_log(text) if c == "MIG_CONFIG_FAILED"]
        ev += [f"pod {st.label} log: {ln}" for ln in (lines or last_lines(text, 4))[-4:]]
    else:
        ev.append("no nvidia-mig-manager pod runs on the node")
    run.add("MIG_CONFIG_FAILED", ev, st=st,
            where=run._where(st, "nvidia-mig-manager") if st else None)


def sharing_check(run: NodeRun) -> None:
    cfg = run.ctx.sharing
    if cfg is None:
        run.passed.append(CHECK_SHARING)
        return
    if cfg.configmap is None:
        return  # reported once for the cluster (configmap missing), or not checked
    key, why = cfg.key_for(run.lab)
    cm_ref = ObjectRef("ConfigMap", cfg.name, cfg.namespace)
    keys = sorted(list(cfg.entries) + list(cfg.errors))
    where = Where(run.name, cfg.namespace, "<device-plugin pod>", "config-manager")
    plugin = next((s for s in run.plugins), None)
    if plugin is not None:
        where = Where(run.name, plugin.namespace, plugin.name, "config-manager")
    fix_base = (f"kubectl get node {run.name} -L {DEVICE_PLUGIN_CONFIG_LABEL},{REPLICAS_LABEL}"
                f"\nkubectl -n {cfg.namespace} get configmap {cfg.name} -o yaml")
    if key is None:
        run.passed.append(CHECK_SHARING)
        return
    if key not in cfg.entries and key not in cfg.errors:
        if why == "label":
            fix = (f"kubectl label node {run.name} {DEVICE_PLUGIN_CONFIG_LABEL}="
                   f"{keys[0] if keys else '<key>'} --overwrite   # a key of configmap "
                   f"{cfg.label}: {', '.join(keys)}\n" + fix_base)
        else:
            fix = (f"Add key {key!r} to configmap {cfg.label} or fix the default in "
                   f"{cfg.source}\n" + fix_base)
        src = (f"{DEVICE_PLUGIN_CONFIG_LABEL}={key}" if why == "label"
               else f"default config {key!r} ({cfg.source})")
        summary = (f"{run.name} asks for sharing config {key!r}, which configmap "
                   f"{cfg.label} does not have.")
        d = run.f.add("TIMESLICING_CONFIG_INVALID", summary, objects=[run.ref, cm_ref],
                      evidence=[src, f"configmap {cfg.label} keys: {', '.join(keys) or 'none'}",
                                cfg.source], fix=fix)
        d.summary, d.fix = summary, fix  # more precise than a log line's generic finding
        return
    if key in cfg.errors:
        summary = f"The sharing config {key!r} that {run.name} uses does not parse."
        fix = (f"kubectl -n {cfg.namespace} edit configmap {cfg.name}   # fix key {key}, then "
               "restart the plugin\n" + fix_base)
        d = run.f.add("TIMESLICING_CONFIG_INVALID", summary, objects=[run.ref, cm_ref],
                      evidence=[f"configmap {cfg.label} key {key}: {cfg.errors[key]}",
                                f"{run.name} uses key {key} ({why})"], fix=fix)
        d.summary, d.fix = summary, fix
        return
    if not run.plugin_ok:
        return  # the plugin is down: it applied nothing, and its own finding says why
    wanted = replicas_of(cfg.entries[key])
    label_replicas = run.lab.get(REPLICAS_LABEL)
    physical = expected_gpu_count(run.node)
    for r in wanted:
        ev: list[str] = []
        cap = run.cap.get(r.resource)
        if label_replicas != str(r.replicas):
            ev.append(f"{REPLICAS_LABEL}=" + (label_replicas or "<absent>")
                      + f" (config {key!r} sets replicas: {r.replicas})")
        if physical and (cap or 0) != physical * r.replicas:
            ev.append(f"capacity {r.resource}: " + (f"{cap:g}" if cap is not None else "absent")
                      + f" (expected {physical * r.replicas} = {physical} GPUs x "
                      f"{r.replicas})")
        if ev:
            ev.insert(0, f"configmap {cfg.label} key {key} ({why}): {r.strategy} "
                         f"{r.resource.replace('.shared', '')} replicas {r.replicas}")
            fix = (f"kubectl -n {where.namespace} delete pod {where.pod}   # the plugin "
                   "reloads its config when it starts\n" + fix_base)
            run.f.add("TIMESLICING_CONFIG_INVALID",
                      f"Time-slicing for {run.name} is configured but not applied.",
                      conditions=frozenset({"not-applied"}),
                      objects=[run.ref, cm_ref], evidence=ev, fix=fix,
                      actions=[("restart-device-plugin", run.name)])
            return
    run.passed.append(CHECK_SHARING)


def _pod_word(states: list[object]) -> str:
    from handlers.chain.pods import PodState
    sts = [s for s in states if isinstance(s, PodState)]
    if not sts:
        return "-"
    if any(s.ready for s in sts):
        return "ready"
    st = sts[0]
    issue = st.primary
    if issue is not None and issue.reason and issue.reason not in ("Running", "NotReady"):
        return issue.reason
    if st.blocked_on:
        return f"Init:{st.blocked_on}"
    return "not ready"


def make_row(run: NodeRun, verdict: str) -> dict[str, str]:
    cap = run.cap
    alloc = run.alloc
    res = "nvidia.com/gpu" if "nvidia.com/gpu" in cap else next(iter(cap), "")
    gpus = f"{cap.get(res, 0):g}/{alloc.get(res, 0):g}" if res else "0/0"
    if res and res != "nvidia.com/gpu":
        gpus += f" ({res})"
    missing = [k.split("/", 1)[1] for k in ("nvidia.com/gpu.product", "nvidia.com/gpu.memory",
                                            "nvidia.com/gpu.family", "nvidia.com/gpu.compute.major")
               if not run.lab.get(k)]
    if not missing:
        lab = "ok"
    elif len(missing) == 4:
        lab = "no GFD" if nfd_running(run.node) else "no NFD/GFD"
    else:
        lab = "missing " + ",".join(m.replace("gpu.", "") for m in missing)
    drv = driver_version(run.node) or ""
    dstate = _pod_word(list(run.comp.get("driver", [])))
    driver_ds = [ds for c, ds in run.ctx.inv.component_daemonsets if c == "driver"]
    if dstate == "-" and driver_ds:
        dstate = "missing" if any(selects(ds, run.node) for ds in driver_ds) else "-"
    driver = drv or ("host" if dstate == "-" and not driver_ds else "")
    if dstate not in ("-", "ready"):
        driver = f"{driver} {dstate}".strip()
    runtime = str((run.node.get("status") or {}).get("nodeInfo", {}).get(
        "containerRuntimeVersion", "") or "-")
    strategy = run.lab.get(MIG_STRATEGY_LABEL)
    mig = "-"
    if (strategy and strategy != "none") or run.lab.get(MIG_CONFIG_LABEL):
        mig = f"{strategy or '?'}:{run.lab.get(MIG_CONFIG_LABEL, '-')}"
        if run.lab.get(MIG_CONFIG_STATE_LABEL):
            mig += f" ({run.lab[MIG_CONFIG_STATE_LABEL]})"
    replicas = run.lab.get(REPLICAS_LABEL)
    sharing = f"x{replicas}" if replicas and replicas != "1" else "-"
    if run.lab.get(DEVICE_PLUGIN_CONFIG_LABEL):
        sharing += f" ({run.lab[DEVICE_PLUGIN_CONFIG_LABEL]})"
    plugin = _pod_word(list(run.plugins)) if run.plugins else "missing"
    return {
        "node": run.name,
        "product": gpu_product(run.node),
        "gpus": gpus,
        "labels": lab,
        "driver": driver or "-",
        "toolkit": _pod_word(list(run.comp.get("toolkit", []))),
        "plugin": plugin,
        "runtime": runtime,
        "mig": mig,
        "sharing": sharing,
        "verdict": verdict,
    }
