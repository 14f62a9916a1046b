"""What a chain finding's words are filled in with (``Where``), and the fix phrases several
stages share: logs to read, who manages a component, the ClusterPolicy patch."""

from __future__ import annotations

from dataclasses import dataclass

from handlers.chain.fixcontext import Setup


@dataclass
class Where:
    """What a fix names: the node, and the pod (namespace, name, container) involved."""

    node: str
    namespace: str = "gpu-operator"
    pod: str = "<pod>"
    container: str = ""
    driver: str = ""  # node driver version, e.g. 535.161.08
    cuda: str = ""  # highest CUDA the driver supports, e.g. 12.2
    setup: Setup | None = None  # what the cluster's setup allows (handlers.chain.fixcontext)


CUDA_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/"


def logs_cmd(w: Where, previous: bool = True) -> str:
    c = f" -c {w.container}" if w.container else ""
    prev = " --previous" if previous else ""
    return f"kubectl -n {w.namespace} logs {w.pod}{c}{prev}"


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


def policy_patch(w: Where, component: str, version: str) -> str:
    """``component``: the ClusterPolicy spec key; Setup names it ``plugin`` for devicePlugin."""
    attr = "plugin" if component == "devicePlugin" else component
    m = getattr(w.setup, attr, None) if w.setup else None
    name = (m.policy if m is not None and m.policy else "cluster-policy")
    now = f" (now {m.version})" if m is not None and m.version else ""
    return (f"ClusterPolicy {name}{now}: kubectl patch clusterpolicy {name} --type merge -p "
            f"'{{\"spec\":{{\"{component}\":{{\"version\":\"{version}\"}}}}}}'")


def has_operator(w: Where) -> bool:
    """A ClusterPolicy exists, or whether one does could not be checked."""
    m = w.setup.driver if w.setup else None
    return m is None or not m.known or bool(m.policy)
