"""A pod the kubelet's Topology Manager refused: what it had to align, and what would fit.

The scheduler places pods by node totals; the kubelet's Topology Manager then asks the
device manager (GPUs, per NUMA node as the device plugin reports them), the CPU manager
(static policy, Guaranteed pods with whole CPUs) and the memory manager (Static policy) for
NUMA hints, and under ``single-numa-node`` (or ``restricted``, when a narrower set of NUMA
nodes could serve) refuses a pod it cannot align: ``TopologyAffinityError``, phase Failed,
never retried on that node. Its controller makes a new pod, which the NUMA-blind scheduler
may send to the same node (pytorch/ci-infra#696: four 4-GPU pods refused in 90 s).

``explain`` reads what the data shows (the kubelet's policy, the node's NUMA layout, the
GPUs in use there, the pod's request) and says which fixes exist: another node where one
NUMA node has the GPUs free, a GPU count that fits one NUMA node, the policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from handlers import kubeletconfig, numa
from handlers.gpu import GPU_RESOURCE, is_gpu_resource, name_of, ns_of
from handlers.kube.admission import Refusal
from handlers.kube.commands import kubectl
from handlers.kube.resources import container_requests, is_terminated, pod_requests, same_pod_as
from handlers.kube.workload import spec_owner
from handlers.model import Fix, Patch
from handlers.view import Obj, Reader

_MAX_NODES = 3
_BATCH = 16
_MAX_HOLDERS = 4
_NODES_DOC = "https://kubernetes.io/docs/tasks/administer-cluster/topology-manager/"


@dataclass
class Explanation:
    """The refusal said in full: DEVICE_ADMISSION_FAILED's words and evidence, and, when the
    pod's GPUs had to share a NUMA node, MULTI_GPU_TOPOLOGY's (``gpu_*``)."""

    summary: str
    evidence: list[str]
    fix: Fix
    gpu_summary: str = ""
    gpu_evidence: list[str] = field(default_factory=list)
    gpu_fix: Fix = field(default_factory=Fix)
    not_checked: list[str] = field(default_factory=list)

    @property
    def gpus_must_align(self) -> bool:
        return bool(self.gpu_summary)


def gpu_ask(pod: Obj, scope: str) -> tuple[str | None, int]:
    """The GPU resource the pod asks for and how many one alignment must hold: the whole pod
    with scope ``pod``, its largest container with scope ``container``."""
    req = {r: v for r, v in pod_requests(pod).items() if is_gpu_resource(r) and v > 0}
    if not req:
        return None, 0
    res = GPU_RESOURCE if GPU_RESOURCE in req else sorted(req)[0]
    if scope == "pod":
        return res, int(req[res])
    spec = pod.get("spec") or {}
    per = [container_requests(c).get(res, 0.0) for key in ("initContainers", "containers")
           for c in spec.get(key) or ()]
    return res, int(max(per, default=req[res]))


def _guaranteed(pod: Obj) -> bool:
    qos = (pod.get("status") or {}).get("qosClass")
    if qos:
        return bool(qos == "Guaranteed")
    for c in (pod.get("spec") or {}).get("containers") or ():
        res = c.get("resources") or {}
        lim, req = res.get("limits") or {}, res.get("requests") or {}
        for k in ("cpu", "memory"):
            if k not in lim or str(req.get(k, lim[k])) != str(lim[k]):
                return False
    return True


def _in_use(reader: Reader, node: str, res: str, pod: Obj) -> tuple[int, list[str]]:
    """GPUs of ``res`` the node's other live pods hold, and who holds them."""
    mine = same_pod_as(pod)
    total, holders = 0, []
    for p in reader.pods_on([node])[node]:
        if mine(p) or is_terminated(p):
            continue
        n = int(pod_requests(p).get(res, 0))
        if n:
            total += n
            holders.append(f"{ns_of(p)}/{name_of(p)} ({n})")
    return total, holders


def _allocatable(node: Obj, res: str) -> int:
    try:
        return int(float(((node.get("status") or {}).get("allocatable") or {}).get(res, 0)))
    except (TypeError, ValueError):
        return 0


def _schedulable(node: Obj) -> bool:
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


def _nodes_with_room(reader: Reader, here: str, res: str, need: int) -> list[str]:
    """Other schedulable nodes where one NUMA node surely has ``need`` GPUs free now (at most
    a few: their pods are read a batch at a time, only where the layout is known)."""
    found: list[str] = []
    nrts = numa.topologies(reader)
    laid = [(n, lay) for n in reader.list("Node") if name_of(n) != here and _schedulable(n)
            and _allocatable(n, res) >= need
            and (lay := numa.layout(n, nrts.get(name_of(n)), res)) is not None
            and lay.gpus_per_numa_node >= need]
    for start in range(0, len(laid), _BATCH):
        batch = laid[start:start + _BATCH]
        pods = reader.pods_on([name_of(n) for n, _ in batch])
        for n, lay in batch:
            used = sum(int(pod_requests(p).get(res, 0)) for p in pods[name_of(n)]
                       if not is_terminated(p))
            free = min(lay.most_free_surely(used), _allocatable(n, res) - used)
            if free >= need:
                found.append(f"{name_of(n)} ({free} free on one NUMA node"
                             + (" as published" if lay.free is not None else "")
                             + f", {used} of {_allocatable(n, res)} in use)")
        if len(found) >= _MAX_NODES:
            break
    return found


def _policy_fix(node: str, cfg: kubeletconfig.KubeletConfig | None) -> str:
    field_text = ("topologyManagerPolicy: best-effort in the KubeletConfiguration (flag "
                  "--topology-manager-policy=best-effort), which aligns where it can and admits "
                  "the pod either way")
    where = (f"set it on the nodes meant for such pods, not on every node: {node}'s "
             "/var/lib/kubelet/config.yaml (or the node pool's kubelet configuration on a "
             "managed pool), then restart the kubelet")
    if cfg is not None and not cfg.per_node:
        where += (f"; kubeadm's {kubeletconfig.NAMESPACE}/{kubeletconfig.CONFIGMAP} gives every "
                  "node its setting at join and upgrade")
    return f"{field_text}: {where}."


def explain(reader: Reader, pod: Obj, node: Obj, refused: Refusal) -> Explanation:
    """``refused`` (a topology refusal of ``pod`` on ``node``) with its evidence and fixes."""
    name = name_of(node)
    reading = kubeletconfig.read(reader, node)
    cfg = reading.config
    ev = [refused.evidence()]
    not_checked = list(reading.not_checked)
    if cfg is not None:
        ev += cfg.evidence()
    policy = cfg.topology_policy if cfg is not None and cfg.refuses else None
    if cfg is not None and not cfg.refuses:
        ev.append(f"the refusal shows that {name}'s kubelet runs another policy than "
                  f"{cfg.source} says (only {' and '.join(kubeletconfig.REFUSING_POLICIES)} "
                  "refuse a pod): its own flags or config file set it")
    elif cfg is None:
        ev.append(f"only topologyManagerPolicy {' or '.join(kubeletconfig.REFUSING_POLICIES)} "
                  f"refuses a pod (best-effort and none admit it): {name}'s kubelet runs one "
                  f"of them ({_NODES_DOC})")
    scope = cfg.topology_scope if cfg is not None else "container"
    res, need = gpu_ask(pod, scope)
    policy_text = f"topologyManagerPolicy {policy}" if policy else (
        f"topologyManagerPolicy {' or '.join(kubeletconfig.REFUSING_POLICIES)}")
    unit = "the pod's containers together" if scope == "pod" else "its largest container"
    lay = numa.layout(node, numa.topologies(reader).get(name), res or GPU_RESOURCE)
    fixes: list[str] = []
    gpu_ev: list[str] = []
    gpu_fix: list[str] = []
    move = Fix()  # the pod deleted and pinned to nodes with room
    cpu_limit = _cpu_limit(pod, node, cfg, lay, ev)
    cpu_over = cpu_limit is not None
    if cpu_limit is not None:
        fixes.append(f"Ask for at most {cpu_limit:g} CPUs (one NUMA node's) or make the pod "
                     "Burstable: the static CPU manager pins a Guaranteed pod's whole CPUs to "
                     "the NUMA node of its GPUs.")
    if res is not None and need > 0:
        alloc = _allocatable(node, res)
        used, holders = _in_use(reader, name, res, pod)
        gpu_ev.append(f"the pod asks {need} {res} for {unit} (topologyManagerScope {scope}"
                      + ("" if cfg is not None else ", the default: not read") + ")")
        gpu_ev.append(f"{name} has {alloc} {res} allocatable, {used} in use"
                      + (f" by {', '.join(holders[:_MAX_HOLDERS])}" if holders else "")
                      + f": {max(alloc - used, 0)} free")
        if lay is None:
            not_checked.append(
                f"how {name}'s GPUs sit on its NUMA nodes: not shown by its labels; read it on "
                "the node with nvidia-smi topo -m (column NUMA Affinity)")
        else:
            gpu_ev.append(lay.evidence)
            surely = min(lay.most_free_surely(used), max(alloc - used, 0))
            spread = ("as published" if lay.free is not None
                      else f"whatever the spread of the {used} in use")
            if need > lay.gpus_per_numa_node:
                never = {None: ": under single-numa-node it can never be admitted there",
                         "single-numa-node": ": it can never be admitted there"}
                gpu_ev.append(f"{need} GPUs are more than one NUMA node of {name} holds "
                              f"({lay.gpus_per_numa_node})" + never.get(policy, ""))
                gpu_fix.append(f"Ask for at most {lay.gpus_per_numa_node} {res} per pod (the "
                               f"GPUs of one NUMA node of {name}) and split the work over pods.")
            elif alloc - used >= need:
                gpu_ev.append(f"{alloc - used} GPUs are free but no NUMA node has {need} of "
                              f"them free: the {used} in use sit on more than one NUMA node")
                # Freeing GPUs comes before shrinking what the workload asks.
                if holders:
                    gpu_fix.append(f"Free a NUMA node of {name}: the GPUs in use there are held "
                                   f"by {', '.join(holders[:_MAX_HOLDERS])}.")
                if surely > 0:
                    gpu_fix.append(f"Or ask for at most {surely} {res}: one NUMA node of {name} "
                                   f"has that many free ({spread}).")
        room = _nodes_with_room(reader, name, res, need)
        if room:
            gpu_fix.insert(0, f"Run it where one NUMA node has {need} {res} free now: "
                              + ", ".join(room[:_MAX_NODES]) + " (delete the Failed pod; the "
                              "scheduler does not see NUMA nodes, so pin it there with the "
                              "node affinity of the patch, or use a NUMA-aware scheduler: "
                              "scheduler-plugins' NodeResourceTopologyMatch).")
            move = _pin(pod, room[:_MAX_NODES])
    fixes += gpu_fix
    fixes.append("Or let the kubelet admit what it cannot align: " + _policy_fix(name, cfg))
    # The GPUs must share a NUMA node unless the CPUs alone already cannot.
    gpus_over = lay is not None and need > lay.gpus_per_numa_node
    must_align = res is not None and need >= 2 and (gpus_over or not cpu_over)
    summary = (f"The kubelet on {name} refused the pod: its Topology Manager ({policy_text}) "
               "could not give it " + (f"{need} {res} " if must_align else "its resources ")
               + "from one NUMA node.")
    explained = Explanation(summary, ev + ([] if must_align else gpu_ev),
                            Fix(" ".join(fixes)).then(move), not_checked=not_checked)
    if must_align:
        explained.gpu_summary = (f"The pod's {need} GPUs must come from one NUMA node of {name} "
                                 f"({policy_text}, topologyManagerScope {scope}).")
        explained.gpu_evidence = gpu_ev
        explained.gpu_fix = Fix(" ".join(gpu_fix) or (
            f"Ask for fewer {res} per pod, or run it on nodes whose NUMA nodes hold {need} GPUs."
        )).then(move)
    return explained


def _pin(pod: Obj, nodes: list[str]) -> Fix:
    """The refused pod deleted (its controller makes it again) and its spec pinned to
    ``nodes`` by hostname."""
    owner = spec_owner(pod)
    meta = pod.get("metadata") or {}
    return Fix(commands=(kubectl("delete", "pod", str(meta.get("name")),
                                 namespace=str(meta.get("namespace") or "default")),),
               patch=Patch(owner.kind, owner.name, f"{owner.path}.affinity", {
                   "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                       "nodeSelectorTerms": [{"matchExpressions": [{
                           "key": "kubernetes.io/hostname", "operator": "In",
                           "values": nodes}]}]}}}, owner.namespace))


def _cpu_limit(pod: Obj, node: Obj, cfg: kubeletconfig.KubeletConfig | None,
               lay: numa.Layout | None, ev: list[str]) -> float | None:
    """The CPUs of one NUMA node when the pod's exclusive CPUs alone are more (said in
    ``ev``): then its CPUs, not its GPUs, keep it from one NUMA node. Else None."""
    if cfg is None or cfg.cpu_policy != "static" or not _guaranteed(pod) or lay is None:
        return None
    cpus = pod_requests(pod).get("cpu", 0.0)
    try:
        capacity = float(((node.get("status") or {}).get("capacity") or {}).get("cpu", 0))
    except (TypeError, ValueError):
        return None
    per_numa = capacity / lay.numa_nodes
    if not cpus or cpus != int(cpus) or cpus <= per_numa:
        return None
    ev.append(f"the pod asks {cpus:g} exclusive CPUs (cpuManagerPolicy static, Guaranteed); a "
              f"NUMA node of {name_of(node)} has {per_numa:g}")
    return per_numa
