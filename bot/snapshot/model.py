"""Types shared by the snapshot loader and view: problems, errors, the kinds kept."""

from __future__ import annotations

from dataclasses import dataclass

from handlers.view import ViewError


@dataclass(frozen=True)
class LoadProblem:
    """Something in the snapshot that could not be read; the rest of the snapshot still is.

    ``where`` points inside the file (``"line 120, column 5"``, ``"document 3"``,
    ``"document 1, item 4"``) when that is known.
    """

    path: str
    where: str | None
    message: str
    # The namespace of the object it is about, if one: a channel restricted to other
    # namespaces is not told about it.
    namespace: str | None = None

    def __str__(self) -> str:
        loc = f"{self.path} ({self.where})" if self.where else self.path
        return f"{loc}: {self.message}"


class SnapshotError(ViewError):
    """The snapshot as a whole is unusable: missing path, or nothing in it could be read."""


# What the handlers read. Everything else is dropped on load: less memory, and Secrets are
# never held at all.
USED_KINDS = frozenset(
    {
        "Node",
        "Pod",
        "Event",
        "Namespace",
        "DaemonSet",
        "Deployment",
        "StatefulSet",
        "ReplicaSet",
        "ControllerRevision",
        "Job",
        "CronJob",
        "ResourceQuota",
        "LimitRange",
        "PriorityClass",
        "RuntimeClass",
        "ConfigMap",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "PodGroup",
        "Workload",
        "ClusterQueue",
        "LocalQueue",
        "ResourceFlavor",
        "Queue",
        "JobSet",
        "RayJob",
        "PyTorchJob",
        "DeviceClass",
        "ResourceSlice",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "ClusterPolicy",
        "NodeFeature",
        "NodeResourceTopology",
    }
)

# File stem -> kind, for list items that carry no kind and sit in a list without one
# (`kubectl cluster-info dump` names its files after the resource).
FILE_KINDS = {
    "nodes": "Node",
    "pods": "Pod",
    "events": "Event",
    "namespaces": "Namespace",
    "daemonsets": "DaemonSet",
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "replicasets": "ReplicaSet",
    "controllerrevisions": "ControllerRevision",
    "jobs": "Job",
    "cronjobs": "CronJob",
    "resourcequotas": "ResourceQuota",
    "limitranges": "LimitRange",
    "priorityclasses": "PriorityClass",
    "runtimeclasses": "RuntimeClass",
    "configmaps": "ConfigMap",
    "persistentvolumes": "PersistentVolume",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "podgroups": "PodGroup",
    "workloads": "Workload",
    "clusterqueues": "ClusterQueue",
    "localqueues": "LocalQueue",
    "resourceflavors": "ResourceFlavor",
    "queues": "Queue",
    "jobsets": "JobSet",
    "rayjobs": "RayJob",
    "pytorchjobs": "PyTorchJob",
    "deviceclasses": "DeviceClass",
    "resourceslices": "ResourceSlice",
    "resourceclaims": "ResourceClaim",
    "resourceclaimtemplates": "ResourceClaimTemplate",
    "clusterpolicies": "ClusterPolicy",
    "nodefeatures": "NodeFeature",
    "services": "Service",
    "replication-controllers": "ReplicationController",
    "secrets": "Secret",
}

# Files `cluster-info dump --output-directory` writes inside DIR/<namespace>/: their
# directory name is the namespace of objects that lack one.
# What `kubectl cluster-info dump` prints, each as its typed list (PodList, ...).
DUMP_KINDS = frozenset({"Node", "Pod", "Event", "ReplicationController", "Service", "DaemonSet",
                        "Deployment", "ReplicaSet"})
DUMP_NAMESPACE_FILES = frozenset(
    {"events", "replication-controllers", "services", "daemonsets", "deployments",
     "replicasets", "pods"}
)
