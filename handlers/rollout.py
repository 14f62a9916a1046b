"""A recent rollout as the cause: what a DaemonSet's or Deployment's new revision changed,
when, and the rollback to the revision before it.

DaemonSet revisions are ControllerRevision objects (owned by the DaemonSet, ``revision``
numbered, ``data`` holding the pod template; their ``controller-revision-hash`` label is
the one the DaemonSet's pods carry). Deployment revisions are its ReplicaSets (annotation
``deployment.kubernetes.io/revision``, label ``pod-template-hash`` on their pods). See
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/controller-revision-v1/
and ``kubectl rollout undo --to-revision`` (kubectl/pkg/polymorphichelpers/rollback.go).

A rollback is offered only when the failing pods run the newest revision and an older one
exists; a DaemonSet owned by the GPU operator's ClusterPolicy is rolled back through the
ClusterPolicy (the operator would undo a ``rollout undo``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from handlers.gpu import name_of, ns_of
from handlers.kube.commands import kubectl
from handlers.model import Fix
from handlers.timefmt import age_text, seconds_since
from handlers.view import Obj, Reader

if TYPE_CHECKING:
    from handlers.model import Finding

REVISION_HASH = "controller-revision-hash"
POD_TEMPLATE_HASH = "pod-template-hash"
DEPLOY_REVISION = "deployment.kubernetes.io/revision"
RECENT_SECONDS = 7 * 24 * 3600  # a rollout older than a week is not "recent"


@dataclass
class Rollout:
    kind: str  # DaemonSet | Deployment
    name: str
    namespace: str
    revision: int
    previous: int
    when: str  # creation time of the new revision
    age: str  # "2h15m ago"
    changes: list[str] = field(default_factory=list)
    owner: str = ""  # "ClusterPolicy cluster-policy" when the operator owns the DaemonSet
    previous_template: Mapping[str, Any] | None = None  # the pod template rolled back to

    def evidence(self) -> str:
        what = "; ".join(self.changes) or "the pod template changed"
        return (f"{self.kind.lower()} {self.namespace}/{self.name} rolled to revision "
                f"{self.revision} at {self.when} ({self.age}): {what}")

    def fix(self) -> Fix:
        if self.owner:
            kind, _, name = self.owner.partition(" ")
            return Fix(f"Roll back the change of revision {self.revision} ({self.age}) in "
                       f"{self.owner}: it owns {self.kind.lower()}/{self.name} and would undo a "
                       "kubectl rollout undo; set the changed field back there.",
                       (kubectl("edit", kind.lower(), name),) if kind == "ClusterPolicy"
                       else ())
        return Fix(f"Roll back the change of {self.age} (revision {self.revision}).", (
            kubectl("rollout", "undo", f"{self.kind.lower()}/{self.name}",
                    f"--to-revision={self.previous}", namespace=self.namespace),))


def _labels(o: Obj) -> Mapping[str, str]:
    return (o.get("metadata") or {}).get("labels") or {}


def _owned_by(o: Obj, owner: Obj) -> bool:
    uid = (owner.get("metadata") or {}).get("uid")
    return any((uid and r.get("uid") == uid) or (r.get("kind") == owner.get("kind")
                                                  and r.get("name") == name_of(owner))
               for r in (o.get("metadata") or {}).get("ownerReferences") or [])


def _containers(template: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    spec = template.get("spec") or {}
    return {str(c.get("name")): c for key in ("initContainers", "containers")
            for c in spec.get(key) or []}


def template_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What a rollout changed in a pod template, field by field, the way people name it."""
    out = []
    oc, nc = _containers(old), _containers(new)
    for name, c in nc.items():
        prev = oc.get(name)
        if prev is None:
            out.append(f"container {name} added ({c.get('image')})")
            continue
        for key in ("image", "args", "command", "env", "resources", "securityContext",
                    "volumeMounts"):
            if prev.get(key) != c.get(key):
                if key == "image":
                    out.append(f"container {name} image {prev.get('image')} -> {c.get('image')}")
                else:
                    out.append(f"container {name} {key} changed")
    out += [f"container {name} removed" for name in oc if name not in nc]
    os_, ns_ = old.get("spec") or {}, new.get("spec") or {}
    for key in ("nodeSelector", "tolerations", "affinity", "volumes", "runtimeClassName",
                "hostPID", "priorityClassName", "serviceAccountName"):
        if os_.get(key) != ns_.get(key):
            out.append(f"{key} changed")
    return out


def _template_of_revision(cr: Obj) -> Mapping[str, Any]:
    data = cr.get("data") or {}
    return ((data.get("spec") or {}).get("template")) or {}


def daemonset_rollout(reader: Reader, ds: Obj, pods: list[Obj]) -> Rollout | None:
    """The DaemonSet's recent rollout that ``pods`` (failing) run; None when there is none
    or the revisions could not be read (the reader lists them as not checked)."""
    ns = ns_of(ds)
    revisions = reader.list("ControllerRevision", ns)
    mine = sorted((r for r in revisions if _owned_by(r, ds)),
                  key=lambda r: int(r.get("revision") or 0))
    if len(mine) < 2:
        return None
    new, old = mine[-1], mine[-2]
    hash_ = _labels(new).get(REVISION_HASH)
    if not hash_ or not pods or not all(_labels(p).get(REVISION_HASH) == hash_ for p in pods):
        return None
    return _recent(reader, "DaemonSet", ds, new, old, int(new.get("revision") or 0),
                   int(old.get("revision") or 0),
                   template_changes(_template_of_revision(old), _template_of_revision(new)))


def deployment_rollout(reader: Reader, deploy: Obj, pods: list[Obj]) -> Rollout | None:
    """The same for a Deployment, whose revisions are its ReplicaSets."""
    ns = ns_of(deploy)
    rss = [rs for rs in reader.list("ReplicaSet", ns) if _owned_by(rs, deploy)
           and str(((rs.get("metadata") or {}).get("annotations") or {}).get(
               DEPLOY_REVISION, "")).isdigit()]
    rss.sort(key=lambda rs: int(rs["metadata"]["annotations"][DEPLOY_REVISION]))
    if len(rss) < 2:
        return None
    new, old = rss[-1], rss[-2]
    hash_ = _labels(new).get(POD_TEMPLATE_HASH)
    if pods and hash_ and not all(_labels(p).get(POD_TEMPLATE_HASH) == hash_ for p in pods):
        return None
    before = (old.get("spec") or {}).get("template") or {}
    ro = _recent(reader, "Deployment", deploy, new, old,
                 int(new["metadata"]["annotations"][DEPLOY_REVISION]),
                 int(old["metadata"]["annotations"][DEPLOY_REVISION]),
                 template_changes(before, (new.get("spec") or {}).get("template") or {}))
    if ro is not None:
        ro.previous_template = before
    return ro


def _recent(reader: Reader, kind: str, owner: Obj, new: Obj, old: Obj, rev: int, prev: int,
            changes: list[str]) -> Rollout | None:
    when = str((new.get("metadata") or {}).get("creationTimestamp") or "")
    secs = seconds_since(reader.now(), when)
    if secs is None or secs > RECENT_SECONDS:
        return None
    policy = next((r.get("name") for r in (owner.get("metadata") or {}).get("ownerReferences")
                   or [] if r.get("kind") == "ClusterPolicy"), None)
    return Rollout(kind, name_of(owner), ns_of(owner), rev, prev, when,
                   f"{age_text(secs)} ago", changes,
                   f"ClusterPolicy {policy}" if policy else "")


# Findings about failing pods of a DaemonSet that a bad rollout can cause.
ROLLOUT_CODES = frozenset({
    "DEVICE_PLUGIN_CRASHLOOP", "DEVICE_PLUGIN_IMAGE_PULL", "OPERATOR_IMAGE_PULL",
    "OPERATOR_COMPONENT_FAILING", "DRIVER_NOT_READY", "CONTAINER_RUNTIME_NOT_CONFIGURED",
    "DEVICE_PLUGIN_NOT_PRIVILEGED", "NVML_INIT_FAILED", "TIMESLICING_CONFIG_INVALID",
})


def with_rollouts(reader: Reader, findings: list[Finding]) -> list[Finding]:
    """Findings whose failing pods run a DaemonSet's recent new revision: the change and
    its rollback lead the fix."""
    out = []
    for f in findings:
        ro = _rollout_for(reader, f) if f.code in ROLLOUT_CODES else None
        if ro is None:
            out.append(f)
            continue
        out.append(replace(f, evidence=(*f.evidence, ro.evidence()), fix=ro.fix().then(f.fix)))
    return out


def _rollout_for(reader: Reader, f: Finding) -> Rollout | None:
    pods = [p for o in f.objects if o.kind == "Pod"
            and (p := reader.get("Pod", o.name, o.namespace)) is not None]
    owners: dict[tuple[str, str], list[Obj]] = {}
    for p in pods:
        for r in (p.get("metadata") or {}).get("ownerReferences") or []:
            if r.get("kind") == "DaemonSet":
                owners.setdefault((ns_of(p), str(r.get("name"))), []).append(p)
    for (ns, name), mine in owners.items():
        ds = reader.get("DaemonSet", name, ns)
        if ds is None:
            continue
        ds.setdefault("kind", "DaemonSet")
        found = daemonset_rollout(reader, ds, mine)
        if found is not None:
            return found
    return None
