"""The kinds gpubot reads, and where each lives in the Kubernetes REST API.

``KINDS[kind]`` gives the group, version, plural and scope of a kind; ``KindInfo.path``
builds the URL path for a list (all namespaces or one), a get, or a subresource.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from handlers.view import ViewError


@dataclass(frozen=True)
class KindInfo:
    kind: str
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool
    # Older versions to fall back to, newest first, when ``version`` is not served
    # (resource.k8s.io: v1 from Kubernetes 1.34, v1beta2 from 1.33, v1beta1 from 1.32).
    older: tuple[str, ...] = ()
    # A group every recent cluster serves: when none of its versions is, the read is an
    # error ("not checked"), not an empty list as for a CRD that is not installed.
    required: bool = False

    def at(self, version: str) -> KindInfo:
        """The same kind at another version of its group."""
        return KindInfo(self.kind, self.group, version, self.plural, self.namespaced,
                        required=self.required)

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.version, *self.older)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def builtin(self) -> bool:
        """Served by every API server; a CRD kind may not be installed."""
        return self.group in BUILTIN_GROUPS

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """``/api/v1/pods`` (all namespaces), ``/api/v1/namespaces/NS/pods/NAME/log``, ..."""
        parts = ["/api/v1" if not self.group else f"/apis/{self.group}/{self.version}"]
        if self.namespaced and namespace:
            parts.append(f"/namespaces/{quote(namespace, safe='')}")
        parts.append(f"/{self.plural}")
        if name is not None:
            parts.append(f"/{quote(name, safe='')}")
            if subresource:
                parts.append(f"/{subresource}")
        return "".join(parts)


BUILTIN_GROUPS = frozenset({"", "apps", "batch", "scheduling.k8s.io", "node.k8s.io"})

DRA_OLDER = ("v1beta2", "v1beta1")

_TABLE: tuple[KindInfo, ...] = (
    KindInfo("Node", "", "v1", "nodes", False),
    KindInfo("Pod", "", "v1", "pods", True),
    KindInfo("Event", "", "v1", "events", True),
    KindInfo("Namespace", "", "v1", "namespaces", False),
    KindInfo("ConfigMap", "", "v1", "configmaps", True),
    KindInfo("ResourceQuota", "", "v1", "resourcequotas", True),
    KindInfo("LimitRange", "", "v1", "limitranges", True),
    KindInfo("PersistentVolume", "", "v1", "persistentvolumes", False),
    KindInfo("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True),
    KindInfo("DaemonSet", "apps", "v1", "daemonsets", True),
    KindInfo("Deployment", "apps", "v1", "deployments", True),
    KindInfo("StatefulSet", "apps", "v1", "statefulsets", True),
    KindInfo("ReplicaSet", "apps", "v1", "replicasets", True),
    KindInfo("ControllerRevision", "apps", "v1", "controllerrevisions", True),
    KindInfo("Job", "batch", "v1", "jobs", True),
    KindInfo("CronJob", "batch", "v1", "cronjobs", True),
    KindInfo("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False),
    KindInfo("RuntimeClass", "node.k8s.io", "v1", "runtimeclasses", False),
    KindInfo("PodGroup", "scheduling.volcano.sh", "v1beta1", "podgroups", True),
    KindInfo("Workload", "kueue.x-k8s.io", "v1beta1", "workloads", True),
    KindInfo("ClusterQueue", "kueue.x-k8s.io", "v1beta1", "clusterqueues", False),
    KindInfo("LocalQueue", "kueue.x-k8s.io", "v1beta1", "localqueues", True),
    KindInfo("ResourceFlavor", "kueue.x-k8s.io", "v1beta1", "resourceflavors", False),
    KindInfo("Queue", "scheduling.volcano.sh", "v1beta1", "queues", False),
    KindInfo("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", True),
    KindInfo("RayJob", "ray.io", "v1", "rayjobs", True),
    KindInfo("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", True),
    *(KindInfo(kind, "resource.k8s.io", "v1", plural, namespaced, DRA_OLDER, required=True)
      for kind, plural, namespaced in (
          ("DeviceClass", "deviceclasses", False),
          ("ResourceSlice", "resourceslices", False),
          ("ResourceClaim", "resourceclaims", True),
          ("ResourceClaimTemplate", "resourceclaimtemplates", True))),
    KindInfo("ClusterPolicy", "nvidia.com", "v1", "clusterpolicies", False),
    KindInfo("NodeFeature", "nfd.k8s-sigs.io", "v1alpha1", "nodefeatures", True),
    # NUMA zones and their free GPUs, published by NFD's topology-updater or RTE.
    KindInfo("NodeResourceTopology", "topology.node.k8s.io", "v1alpha2",
             "noderesourcetopologies", False, ("v1alpha1",)),
)

KINDS: dict[str, KindInfo] = {k.kind: k for k in _TABLE}


def kind_info(kind: str) -> KindInfo:
    """The table entry; an unknown kind is a ``ViewError`` (the read shows as not checked)."""
    try:
        return KINDS[kind]
    except KeyError:
        raise ViewError(f"gpubot does not know where to read {kind} objects from a live "
                        "cluster", kind=kind) from None
