"""Dynamic Resource Allocation (``resource.k8s.io``): claims, classes, slices, devices.

The shapes differ across the API versions a cluster may serve, and each function here
reads all of them:

- v1beta1 (Kubernetes 1.32): a claim's request holds ``deviceClassName``, ``selectors``,
  ``allocationMode`` and ``count`` itself; a slice's device keeps its attributes and
  capacity under ``basic``;
- v1beta2 (1.33) and v1 (1.34): the request wraps them in ``exactly`` (or lists
  alternatives in ``firstAvailable``); a device holds ``attributes`` and ``capacity``
  directly.

A pod names its claims in ``spec.resourceClaims`` (``resourceClaimName`` or
``resourceClaimTemplateName``; under ``source`` before 1.31); the claim made from a template
is named in ``status.resourceClaimStatuses``. Selectors are CEL: ``handlers.cel`` evaluates
the simple forms drivers document and says when it cannot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from handlers.gpu import name_of, ns_of
from handlers.kube.quantity import parse_quantity
from handlers.view import Obj, Reader

NVIDIA_GPU_DRIVER = "gpu.nvidia.com"
# The NVIDIA DRA driver's pods (NVIDIA/k8s-dra-driver-gpu, deployments/helm): label
# nvidia-dra-driver-gpu-component=kubelet-plugin|controller, DaemonSet <chart>-kubelet-plugin.
COMPONENT_LABEL = "nvidia-dra-driver-gpu-component"
CHART_COMPONENT_LABELS = ("dra-driver-nvidia-gpu-component", "nvidia-dra-driver-gpu-component")
DRIVER_RE = re.compile(r"""device\.driver\s*==\s*["']([^"']+)["']""")
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def is_gpu_driver(driver: str) -> bool:
    return "gpu" in driver.lower()


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's ``spec.resourceClaims``."""

    name: str
    claim: str | None  # the ResourceClaim's name, when known
    template: str | None


def pod_claims(pod: Obj) -> list[PodClaim]:
    spec, st = pod.get("spec") or {}, pod.get("status") or {}
    made = {str(s.get("name")): s.get("resourceClaimName")
            for s in st.get("resourceClaimStatuses") or []}
    out = []
    for rc in spec.get("resourceClaims") or []:
        src = rc.get("source") or rc  # "source" before Kubernetes 1.31
        name = str(rc.get("name") or "")
        template = src.get("resourceClaimTemplateName")
        claim = src.get("resourceClaimName") or made.get(name)
        out.append(PodClaim(name, str(claim) if claim else None,
                            str(template) if template else None))
    return out


def uses_claims(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("resourceClaims"))


@dataclass(frozen=True)
class Request:
    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = "ExactCount"  # or "All"
    count: int = 1
    alternatives: tuple[Request, ...] = ()  # firstAvailable


def _selectors(obj: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str((s.get("cel") or {}).get("expression"))
                 for s in obj.get("selectors") or [] if (s.get("cel") or {}).get("expression"))


def _request(name: str, body: Mapping[str, Any]) -> Request:
    return Request(name, str(body.get("deviceClassName") or ""), _selectors(body),
                   str(body.get("allocationMode") or "ExactCount"), int(body.get("count") or 1))


def claim_requests(claim_spec: Mapping[str, Any]) -> list[Request]:
    """The device requests of a claim's (or a template's claim's) spec, any version."""
    out = []
    for r in (claim_spec.get("devices") or {}).get("requests") or []:
        name = str(r.get("name") or "")
        if r.get("exactly"):
            out.append(_request(name, r["exactly"]))
        elif r.get("firstAvailable"):
            alts = tuple(_request(f"{name}/{s.get('name')}", s) for s in r["firstAvailable"])
            out.append(Request(name, alts[0].device_class, alts[0].selectors, alts[0].mode,
                               alts[0].count, alts))
        else:
            out.append(_request(name, r))
    return out


def class_selectors(dc: Obj) -> tuple[str, ...]:
    return _selectors(dc.get("spec") or {})


def class_driver(dc: Obj | None, class_name: str = "") -> str | None:
    """The driver a DeviceClass selects (``device.driver == "..."`` in its CEL)."""
    for expr in class_selectors(dc) if dc is not None else ():
        m = DRIVER_RE.search(expr)
        if m:
            return m.group(1)
    return None


def is_gpu_class(dc: Obj | None, class_name: str) -> bool:
    driver = class_driver(dc, class_name)
    return is_gpu_driver(driver) if driver else "gpu" in class_name.lower()


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    node: str | None  # None: a slice for all nodes or a node selector
    attributes: Mapping[str, Any] = field(default_factory=dict)
    capacity: Mapping[str, float] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)


def _attr_value(a: Mapping[str, Any]) -> Any:
    for k in ("string", "int", "bool", "version"):
        if k in a:
            return a[k]
    return None


def slice_devices(sl: Obj) -> list[Device]:
    spec = sl.get("spec") or {}
    driver = str(spec.get("driver") or "")
    pool = str((spec.get("pool") or {}).get("name") or "")
    node = spec.get("nodeName")
    out = []
    for d in spec.get("devices") or []:
        body = d.get("basic") or d  # v1beta1 wraps them in "basic"
        attrs = {str(k): _attr_value(v or {}) for k, v in (body.get("attributes") or {}).items()}
        cap = {str(k): parse_quantity((v or {}).get("value") if isinstance(v, dict) else v)
               for k, v in (body.get("capacity") or {}).items()}
        out.append(Device(driver, pool, str(d.get("name") or ""), str(node) if node else None,
                          attrs, cap))
    return out


def devices(reader: Reader, driver: str | None = None) -> list[Device]:
    out = []
    for sl in reader.list("ResourceSlice"):
        if driver is None or (sl.get("spec") or {}).get("driver") == driver:
            out.extend(slice_devices(sl))
    return out


def allocation_results(claim: Obj) -> list[tuple[str, str, str, str]]:
    """(request, driver, pool, device) allocated to the claim."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return [(str(r.get("request")), str(r.get("driver")), str(r.get("pool")),
             str(r.get("device"))) for r in (alloc.get("devices") or {}).get("results") or []]


def reserved_for(claim: Obj) -> list[str]:
    return [str(r.get("name")) for r in (claim.get("status") or {}).get("reservedFor") or []
            if r.get("resource") in (None, "pods")]


def allocated_devices(claims: Iterable[Obj]) -> dict[tuple[str, str, str], Obj]:
    """(driver, pool, device) -> the claim it is allocated to."""
    out: dict[tuple[str, str, str], Obj] = {}
    for c in claims:
        for _, driver, pool, dev in allocation_results(c):
            out[(driver, pool, dev)] = c
    return out


def allocation_nodes(claim: Obj) -> list[str]:
    """Node names an allocated claim is pinned to (its nodeSelector's metadata.name or
    kubernetes.io/hostname values); [] when not pinned or not allocated."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    sel = alloc.get("nodeSelector") or alloc.get("availableOnNodes") or {}
    out: list[str] = []
    for term in sel.get("nodeSelectorTerms") or []:
        for e in (term.get("matchFields") or []) + (term.get("matchExpressions") or []):
            if e.get("key") in ("metadata.name", "kubernetes.io/hostname") \
                    and e.get("operator") == "In":
                out += [str(v) for v in e.get("values") or []]
    return out


def claim_ref(claim: Obj) -> str:
    return f"{ns_of(claim)}/{name_of(claim)}"


def node_counts(reader: Reader) -> dict[str, dict[str, int]]:
    """Node -> {"published", "allocated", "free"} DRA GPU devices (drivers that look like a
    GPU driver); empty when the cluster publishes none or cannot be read."""
    devs = [d for d in devices(reader) if d.node and is_gpu_driver(d.driver)]
    if not devs:
        return {}
    taken = allocated_devices(reader.list("ResourceClaim"))
    out: dict[str, dict[str, int]] = {}
    for d in devs:
        row = out.setdefault(str(d.node), {"published": 0, "allocated": 0, "free": 0})
        row["published"] += 1
        row["allocated" if d.key in taken else "free"] += 1
    return out


def node_products(reader: Reader) -> dict[str, str]:
    """Node -> the productName its DRA GPU devices publish (the first one seen)."""
    out: dict[str, str] = {}
    for d in devices(reader):
        if d.node and is_gpu_driver(d.driver) and d.node not in out:
            name = d.attributes.get("productName") or d.attributes.get(f"{d.driver}/productName")
            if name:
                out[d.node] = str(name)
    return out


def gpu_devices_asked(reader: Reader, pod: Obj) -> dict[str, float]:
    """DeviceClass -> how many devices the pod's claims ask of GPU classes (``All``
    counts as 1); empty when the claims ask none or cannot be read."""
    out: dict[str, float] = {}
    ns = ns_of(pod)
    for pc in pod_claims(pod):
        spec = None
        claim = reader.get("ResourceClaim", pc.claim, ns) if pc.claim else None
        if claim is not None:
            spec = claim.get("spec") or {}
        elif pc.template:
            tmpl = reader.get("ResourceClaimTemplate", pc.template, ns)
            spec = ((tmpl.get("spec") or {}).get("spec") or {}) if tmpl is not None else None
        for r in claim_requests(spec or {}):
            if is_gpu_class(reader.get("DeviceClass", r.device_class), r.device_class):
                out[r.device_class] = out.get(r.device_class, 0.0) + (
                    r.count if r.mode != "All" else 1)
    return out
