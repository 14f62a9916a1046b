"""The resource types the fake API server serves, and the discovery documents built from them.

Each ``ResourceType`` says what the apiserver's discovery says about it (names, kind, verbs,
short names, categories, subresources) plus the server-side behaviour the fake imitates:
which field selectors it accepts, whether DELETE answers with the object or a ``Status``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")
META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # Field selectors the apiserver accepts for this resource (beyond none at all).
    fields: frozenset[str] = META_FIELDS
    # Fields that get an index (an "=" selector on them does not scan).
    indexed: tuple[str, ...] = ()
    status_subresource: bool = True
    extra_subresources: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (name, kind, verbs)
    return_deleted: bool = False  # DELETE answers with the object (else a Status)
    builtin: bool = True  # list items carry no kind/apiVersion (typed lists do not)
    # Objects live in another resource's storage (events.k8s.io events -> core events).
    storage_of: str | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``pods``, ``daemonsets.apps``: how the apiserver names the resource in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def storage(self) -> str:
        return self.storage_of or self.qualified

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def core_style_errors(self) -> bool:
        # Core types convert field labels with their own function ("field label not
        # supported: x"); everything else uses the metav1 default conversion.
        return self.group == ""

    def field_error(self, label: str) -> str:
        if self.core_style_errors:
            return f"field label not supported: {label}"
        allowed = ", ".join(f'"{f}"' for f in sorted(self.fields))
        return f'"{label}" is not a known field selector: only {allowed}'

    def api_resources(self) -> list[dict[str, Any]]:
        main: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(ALL_VERBS),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        out = [main]
        if self.status_subresource:
            out.append({"name": f"{self.plural}/status", "singularName": "",
                        "namespaced": self.namespaced, "kind": self.kind,
                        "verbs": list(STATUS_VERBS)})
        for sub, kind, verbs in self.extra_subresources:
            out.append({"name": f"{self.plural}/{sub}", "singularName": "",
                        "namespaced": self.namespaced, "kind": kind, "verbs": list(verbs)})
        return out


POD_FIELDS = META_FIELDS | {"spec.nodeName", "spec.schedulerName", "status.phase"}
EVENT_FIELDS = META_FIELDS | {
    "involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
    "involvedObject.uid", "reason", "type",
}
# events.k8s.io/v1 names for the same fields (its conversion maps them onto core ones).
EVENTS_V1_FIELDS = META_FIELDS | {
    "regarding.kind", "regarding.name", "regarding.namespace", "regarding.uid", "reason", "type",
}
EVENTS_V1_TO_CORE = {f"regarding.{k}": f"involvedObject.{k}" for k in
                     ("kind", "name", "namespace", "uid")}

_R = ResourceType
BUILTIN: tuple[ResourceType, ...] = (
    # core/v1
    _R("", "v1", "pods", "pod", "Pod", True, ("po",), ("all",), fields=POD_FIELDS,
       indexed=("spec.nodeName",), return_deleted=True,
       extra_subresources=(("log", "Pod", ("get",)),)),
    _R("", "v1", "nodes", "node", "Node", False, ("no",),
       fields=META_FIELDS | {"spec.unschedulable"}),
    _R("", "v1", "events", "event", "Event", True, ("ev",), fields=EVENT_FIELDS,
       indexed=("involvedObject.name",), status_subresource=False),
    _R("", "v1", "namespaces", "namespace", "Namespace", False, ("ns",),
       fields=META_FIELDS | {"status.phase"}, return_deleted=True),
    _R("", "v1", "configmaps", "configmap", "ConfigMap", True, ("cm",),
       status_subresource=False),
    _R("", "v1", "resourcequotas", "resourcequota", "ResourceQuota", True, ("quota",)),
    _R("", "v1", "limitranges", "limitrange", "LimitRange", True, ("limits",),
       status_subresource=False),
    _R("", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", False, ("pv",),
       return_deleted=True),
    _R("", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim",
       True, ("pvc",), return_deleted=True),
    _R("", "v1", "services", "service", "Service", True, ("svc",), ("all",),
       return_deleted=True),
    _R("", "v1", "replicationcontrollers", "replicationcontroller", "ReplicationController",
       True, ("rc",), ("all",)),
    # apps/v1
    _R("apps", "v1", "daemonsets", "daemonset", "DaemonSet", True, ("ds",), ("all",)),
    _R("apps", "v1", "deployments", "deployment", "Deployment", True, ("deploy",), ("all",)),
    _R("apps", "v1", "replicasets", "replicaset", "ReplicaSet", True, ("rs",), ("all",)),
    _R("apps", "v1", "statefulsets", "statefulset", "StatefulSet", True, ("sts",), ("all",)),
    _R("apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", True,
       status_subresource=False),
    # batch/v1
    _R("batch", "v1", "jobs", "job", "Job", True, (), ("all",)),
    _R("batch", "v1", "cronjobs", "cronjob", "CronJob", True, ("cj",), ("all",)),
    # others
    _R("scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass", False,
       ("pc",), status_subresource=False),
    _R("node.k8s.io", "v1", "runtimeclasses", "runtimeclass", "RuntimeClass", False,
       status_subresource=False),
    # the sentinel's leader election (bot/sentinel/lease.py)
    _R("coordination.k8s.io", "v1", "leases", "lease", "Lease", True,
       status_subresource=False),
    _R("events.k8s.io", "v1", "events", "event", "Event", True, ("ev",),
       fields=EVENTS_V1_FIELDS, status_subresource=False, storage_of="events"),
    # custom resources (served like the apiextensions-apiserver serves CRs)
    _R("scheduling.volcano.sh", "v1beta1", "podgroups", "podgroup", "PodGroup", True,
       ("pg", "podgroup-v1beta1"), builtin=False),
    _R("kueue.x-k8s.io", "v1beta1", "workloads", "workload", "Workload", True,
       ("wl",), ("kueue",), builtin=False),
    _R("nvidia.com", "v1", "clusterpolicies", "clusterpolicy", "ClusterPolicy", False,
       builtin=False),
    _R("kueue.x-k8s.io", "v1beta1", "clusterqueues", "clusterqueue", "ClusterQueue", False,
       ("cq",), ("kueue",), builtin=False),
    _R("kueue.x-k8s.io", "v1beta1", "localqueues", "localqueue", "LocalQueue", True,
       ("queue", "queues", "lq"), ("kueue",), builtin=False),
    _R("kueue.x-k8s.io", "v1beta1", "resourceflavors", "resourceflavor", "ResourceFlavor",
       False, ("flavor", "flavors", "rf"), ("kueue",), builtin=False),
    _R("scheduling.volcano.sh", "v1beta1", "queues", "queue", "Queue", False,
       ("q", "queue-v1beta1"), builtin=False),
    _R("jobset.x-k8s.io", "v1alpha2", "jobsets", "jobset", "JobSet", True, builtin=False),
    _R("ray.io", "v1", "rayjobs", "rayjob", "RayJob", True, builtin=False),
    _R("kubeflow.org", "v1", "pytorchjobs", "pytorchjob", "PyTorchJob", True, builtin=False),
    _R("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", "noderesourcetopology",
       "NodeResourceTopology", False, ("nrt",), status_subresource=False, builtin=False),
)
# Dynamic Resource Allocation, served at one version of resource.k8s.io: the version the
# snapshot's objects carry (v1beta1 on 1.32, v1beta2 on 1.33, v1 from 1.34; see seed.py).
DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")


def dra_types(version: str) -> tuple[ResourceType, ...]:
    return (
        _R(DRA_GROUP, version, "deviceclasses", "deviceclass", "DeviceClass", False,
           status_subresource=False),
        _R(DRA_GROUP, version, "resourceslices", "resourceslice", "ResourceSlice", False,
           status_subresource=False),
        _R(DRA_GROUP, version, "resourceclaims", "resourceclaim", "ResourceClaim", True),
        _R(DRA_GROUP, version, "resourceclaimtemplates", "resourceclaimtemplate",
           "ResourceClaimTemplate", True, status_subresource=False),
    )


# Served only when asked for (``FakeKube(extra_kinds=["NodeFeature"])``): by default these
# CRDs are "not installed".
OPTIONAL: tuple[ResourceType, ...] = (
    _R("nfd.k8s-sigs.io", "v1alpha1", "nodefeatures", "nodefeature", "NodeFeature", True,
       status_subresource=False, builtin=False),
)

# The order /apis lists groups in (the apiserver's group priority, CRD groups last).
GROUP_ORDER = ("apps", "events.k8s.io", "batch", "scheduling.k8s.io", "node.k8s.io",
               "resource.k8s.io")


@dataclass
class Registry:
    types: list[ResourceType] = field(default_factory=lambda: [*BUILTIN, *dra_types("v1")])

    def __post_init__(self) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[str, ResourceType] = {}
        self._index()

    def _index(self) -> None:
        self._by_path = {(t.group, t.version, t.plural): t for t in self.types}
        self._by_kind = {}
        for t in self.types:
            # The first type of a kind owns it (core events before events.k8s.io events).
            self._by_kind.setdefault(t.kind, t)

    def add(self, rtype: ResourceType) -> None:
        self.types = [t for t in self.types
                      if (t.group, t.version, t.plural) != (rtype.group, rtype.version,
                                                            rtype.plural)]
        self.types.append(rtype)
        self._index()

    def serve_dra(self, version: str) -> None:
        """Serve resource.k8s.io at ``version`` only."""
        self.types = [t for t in self.types if t.group != DRA_GROUP] + list(dra_types(version))
        self._index()

    def remove(self, kind: str) -> None:
        """Serve no resource of this kind (a CRD that is not installed). A project installs
        its CRDs together: the other custom resources of its group go too."""
        gone = {t.group for t in self.types if t.kind == kind and not t.builtin}
        self.types = [t for t in self.types if t.kind != kind and t.group not in gone]
        self._index()

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, kind: str) -> ResourceType | None:
        return self._by_kind.get(kind)

    def storages(self) -> Iterable[ResourceType]:
        """One type per storage (the one whose storage it is)."""
        return [t for t in self.types if t.storage_of is None]

    def groups(self) -> list[tuple[str, list[str]]]:
        """(group, versions) in discovery order, core group excluded."""
        seen: dict[str, list[str]] = {}
        for t in self.types:
            if t.group:
                versions = seen.setdefault(t.group, [])
                if t.version not in versions:
                    versions.append(t.version)
        order = {g: i for i, g in enumerate(GROUP_ORDER)}
        return sorted(seen.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))

    # -- discovery documents ------------------------------------------------------------------

    def api_versions(self, server_address: str) -> dict[str, Any]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
            ],
        }

    def api_group(self, group: str) -> dict[str, Any] | None:
        for name, versions in self.groups():
            if name == group:
                gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
                return {"kind": "APIGroup", "apiVersion": "v1", "name": name,
                        "versions": gvs, "preferredVersion": gvs[0]}
        return None

    def api_group_list(self) -> dict[str, Any]:
        groups = []
        for name, _ in self.groups():
            doc = self.api_group(name)
            assert doc is not None
            doc.pop("kind")
            doc.pop("apiVersion")
            groups.append(doc)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        types = [t for t in self.types if t.group == group and t.version == version]
        if not types:
            return None
        resources: list[dict[str, Any]] = []
        for t in types:
            resources.extend(t.api_resources())
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": resources}
