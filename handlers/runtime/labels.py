"""Which pod, namespace, node and GPU a series is about, whatever exporter wrote it.

dcgm-exporter labels a GPU's series with the pod holding it as ``pod``/``namespace``/
``container`` (``pod_name``/``pod_namespace``/``container_name`` with its old-namespace
option), the node as ``Hostname`` and the GPU as ``gpu`` (index) and ``UUID``
(https://github.com/NVIDIA/dcgm-exporter/blob/main/internal/pkg/transformation/const.go).
Scraped through a ServiceMonitor without ``honorLabels``, Prometheus renames the clashing
labels to ``exported_pod``/``exported_namespace`` and puts the exporter's own pod in
``pod``: the exported labels therefore win. kube-state-metrics writes ``pod``,
``namespace`` and ``node``.
"""

from __future__ import annotations

from collections.abc import Mapping

POD = ("exported_pod", "pod_name", "pod")
NAMESPACE = ("exported_namespace", "pod_namespace", "namespace")
NODE = ("node", "kubernetes_node", "Hostname", "hostname", "nodename")
GPU = ("gpu", "UUID", "uuid", "device")

# The exporter's own pod, left in ``pod`` when the GPU is held by nobody.
_EXPORTER_PODS = ("dcgm-exporter", "nvidia-dcgm-exporter")


def _first(labels: Mapping[str, str], keys: tuple[str, ...]) -> str:
    for k in keys:
        v = labels.get(k)
        if v:
            return v
    return ""


def pod_of(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """(namespace, pod) of the workload a series is about; None when no pod holds it."""
    pod = _first(labels, POD)
    if not pod or (pod == labels.get("pod") and not labels.get("exported_pod")
                   and pod.startswith(_EXPORTER_PODS)):
        return None
    if labels.get("exported_pod"):
        ns = labels.get("exported_namespace") or ""
    else:
        ns = _first(labels, ("pod_namespace", "namespace"))
    return ns, pod


def node_of(labels: Mapping[str, str]) -> str:
    return _first(labels, NODE)


def gpu_of(labels: Mapping[str, str]) -> str:
    """``gpu 0 (GPU-5f2c...)``: the index and the UUID when the series has them."""
    index, uuid = labels.get("gpu") or labels.get("device") or "", (
        labels.get("UUID") or labels.get("uuid") or "")
    if index and uuid:
        return f"gpu {index} ({uuid})"
    return f"gpu {index}" if index else uuid or "a GPU"
