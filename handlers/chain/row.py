"""One doctor table row per GPU node: product, GPUs capacity/allocatable, labels, driver,
toolkit, plugin, runtime, MIG, sharing, and the chain's verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from handlers.chain.placement import selects
from handlers.chain.pods import PodState
from handlers.chain.sharing import REPLICAS_LABEL
from handlers.gpu import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_STRATEGY_LABEL,
    driver_version,
    gpu_product,
    nfd_running,
)

if TYPE_CHECKING:
    from handlers.chain.facts import NodeFacts

MIG_CONFIG_LABEL = "nvidia.com/mig.config"


def _pod_word(sts: list[PodState]) -> str:
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


def make_row(run: NodeFacts, verdict: str) -> dict[str, str]:
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
    dstate = _pod_word(run.comp.get("driver", []))
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
    # No plugin pod yet GPUs advertised: the plugin runs outside Kubernetes (AKS's managed
    # plugin is a systemd unit), as "host" says of a preinstalled driver.
    plugin = _pod_word(run.plugins) if run.plugins else "host" if run.advertised else "missing"
    return {
        "node": run.name,
        "product": gpu_product(run.node),
        "gpus": gpus,
        "labels": lab,
        "driver": driver or "-",
        "toolkit": _pod_word(run.comp.get("toolkit", [])),
        "plugin": plugin,
        "runtime": runtime,
        "mig": mig,
        "sharing": sharing,
        "verdict": verdict,
    }
