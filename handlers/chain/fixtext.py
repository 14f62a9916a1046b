"""What a chain finding's words are filled in with (``Where``), and the fix parts several
stages share: logs to read, a pod to restart, who manages a component, the ClusterPolicy
patch."""

from __future__ import annotations

from dataclasses import dataclass

from handlers.chain.fixcontext import Setup
from handlers.kube.commands import kubectl, line, merge_patch, pods_on_node
from handlers.kube.workload import SpecOwner


@dataclass
class Where:
    """What a fix names: the node, and the pod (namespace, name, container) involved."""

    node: str
    namespace: str = "gpu-operator"
    pod: str = ""  # "" when no pod is known
    container: str = ""
    daemonset: str = ""  # the pod's DaemonSet, when it has one
    owner: SpecOwner | None = None  # what holds the pod's spec (handlers.kube.workload)
    driver: str = ""  # node driver version, e.g. 535.161.08
    cuda: str = ""  # highest CUDA the driver supports, e.g. 12.2
    setup: Setup | None = None  # what the cluster's setup allows (handlers.chain.fixcontext)
    # The device-plugin pods' label selector on this node, for a restart when its pod is
    # not the one ``pod`` names ("" when no plugin pod is known).
    plugin_selector: str = ""
    plugin_namespace: str = ""
    # (release, chart version) of the device-plugin chart that installed it, when one did.
    plugin_chart: tuple[str, str] = ("", "")


CUDA_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/"


def logs_cmd(w: Where, previous: bool = True, note: str = "") -> tuple[str, ...]:
    """The pod's log (of its last crash); nothing when no pod is known."""
    if not w.pod:
        return ()
    c = ("-c", w.container) if w.container else ()
    prev = ("--previous",) if previous else ()
    return (kubectl("logs", w.pod, *c, *prev, namespace=w.namespace, note=note),)


def restart_pod(w: Where, note: str = "") -> tuple[str, ...]:
    """Deletes the pod ``w`` names so that its DaemonSet makes a new one."""
    return (kubectl("delete", "pod", w.pod, namespace=w.namespace, note=note),) if w.pod else ()


def restart_plugin(w: Where, note: str = "") -> tuple[str, ...]:
    """Deletes the node's device-plugin pods by their selector (its DaemonSet makes new
    ones); nothing when no plugin pod is known."""
    if not w.plugin_selector:
        return ()
    return (kubectl("delete", "pod", "-l", w.plugin_selector, "--field-selector",
                    pods_on_node(w.node), namespace=w.plugin_namespace or w.namespace,
                    note=note),)


def managed(w: Where, component: str) -> bool:
    """True when the operator manages it, or when that could not be checked."""
    m = getattr(w.setup, component, None) if w.setup else None
    return m is None or m.yes or not m.known


def unknown(w: Where, component: str) -> bool:
    m = getattr(w.setup, component, None) if w.setup else None
    return m is not None and not m.known


def why(w: Where, component: str) -> str:
    m = getattr(w.setup, component, None) if w.setup else None
    return m.why if m is not None else ""


def policy_name(w: Where, component: str) -> str:
    """The ClusterPolicy's name, with its current version of ``component`` when set:
    "cluster-policy (now 550.54.15)". ``component``: the spec key (driver, devicePlugin)."""
    attr = "plugin" if component == "devicePlugin" else component
    m = getattr(w.setup, attr, None) if w.setup else None
    name = (m.policy if m is not None and m.policy else "cluster-policy")
    return name + (f" (now {m.version})" if m is not None and m.version else "")


# The device plugin's chart repository (NVIDIA/k8s-device-plugin README).
PLUGIN_CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"


def chart_upgrade(w: Where, *settings: str) -> tuple[str, ...]:
    """``helm upgrade`` of the device-plugin release at its chart version, with its values
    kept and ``settings`` set; nothing when no chart installed the plugin."""
    release, version = w.plugin_chart
    if not release:
        return ()
    sets = [x for kv in settings for x in ("--set", kv)]
    return (line("helm", "upgrade", release, "nvidia-device-plugin", "--repo",
                 PLUGIN_CHART_REPO, "--version", version, "--namespace",
                 w.plugin_namespace, "--reuse-values", *sets),)


def policy_of(w: Where) -> str:
    return policy_name(w, "driver").split(" ", 1)[0]


def policy_patch(w: Where, component: str, version: str) -> str:
    """``kubectl patch clusterpolicy`` setting ``spec.<component>.version``."""
    name = policy_name(w, component).split(" ", 1)[0]
    return merge_patch("clusterpolicy", name, {"spec": {component: {"version": version}}})


def has_operator(w: Where) -> bool:
    """A ClusterPolicy exists, or whether one does could not be checked."""
    m = w.setup.driver if w.setup else None
    return m is None or not m.known or bool(m.policy)
