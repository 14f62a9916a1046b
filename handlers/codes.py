"""The finding-code catalogue (``shared/spec/finding-codes.md``).

Codes are an API: ``--output json`` prints them, tests assert on them, alert routing and
templates key on them. Add codes here when a new root cause needs one; never rename.
"""

from __future__ import annotations

from enum import StrEnum


class Section(StrEnum):
    CHAIN = "discovery-chain"
    POD_SPEC = "pod-spec"
    SCHEDULING = "scheduling"
    QUOTA = "quota"
    RUNTIME = "runtime"


# code -> (section, title). Severity is decided per finding, not per code.
CODES: dict[str, tuple[Section, str]] = {
    # Discovery chain: hardware -> driver -> device plugin -> kubelet -> scheduler
    "GPU_HARDWARE_NOT_DETECTED": (Section.CHAIN, "GPU hardware not detected"),
    "DRIVER_NOT_READY": (Section.CHAIN, "NVIDIA driver not ready"),
    "DEVICE_PLUGIN_MISSING": (Section.CHAIN, "No device-plugin pod on the node"),
    "DEVICE_PLUGIN_CRASHLOOP": (Section.CHAIN, "Device plugin crash-looping"),
    "DEVICE_PLUGIN_IMAGE_PULL": (Section.CHAIN, "Device-plugin image cannot be pulled"),
    "OPERATOR_IMAGE_PULL": (Section.CHAIN, "GPU operator image cannot be pulled"),
    "CUDA_DRIVER_MISMATCH": (Section.CHAIN, "CUDA runtime newer than the node driver"),
    "NVML_INIT_FAILED": (Section.CHAIN, "NVML cannot be initialised"),
    "CONTAINER_RUNTIME_NOT_CONFIGURED": (Section.CHAIN, "NVIDIA container runtime not configured"),
    "RUNTIMECLASS_MISSING": (Section.CHAIN, "RuntimeClass does not exist"),
    "DEVICE_PLUGIN_NOT_PRIVILEGED": (Section.CHAIN, "Device plugin lacks privileges or mounts"),
    "POD_SECURITY_BLOCKS_OPERATOR": (Section.CHAIN, "Pod Security admission blocks GPU operator"),
    "KUBELET_REGISTRATION_FAILED": (Section.CHAIN, "Kubelet never registered the device plugin"),
    "GPU_UNHEALTHY": (Section.CHAIN, "GPUs marked unhealthy"),
    "DEVICE_ADMISSION_FAILED": (Section.CHAIN, "Kubelet rejected the pod's GPU allocation"),
    "GPU_NOT_ADVERTISED": (Section.CHAIN, "Node does not advertise its GPUs"),
    "OPERATOR_COMPONENT_FAILING": (Section.CHAIN, "GPU operator component not ready"),
    "NFD_LABELS_MISSING": (Section.CHAIN, "GPU feature labels missing"),
    # Pod spec
    "GPU_LIMIT_MISSING": (Section.POD_SPEC, "GPU requested without a limit"),
    "GPU_REQUEST_LIMIT_MISMATCH": (Section.POD_SPEC, "GPU requests and limits differ"),
    "GPU_FRACTIONAL_REQUEST": (Section.POD_SPEC, "Fractional GPU quantity"),
    "GPU_NOT_REQUESTED": (Section.POD_SPEC, "Workload needs a GPU but requests none"),
    "UNKNOWN_GPU_RESOURCE": (Section.POD_SPEC, "No node offers the requested GPU resource"),
    "RESOURCE_CLAIM_UNSATISFIED": (Section.POD_SPEC, "GPU ResourceClaim cannot be allocated"),
    # Scheduling
    "INSUFFICIENT_GPU": (Section.SCHEDULING, "Not enough free GPUs"),
    "GPU_FRAGMENTATION": (Section.SCHEDULING, "Free GPUs are spread over too many nodes"),
    "REQUEST_EXCEEDS_NODE_SIZE": (Section.SCHEDULING, "More GPUs asked than any node has"),
    "NODE_SELECTOR_MISMATCH": (Section.SCHEDULING, "Node selector matches no GPU node"),
    "TAINT_NOT_TOLERATED": (Section.SCHEDULING, "GPU nodes carry an untolerated taint"),
    "POD_AFFINITY_MISMATCH": (Section.SCHEDULING, "Pod (anti-)affinity excludes GPU nodes"),
    "VOLUME_NODE_AFFINITY": (Section.SCHEDULING, "A volume pins the pod to other nodes"),
    "AUTOSCALER_NO_SCALE_UP": (Section.SCHEDULING, "Autoscaler will not add a GPU node"),
    "NODE_UNSCHEDULABLE": (Section.SCHEDULING, "GPU nodes are cordoned"),
    "NODE_NOT_READY": (Section.SCHEDULING, "GPU nodes are NotReady"),
    "NODE_PRESSURE": (Section.SCHEDULING, "GPU nodes under resource pressure"),
    "INSUFFICIENT_CPU_MEMORY": (Section.SCHEDULING, "GPUs free but CPU/memory short"),
    "GPU_MEMORY_TOO_SMALL": (Section.SCHEDULING, "GPU memory too small"),
    "WRONG_GPU_TYPE": (Section.SCHEDULING, "Pod may land on a weaker GPU type"),
    "MULTI_GPU_TOPOLOGY": (Section.SCHEDULING, "Multi-GPU pod on PCIe-only GPUs"),
    "SCHEDULER_NOT_FOUND": (Section.SCHEDULING, "Named scheduler is not running"),
    "GANG_INCOMPLETE": (Section.SCHEDULING, "Gang cannot place its minimum members"),
    "QUEUE_QUOTA_EXHAUSTED": (Section.SCHEDULING, "Queue quota holds the workload back"),
    "PREEMPTION_BLOCKED": (Section.SCHEDULING, "Pod cannot preempt to get GPUs"),
    "PENDING_NO_EVENTS": (Section.SCHEDULING, "Pending with no scheduler event yet"),
    "POD_NOT_PENDING": (Section.SCHEDULING, "Pod is not pending"),
    # Quotas, limits, sharing
    "QUOTA_EXCEEDED": (Section.QUOTA, "GPU quota used up"),
    "QUOTA_NOT_READY": (Section.QUOTA, "Quota cannot admit the pod yet"),
    "QUOTA_REQUESTS_LIMITS_UNEQUAL": (Section.QUOTA, "GPU quota requests/limits unequal"),
    "QUOTA_SHARING_MISCOUNT": (Section.QUOTA, "Quota does not count shared GPUs"),
    "LIMITRANGE_VIOLATION": (Section.QUOTA, "Outside the LimitRange for GPUs"),
    "LIMITRANGE_DEFAULT_GPU": (Section.QUOTA, "LimitRange default injects GPUs"),
    "TIMESLICING_CONFIG_INVALID": (Section.QUOTA, "Time-slicing config invalid"),
    "MIG_CONFIG_FAILED": (Section.QUOTA, "MIG configuration failed"),
    "MIG_STRATEGY_MISMATCH": (Section.QUOTA, "MIG strategy and request disagree"),
    # Runtime health (Prometheus / DCGM)
    "GPU_XID_ERRORS": (Section.RUNTIME, "Xid errors on GPU"),
    "GPU_IDLE_ALLOCATED": (Section.RUNTIME, "Allocated GPUs idle"),
    "METRICS_UNAVAILABLE": (Section.RUNTIME, "Metrics unavailable"),
    "ALL_CLEAR": (Section.RUNTIME, "All checks passed"),
}

# Order of importance among codes of equal severity: the discovery chain first (a root
# cause there explains every symptom after it), then spec, quota, scheduling.
_SECTION_ORDER = [Section.CHAIN, Section.POD_SPEC, Section.QUOTA, Section.SCHEDULING,
                  Section.RUNTIME]
_CODE_ORDER = {code: (_SECTION_ORDER.index(sec), i) for i, (code, (sec, _)) in
               enumerate(CODES.items())}


def code_rank(code: str) -> tuple[int, int]:
    return _CODE_ORDER[code]


def title(code: str) -> str:
    return CODES[code][1]
