#!/usr/bin/env python3
# ruff: noqa: E501  (verbatim kubectl/kubelet/device-plugin messages are long)
"""Generate a large, realistic ``kubectl cluster-info dump --all-namespaces --output-directory``.

    python bench/gen_snapshot.py OUT_DIR [--nodes 1000] [--pods 30000] [--seed 1]

Layout, as kubectl writes it (JSON indented by 4 spaces, list items carry no ``kind``)::

    OUT/nodes.json                                   NodeList
    OUT/<ns>/{events,replication-controllers,services,daemonsets,deployments,
              replicasets,pods}.json                 *List per namespace
    OUT/<ns>/<pod>/logs.txt                          for a handful of device-plugin pods

The cluster is an EKS-like fleet: ~25% GPU nodes (p4de A100 and p5 H100, 8 GPUs each,
GFD/NFD labels, H100 pool tainted ``nvidia.com/gpu=present:NoSchedule``) running the GPU
operator's DaemonSets, CPU node pools, per-node system DaemonSets, ~20 workload namespaces,
GPU jobs that fill the GPUs, a few device-plugin pods in CrashLoopBackOff (with logs), and
Pending pods whose FailedScheduling messages come from a small simulation of kube-scheduler's
filters over the generated nodes, so they agree with the data.

Deterministic for a given (nodes, pods, seed). Python 3.11 stdlib only: runs without the
project installed. Prints the diagnosis targets on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

Obj = dict[str, Any]

NOW = datetime(2024, 6, 12, 9, 30, 0, tzinfo=UTC)
REGION = "us-west-2"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
KUBE_VERSION = "v1.29.3-eks-ae9a62a"
GPU_OPERATOR_VERSION = "v24.3.0"
DRIVER_VERSION = "550.54.15"
TARGET = "ml-team/train-0"

GI = 1024**3
MI = 1024**2
KI = 1024

# Instance types: (vcpu, memory GiB, gpus, gpu product, family, gpu mem MiB, compute major, minor)
INSTANCES = {
    "m6i.8xlarge": (32, 128, 0, None, None, None, None, None),
    "r6i.8xlarge": (32, 256, 0, None, None, None, None, None),
    "c6i.4xlarge": (16, 32, 0, None, None, None, None, None),
    "p4de.24xlarge": (96, 1152, 8, "NVIDIA-A100-SXM4-80GB", "ampere", 81920, 8, 0),
    "p5.48xlarge": (192, 2048, 8, "NVIDIA-H100-80GB-HBM3", "hopper", 81559, 9, 0),
}

K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what kube uses for generated name suffixes


# --------------------------------------------------------------------------------------
# small helpers


class Rand:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.rv = 48_000_000

    def uid(self) -> str:
        return str(uuid.UUID(int=self.r.getrandbits(128), version=4))

    def suffix(self, n: int = 5) -> str:
        return "".join(self.r.choices(K8S_ALPHABET, k=n))

    def hex(self, n: int = 64) -> str:
        return f"{self.r.getrandbits(4 * n):0{n}x}"

    def resource_version(self) -> str:
        self.rv += self.r.randint(1, 40)
        return str(self.rv)


def ts(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def ts_micro(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def klog_ts(dt: datetime) -> str:
    return dt.strftime("%m%d %H:%M:%S.%f")


def cpu_str(m: int) -> str:
    return str(m // 1000) if m % 1000 == 0 else f"{m}m"


def parse_cpu(s: str) -> int:
    return int(s[:-1]) if s.endswith("m") else int(s) * 1000


def mem_str(b: int) -> str:
    if b % GI == 0:
        return f"{b // GI}Gi"
    if b % MI == 0:
        return f"{b // MI}Mi"
    return f"{b // KI}Ki"


# --------------------------------------------------------------------------------------
# images


class Images:
    """Image references with stable digests, and a catalogue for node ``status.images``."""

    def __init__(self, rnd: Rand) -> None:
        self.rnd = rnd
        self.digests: dict[str, str] = {}
        self.sizes: dict[str, int] = {}

    def ref(self, image: str, size_mb: int | None = None) -> str:
        if image not in self.digests:
            self.digests[image] = self.rnd.hex(64)
            self.sizes[image] = (
                size_mb or self.rnd.r.randint(20, 400)
            ) * 1_000_000 + self.rnd.r.randint(0, 999_999)
        return image

    def image_id(self, image: str) -> str:
        self.ref(image)
        repo = image.rsplit(":", 1)[0]
        return f"{repo}@sha256:{self.digests[image]}"

    def node_entry(self, image: str) -> Obj:
        self.ref(image)
        return {"names": [self.image_id(image), image], "sizeBytes": self.sizes[image]}


ECR = "602401143452.dkr.ecr.us-west-2.amazonaws.com"
APP_REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
SYSTEM_IMAGES = {
    "pause": (f"{ECR}/eks/pause:3.5", 1),
    "kube-proxy": (f"{ECR}/eks/kube-proxy:v1.29.3-minimal-eksbuild.2", 35),
    "aws-node": (f"{ECR}/amazon-k8s-cni:v1.18.1-eksbuild.1", 49),
    "aws-node-init": (f"{ECR}/amazon-k8s-cni-init:v1.18.1-eksbuild.1", 60),
    "aws-network-policy-agent": (f"{ECR}/amazon/aws-network-policy-agent:v1.1.1-eksbuild.1", 34),
    "ebs-csi": (f"{ECR}/eks/aws-ebs-csi-driver:v1.30.0", 42),
    "csi-node-driver-registrar": (f"{ECR}/eks/csi-node-driver-registrar:v2.10.0-eks-1-29-5", 9),
    "livenessprobe": (f"{ECR}/eks/livenessprobe:v2.12.0-eks-1-29-5", 8),
    "node-exporter": ("quay.io/prometheus/node-exporter:v1.8.0", 12),
    "fluent-bit": ("cr.fluentbit.io/fluent/fluent-bit:3.0.4", 38),
    "nfd": ("registry.k8s.io/nfd/node-feature-discovery:v0.15.4", 64),
    "coredns": (f"{ECR}/eks/coredns:v1.11.1-eksbuild.9", 17),
}
GPU_IMAGES = {
    "driver": (f"nvcr.io/nvidia/driver:{DRIVER_VERSION}-ubuntu22.04", 1450),
    "toolkit": ("nvcr.io/nvidia/k8s/container-toolkit:v1.15.0-ubuntu20.04", 140),
    "device-plugin": ("nvcr.io/nvidia/k8s-device-plugin:v0.15.0-ubi8", 150),
    "dcgm-exporter": ("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.1-ubuntu22.04", 1100),
    "gfd": ("nvcr.io/nvidia/k8s-device-plugin:v0.15.0-ubi8", 150),
    "validator": (
        f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:{GPU_OPERATOR_VERSION}",
        190,
    ),
    "operator": (f"nvcr.io/nvidia/gpu-operator:{GPU_OPERATOR_VERSION}", 190),
    "pytorch": ("nvcr.io/nvidia/pytorch:24.03-py3", 9800),
    "triton": ("nvcr.io/nvidia/tritonserver:24.03-py3", 7200),
    "vllm": ("vllm/vllm-openai:v0.4.2", 4900),
    "cuda": ("nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", 110),
    "jupyter": ("quay.io/jupyter/pytorch-notebook:cuda12-python-3.11", 6100),
}


# --------------------------------------------------------------------------------------
# plan: nodes and pods as light records, so that placement and the scheduler simulation
# run before the (large) objects are built namespace by namespace


@dataclass
class NodePlan:
    idx: int
    name: str
    ip: str
    zone: str
    pool: str
    instance: str
    created: datetime
    cpu_m: int  # allocatable
    mem_b: int
    gpu_cap: int
    gpu_alloc: int
    pods_cap: int = 110
    taints: list[Obj] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = True
    plugin: str = "ok"  # ok | nvml-missing | driver-mismatch
    used_cpu: int = 0
    used_mem: int = 0
    used_gpu: int = 0
    used_pods: int = 0
    images: list[str] = field(default_factory=list)

    @property
    def is_gpu(self) -> bool:
        return self.pool.startswith("gpu")


@dataclass
class Owner:
    kind: str  # Deployment | DaemonSet | StatefulSet | Job | PyTorchJob | Node (static) | None
    name: str
    ns: str
    app: str
    template: Obj  # pod template (metadata + spec), shared by its pods
    replicas: int = 0
    uid: str = ""
    rs_name: str = ""
    rs_uid: str = ""
    created: datetime = NOW
    pods: list[PodPlan] = field(default_factory=list)
    extra: Obj = field(default_factory=dict)


@dataclass
class PodPlan:
    name: str
    ns: str
    owner: Owner
    node: NodePlan | None
    state: str = "running"  # running | pending | crashloop | notready | succeeded | imagepull
    created: datetime = NOW
    restarts: int = 0
    message: str = ""  # FailedScheduling message for pending pods
    uid: str = ""
    ip: str = ""
    cpu_m: int = 0
    mem_b: int = 0
    gpus: int = 0
    recent: bool = False
    index: int | None = None


# --------------------------------------------------------------------------------------


class Generator:
    def __init__(self, nodes: int, pods: int, seed: int, gpu_nodes: int | None = None) -> None:
        self.n_nodes = nodes
        # GPU nodes among them: a quarter unless told (the live benchmark wants 1,000 of 5,000)
        self.n_gpu_nodes = gpu_nodes
        self.n_pods = pods
        self.rnd = Rand(seed)
        self.r = self.rnd.r
        self.img = Images(self.rnd)
        self.nodes: list[NodePlan] = []
        self.owners: dict[str, list[Owner]] = defaultdict(list)  # ns -> owners
        self.pods: dict[str, list[PodPlan]] = defaultdict(list)  # ns -> pods
        self.services: dict[str, list[Obj]] = defaultdict(list)
        self.events: dict[str, list[Obj]] = defaultdict(list)
        self.logs: dict[tuple[str, str], str] = {}
        self.pod_ip_counter = 0
        self.namespaces: list[str] = []
        self.targets: list[str] = []
        self.scale = pods / 30000

    # ---------------------------------------------------------------- nodes

    def plan_nodes(self) -> None:
        n = self.n_nodes
        n_gpu = (max(2, round(n * 0.25)) if self.n_gpu_nodes is None
                 else max(2, min(self.n_gpu_nodes, n - 20)))
        n_a100 = n_gpu // 2
        n_h100 = n_gpu - n_a100
        n_cpu = n - n_gpu
        n_ingress = min(10, max(1, n_cpu // 75))
        n_mem = max(1, round(n_cpu * 0.15))
        n_general = n_cpu - n_ingress - n_mem
        pools = (
            [("gpu-a100", "p4de.24xlarge")] * n_a100
            + [("gpu-h100", "p5.48xlarge")] * n_h100
            + [("general", "m6i.8xlarge")] * n_general
            + [("memory", "r6i.8xlarge")] * n_mem
            + [("ingress", "c6i.4xlarge")] * n_ingress
        )
        order = list(range(n))
        self.r.shuffle(order)  # pools interleaved in nodes.json, as a real fleet lists them
        for pos, i in enumerate(order):
            pool, inst = pools[i]
            zone_i = pos % 3
            octet3 = zone_i * 64 + (pos // 3) // 250
            ip = f"10.20.{octet3}.{(pos // 3) % 250 + 4}"
            vcpu, mem_gib, gpus, *_ = INSTANCES[inst]
            node = NodePlan(
                idx=pos,
                name=f"ip-{ip.replace('.', '-')}.{REGION}.compute.internal",
                ip=ip,
                zone=ZONES[zone_i],
                pool=pool,
                instance=inst,
                created=NOW
                - timedelta(days=self.r.randint(1, 90), seconds=self.r.randint(0, 86400)),
                cpu_m=vcpu * 1000 - (70 + vcpu * 10 if vcpu <= 32 else 400),
                mem_b=mem_gib * GI - (mem_gib // 40 + 1) * GI,
                gpu_cap=gpus,
                gpu_alloc=gpus,
                pods_cap=110 if vcpu <= 32 else 250,
            )
            if pool == "gpu-h100":
                node.taints.append(
                    {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}
                )
            if pool == "ingress":
                node.taints.append({"effect": "NoSchedule", "key": "dedicated", "value": "ingress"})
            self.nodes.append(node)
        self.nodes.sort(key=lambda nd: nd.idx)
        # a few device plugins crash-looping: one after a driver upgrade (capacity stays,
        # allocatable 0), the rest never registered (no nvidia.com/gpu at all)
        gpu_nodes = [nd for nd in self.nodes if nd.is_gpu]
        n_crash = max(1, min(3, len(gpu_nodes) // 50))
        for k, nd in enumerate(self.r.sample(gpu_nodes, n_crash)):
            if k == 0:
                nd.plugin, nd.gpu_alloc = "driver-mismatch", 0
            else:
                nd.plugin, nd.gpu_cap, nd.gpu_alloc = "nvml-missing", 0, 0
        # two cordoned general nodes (being drained) and one that stopped reporting
        general = [nd for nd in self.nodes if nd.pool == "general"]
        if len(general) > 10:
            for nd in general[3:5]:
                nd.unschedulable = True
                nd.taints.append(
                    {
                        "effect": "NoSchedule",
                        "key": "node.kubernetes.io/unschedulable",
                        "timeAdded": ts(NOW - timedelta(minutes=47)),
                    }
                )
            bad = general[7]
            bad.ready = False
            t = ts(NOW - timedelta(minutes=12))
            bad.taints += [
                {"effect": "NoSchedule", "key": "node.kubernetes.io/unreachable", "timeAdded": t},
                {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "timeAdded": t},
            ]
        for nd in self.nodes:
            nd.labels = self.node_labels(nd)

    def node_labels(self, nd: NodePlan) -> dict[str, str]:
        _vcpu, _mem, gpus, product, family, gmem, cmaj, cmin = INSTANCES[nd.instance]
        ng = f"{nd.pool}-2024050{1 + nd.idx % 3}"
        lab = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": nd.instance,
            "beta.kubernetes.io/os": "linux",
            "eks.amazonaws.com/capacityType": "ON_DEMAND",
            "eks.amazonaws.com/nodegroup": ng,
            "eks.amazonaws.com/nodegroup-image": "ami-03f2a9b1c4d5e6f7"
            if nd.is_gpu
            else "ami-0a9c41d5e7b2f3c86",
            "eks.amazonaws.com/sourceLaunchTemplateId": "lt-0a1b2c3d4e5f6" + f"{nd.idx % 3:04d}",
            "eks.amazonaws.com/sourceLaunchTemplateVersion": "7",
            "failure-domain.beta.kubernetes.io/region": REGION,
            "failure-domain.beta.kubernetes.io/zone": nd.zone,
            "k8s.io/cloud-provider-aws": "9f2b6f2e8a1c4d7b9e0a3c5d7f1b2e4a",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": nd.name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": nd.instance,
            "topology.ebs.csi.aws.com/zone": nd.zone,
            "topology.k8s.aws/zone-id": "usw2-az" + str(ZONES.index(nd.zone) + 1),
            "topology.kubernetes.io/region": REGION,
            "topology.kubernetes.io/zone": nd.zone,
            "company.io/pool": nd.pool,
            "company.io/team": "platform",
        }
        cpu_feats = [
            "ADX",
            "AESNI",
            "AVX",
            "AVX2",
            "AVX512BW",
            "AVX512CD",
            "AVX512DQ",
            "AVX512F",
            "AVX512VL",
            "AVX512VNNI",
            "FMA3",
            "GFNI",
            "SHA",
            "VAES",
            "VPCLMULQDQ",
            "X87",
        ]
        for f in cpu_feats:
            lab[f"feature.node.kubernetes.io/cpu-cpuid.{f}"] = "true"
        lab.update(
            {
                "feature.node.kubernetes.io/cpu-hardware_multithreading": "true",
                "feature.node.kubernetes.io/cpu-model.family": "6",
                "feature.node.kubernetes.io/cpu-model.id": "106",
                "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
                "feature.node.kubernetes.io/kernel-config.NO_HZ": "true",
                "feature.node.kubernetes.io/kernel-version.full": "5.10.215-203.850.amzn2.x86_64",
                "feature.node.kubernetes.io/kernel-version.major": "5",
                "feature.node.kubernetes.io/kernel-version.minor": "10",
                "feature.node.kubernetes.io/kernel-version.revision": "215",
                "feature.node.kubernetes.io/pci-1d0f.present": "true",
                "feature.node.kubernetes.io/storage-nonrotationaldisk": "true",
                "feature.node.kubernetes.io/system-os_release.ID": "amzn",
                "feature.node.kubernetes.io/system-os_release.VERSION_ID": "2",
                "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": "2",
            }
        )
        if gpus:
            lab.update(
                {
                    "feature.node.kubernetes.io/pci-10de.present": "true",
                    "feature.node.kubernetes.io/pci-10de.sriov.capable": "true",
                    "nvidia.com/cuda.driver-version.full": DRIVER_VERSION,
                    "nvidia.com/cuda.driver-version.major": "550",
                    "nvidia.com/cuda.driver-version.minor": "54",
                    "nvidia.com/cuda.driver-version.revision": "15",
                    "nvidia.com/cuda.driver.major": "550",
                    "nvidia.com/cuda.driver.minor": "54",
                    "nvidia.com/cuda.driver.rev": "15",
                    "nvidia.com/cuda.runtime-version.full": "12.4",
                    "nvidia.com/cuda.runtime-version.major": "12",
                    "nvidia.com/cuda.runtime-version.minor": "4",
                    "nvidia.com/cuda.runtime.major": "12",
                    "nvidia.com/cuda.runtime.minor": "4",
                    "nvidia.com/gfd.timestamp": str(
                        int((NOW - timedelta(hours=self.r.randint(1, 200))).timestamp())
                    ),
                    "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
                    "nvidia.com/gpu.compute.major": str(cmaj),
                    "nvidia.com/gpu.compute.minor": str(cmin),
                    "nvidia.com/gpu.count": str(gpus),
                    "nvidia.com/gpu.deploy.container-toolkit": "true",
                    "nvidia.com/gpu.deploy.dcgm": "true",
                    "nvidia.com/gpu.deploy.dcgm-exporter": "true",
                    "nvidia.com/gpu.deploy.device-plugin": "true",
                    "nvidia.com/gpu.deploy.driver": "true",
                    "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
                    "nvidia.com/gpu.deploy.node-status-exporter": "true",
                    "nvidia.com/gpu.deploy.operator-validator": "true",
                    "nvidia.com/gpu.family": family,
                    "nvidia.com/gpu.machine": nd.instance,
                    "nvidia.com/gpu.memory": str(gmem),
                    "nvidia.com/gpu.mode": "compute",
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": product,
                    "nvidia.com/gpu.replicas": "1",
                    "nvidia.com/gpu.sharing-strategy": "none",
                    "nvidia.com/mig.capable": "true",
                    "nvidia.com/mig.strategy": "single",
                    "nvidia.com/mps.capable": "false",
                    "nvidia.com/vgpu.present": "false",
                }
            )
            if nd.plugin == "nvml-missing":
                # GFD could not read the GPUs either: only the operator and NFD labels remain
                for k in [
                    k
                    for k in lab
                    if k.startswith(
                        (
                            "nvidia.com/cuda",
                            "nvidia.com/gpu.c",
                            "nvidia.com/gfd",
                            "nvidia.com/gpu.m",
                        )
                    )
                ]:
                    del lab[k]
        return lab

    # ---------------------------------------------------------------- placement

    def fits(self, nd: NodePlan, cpu: int, mem: int, gpus: int) -> bool:
        return (
            nd.used_pods < nd.pods_cap
            and nd.used_cpu + cpu <= nd.cpu_m
            and nd.used_mem + mem <= nd.mem_b
            and nd.used_gpu + gpus <= nd.gpu_alloc
        )

    def bind(self, pod: PodPlan, nd: NodePlan) -> None:
        pod.node = nd
        nd.used_pods += 1
        nd.used_cpu += pod.cpu_m
        nd.used_mem += pod.mem_b
        nd.used_gpu += pod.gpus
        self.pod_ip_counter += 1
        c = self.pod_ip_counter
        octet2 = 20
        base = ZONES.index(nd.zone) * 64 + 16 + (c // 250) % 48
        pod.ip = (
            f"10.{octet2}.{base}.{c % 250 + 4}"
            if c < 2_000_000
            else f"10.21.{c % 250}.{c // 250 % 250}"
        )

    def place(self, pod: PodPlan, candidates: list[NodePlan]) -> bool:
        if not candidates:
            return False
        start = self.r.randrange(len(candidates))
        for k in range(len(candidates)):
            nd = candidates[(start + k) % len(candidates)]
            if self.fits(nd, pod.cpu_m, pod.mem_b, pod.gpus):
                self.bind(pod, nd)
                return True
        return False

    def add_pod(
        self,
        owner: Owner,
        name: str,
        *,
        state: str = "running",
        node: NodePlan | None = None,
        candidates: list[NodePlan] | None = None,
        created: datetime | None = None,
        index: int | None = None,
    ) -> PodPlan:
        cpu, mem, gpus = owner.extra["req"]
        if created is None:
            created = owner.created + timedelta(seconds=self.r.randint(5, 600))
            if self.r.random() < 0.6:  # rollouts, restarts, rescheduling: most pods are younger
                created = NOW - timedelta(seconds=self.r.randint(600, 14 * 86400))
            created = max(created, owner.created)
        pod = PodPlan(
            name=name,
            ns=owner.ns,
            owner=owner,
            node=None,
            state=state,
            created=created,
            uid=self.rnd.uid(),
            cpu_m=cpu,
            mem_b=mem,
            gpus=gpus,
            index=index,
        )
        if state == "crashloop":
            pod.restarts = self.r.randint(3, 60)
        if state != "pending":
            if node is not None:
                self.bind(pod, node)
            elif candidates is not None and not self.place(pod, candidates):
                pod.state = "pending"
        if state == "succeeded" and pod.node:  # completed pods free their resources
            pod.node.used_cpu -= cpu
            pod.node.used_mem -= mem
            pod.node.used_gpu -= gpus
            pod.node.used_pods -= 1
        owner.pods.append(pod)
        self.pods[owner.ns].append(pod)
        return pod

    # ---------------------------------------------------------------- pod templates

    def kube_api_volume(self) -> tuple[Obj, str]:
        name = "kube-api-access-" + self.rnd.suffix()
        return {
            "name": name,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {
                        "configMap": {
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            "name": "kube-root-ca.crt",
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "fieldRef": {
                                        "apiVersion": "v1",
                                        "fieldPath": "metadata.namespace",
                                    },
                                    "path": "namespace",
                                }
                            ]
                        }
                    },
                ],
            },
        }, name

    @staticmethod
    def probe(path: str, port: str | int, delay: int = 10, period: int = 10) -> Obj:
        return {
            "failureThreshold": 3,
            "httpGet": {"path": path, "port": port, "scheme": "HTTP"},
            "initialDelaySeconds": delay,
            "periodSeconds": period,
            "successThreshold": 1,
            "timeoutSeconds": 1,
        }

    def container(
        self,
        name: str,
        image: str,
        *,
        cpu: int,
        mem: int,
        gpus: int = 0,
        limit_cpu: bool = True,
        args: list[str] | None = None,
        env: list[Obj] | None = None,
        ports: list[Obj] | None = None,
        mounts: list[Obj] | None = None,
        probes: bool = True,
        privileged: bool = False,
        command: list[str] | None = None,
    ) -> Obj:
        self.img.ref(image)
        req = {"cpu": cpu_str(cpu), "memory": mem_str(mem)}
        lim: Obj = {"memory": mem_str(mem * 2 if gpus == 0 else mem)}
        if limit_cpu:
            lim["cpu"] = cpu_str(cpu * 2)
        if gpus:
            req["nvidia.com/gpu"] = str(gpus)
            lim["nvidia.com/gpu"] = str(gpus)
        c: Obj = {"name": name, "image": image}
        if command:
            c["command"] = command
        if args:
            c["args"] = args
        if env:
            c["env"] = env
        c["imagePullPolicy"] = "IfNotPresent"
        if probes and ports:
            c["livenessProbe"] = self.probe("/healthz", ports[0]["name"], 15, 20)
        if ports:
            c["ports"] = ports
        if probes and ports:
            c["readinessProbe"] = self.probe("/ready", ports[0]["name"], 5, 10)
        c["resources"] = {"limits": lim, "requests": req}
        c["securityContext"] = (
            {"privileged": True}
            if privileged
            else {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": True,
                "runAsNonRoot": True,
            }
        )
        c["terminationMessagePath"] = "/dev/termination-log"
        c["terminationMessagePolicy"] = "FallbackToLogsOnError" if gpus else "File"
        c["volumeMounts"] = list(mounts or [])
        return c

    @staticmethod
    def env_std(app: str, ns: str, extra: list[Obj] | None = None) -> list[Obj]:
        env = [
            {"name": "APP_NAME", "value": app},
            {"name": "APP_ENV", "value": "production"},
            {"name": "LOG_LEVEL", "value": "info"},
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
            },
            {
                "name": "POD_IP",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
            },
            {
                "name": "NODE_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
            },
            {
                "name": "OTEL_EXPORTER_OTLP_ENDPOINT",
                "value": "http://otel-collector.monitoring.svc:4317",
            },
            {"name": "OTEL_SERVICE_NAME", "value": f"{ns}.{app}"},
            {
                "name": "DATABASE_URL",
                "valueFrom": {"secretKeyRef": {"key": "url", "name": f"{app}-db"}},
            },
        ]
        return env + (extra or [])

    def template(
        self,
        ns: str,
        app: str,
        labels: dict[str, str],
        containers: list[Obj],
        *,
        volumes: list[Obj] | None = None,
        sa: str = "default",
        tolerations: list[Obj] | None = None,
        node_selector: dict[str, str] | None = None,
        affinity: Obj | None = None,
        annotations: dict[str, str] | None = None,
        priority_class: str | None = None,
        host_network: bool = False,
        init_containers: list[Obj] | None = None,
        grace: int = 30,
        dns_policy: str = "ClusterFirst",
        spread: bool = False,
    ) -> Obj:
        spec: Obj = {}
        if affinity:
            spec["affinity"] = affinity
        spec["containers"] = containers
        spec["dnsPolicy"] = dns_policy
        spec["enableServiceLinks"] = not ns.startswith("kube")
        if host_network:
            spec["hostNetwork"] = True
        if init_containers:
            spec["initContainers"] = init_containers
        if node_selector:
            spec["nodeSelector"] = node_selector
        spec["preemptionPolicy"] = "PreemptLowerPriority"
        spec["priority"] = (
            2000001000
            if priority_class == "system-node-critical"
            else (2000000000 if priority_class == "system-cluster-critical" else 0)
        )
        if priority_class:
            spec["priorityClassName"] = priority_class
        spec["restartPolicy"] = "Always"
        spec["schedulerName"] = "default-scheduler"
        # privileged node agents (device plugin, driver, CNI) run as root, as their charts ship them
        privileged = any(c["securityContext"].get("privileged") for c in containers)
        spec["securityContext"] = (
            {
                "fsGroup": 65534,
                "runAsGroup": 65534,
                "runAsUser": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            }
            if not (host_network or privileged)
            else {}
        )
        spec["serviceAccount"] = sa
        spec["serviceAccountName"] = sa
        spec["terminationGracePeriodSeconds"] = grace
        spec["tolerations"] = (tolerations or []) + [
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
        ]
        if spread:
            spec["topologySpreadConstraints"] = [
                {
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": app}},
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                }
            ]
        spec["volumes"] = volumes or []
        meta: Obj = {"labels": labels}
        if annotations:
            meta["annotations"] = annotations
        return {"metadata": meta, "spec": spec}

    # ---------------------------------------------------------------- owners

    def owner(
        self,
        kind: str,
        ns: str,
        name: str,
        app: str,
        template: Obj,
        req: tuple[int, int, int],
        age_days: float | None = None,
        **extra: Any,
    ) -> Owner:
        created = NOW - timedelta(days=age_days if age_days is not None else self.r.uniform(2, 300))
        o = Owner(
            kind=kind,
            name=name,
            ns=ns,
            app=app,
            template=template,
            uid=self.rnd.uid(),
            created=created,
        )
        o.extra = {"req": req, **extra}
        if kind == "Deployment":
            o.rs_name = f"{name}-{self.rnd.suffix(10 if self.r.random() < 0.7 else 9)}"
            o.rs_uid = self.rnd.uid()
            template["metadata"]["labels"]["pod-template-hash"] = o.rs_name.rsplit("-", 1)[1]
        self.owners[ns].append(o)
        return o

    def pod_name(self, o: Owner, i: int) -> str:
        if o.kind == "Deployment":
            return f"{o.rs_name}-{self.rnd.suffix()}"
        if o.kind == "DaemonSet":
            return f"{o.name}-{self.rnd.suffix()}"
        if o.kind == "StatefulSet":
            return f"{o.name}-{i}"
        if o.kind == "PyTorchJob":
            return f"{o.name}-{'master' if i == 0 else 'worker'}-{0 if i == 0 else i - 1}"
        if o.kind == "Job":
            return f"{o.name}-{self.rnd.suffix()}"
        return f"{o.name}-{i}"

    # ---------------------------------------------------------------- system

    def plan_system(self) -> None:
        allnodes = self.nodes
        gpu_nodes = [nd for nd in self.nodes if nd.is_gpu]
        tol_all = [{"operator": "Exists"}]
        host_mounts = [
            {"mountPath": "/host/proc", "name": "proc", "readOnly": True},
            {"mountPath": "/host/sys", "name": "sys", "readOnly": True},
        ]
        host_vols = [
            {"hostPath": {"path": "/proc", "type": ""}, "name": "proc"},
            {"hostPath": {"path": "/sys", "type": ""}, "name": "sys"},
        ]

        def ds(
            ns: str,
            name: str,
            lab_key: str,
            image_key: str,
            nodes: list[NodePlan],
            cpu: int,
            mem: int,
            *,
            images: dict[str, tuple[str, int]] = SYSTEM_IMAGES,
            sel: dict[str, str] | None = None,
            extra_containers: list[Obj] | None = None,
            init: list[Obj] | None = None,
            vols: list[Obj] | None = None,
            mounts: list[Obj] | None = None,
            privileged: bool = True,
            args: list[str] | None = None,
            port: int | None = None,
            labels: dict[str, str] | None = None,
            sa: str | None = None,
        ) -> Owner:
            image, size = images[image_key]
            self.img.ref(image, size)
            kv, kvname = self.kube_api_volume()
            lab = {lab_key: name, **(labels or {})}
            ports = (
                [{"containerPort": port, "hostPort": port, "name": "metrics", "protocol": "TCP"}]
                if port
                else None
            )
            main = self.container(
                name.replace("-daemonset", "").replace("gpu-operator-", ""),
                image,
                cpu=cpu,
                mem=mem,
                limit_cpu=False,
                privileged=privileged,
                args=args,
                ports=ports,
                mounts=(mounts or [])
                + [
                    {
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        "name": kvname,
                        "readOnly": True,
                    }
                ],
                env=[
                    {
                        "name": "NODE_NAME",
                        "valueFrom": {
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}
                        },
                    }
                ],
            )
            tpl = self.template(
                ns,
                name,
                lab,
                [main] + (extra_containers or []),
                volumes=(vols or []) + [kv],
                sa=sa or name,
                tolerations=tol_all,
                node_selector=sel,
                priority_class="system-node-critical",
                host_network=ns == "kube-system",
                init_containers=init,
                dns_policy="ClusterFirstWithHostNet" if ns == "kube-system" else "ClusterFirst",
                annotations={"kubectl.kubernetes.io/default-container": main["name"]},
            )
            o = self.owner(
                "DaemonSet",
                ns,
                name,
                name,
                tpl,
                (
                    cpu
                    + sum(
                        parse_cpu(c["resources"]["requests"]["cpu"])
                        for c in (extra_containers or [])
                    ),
                    mem,
                    0,
                ),
                age_days=self.r.uniform(60, 200),
                lab_key=lab_key,
                selector=sel,
            )
            for nd in nodes:
                self.add_pod(o, self.pod_name(o, 0), node=nd)
            o.replicas = len(nodes)
            return o

        reg = self.container(
            "node-driver-registrar",
            SYSTEM_IMAGES["csi-node-driver-registrar"][0],
            cpu=10,
            mem=40 * MI,
            limit_cpu=False,
            probes=False,
            args=[
                "--csi-address=$(ADDRESS)",
                "--kubelet-registration-path=$(DRIVER_REG_SOCK_PATH)",
                "--v=2",
            ],
            env=[
                {"name": "ADDRESS", "value": "/csi/csi.sock"},
                {
                    "name": "DRIVER_REG_SOCK_PATH",
                    "value": "/var/lib/kubelet/plugins/ebs.csi.aws.com/csi.sock",
                },
            ],
            mounts=[
                {"mountPath": "/csi", "name": "plugin-dir"},
                {"mountPath": "/registration", "name": "registration-dir"},
            ],
        )
        lp = self.container(
            "liveness-probe",
            SYSTEM_IMAGES["livenessprobe"][0],
            cpu=10,
            mem=40 * MI,
            limit_cpu=False,
            probes=False,
            args=["--csi-address=/csi/csi.sock"],
            mounts=[{"mountPath": "/csi", "name": "plugin-dir"}],
        )
        npa = self.container(
            "aws-eks-nodeagent",
            SYSTEM_IMAGES["aws-network-policy-agent"][0],
            cpu=25,
            mem=50 * MI,
            limit_cpu=False,
            probes=False,
            privileged=True,
            args=[
                "--enable-ipv6=false",
                "--enable-network-policy=false",
                "--metrics-bind-addr=:8162",
            ],
        )
        ds(
            "kube-system",
            "kube-proxy",
            "k8s-app",
            "kube-proxy",
            allnodes,
            100,
            64 * MI,
            args=[
                "--v=2",
                "--config=/var/lib/kube-proxy-config/config",
                "--hostname-override=$(NODE_NAME)",
            ],
            vols=[
                {"hostPath": {"path": "/var/log", "type": ""}, "name": "varlog"},
                {
                    "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"},
                    "name": "xtables-lock",
                },
                {"hostPath": {"path": "/lib/modules", "type": ""}, "name": "lib-modules"},
                {"configMap": {"defaultMode": 420, "name": "kube-proxy"}, "name": "kubeconfig"},
                {"configMap": {"defaultMode": 420, "name": "kube-proxy-config"}, "name": "config"},
            ],
            mounts=[
                {"mountPath": "/var/log", "name": "varlog"},
                {"mountPath": "/run/xtables.lock", "name": "xtables-lock"},
                {"mountPath": "/lib/modules", "name": "lib-modules", "readOnly": True},
            ],
        )
        ds(
            "kube-system",
            "aws-node",
            "k8s-app",
            "aws-node",
            allnodes,
            25,
            64 * MI,
            extra_containers=[npa],
            port=61678,
            init=[
                self.container(
                    "aws-vpc-cni-init",
                    SYSTEM_IMAGES["aws-node-init"][0],
                    cpu=25,
                    mem=32 * MI,
                    limit_cpu=False,
                    probes=False,
                    privileged=True,
                    env=[{"name": "DISABLE_TCP_EARLY_DEMUX", "value": "false"}],
                    mounts=[{"mountPath": "/host/opt/cni/bin", "name": "cni-bin-dir"}],
                )
            ],
            vols=[
                {"hostPath": {"path": "/opt/cni/bin", "type": ""}, "name": "cni-bin-dir"},
                {"hostPath": {"path": "/etc/cni/net.d", "type": ""}, "name": "cni-net-dir"},
                {
                    "hostPath": {"path": "/var/log/aws-routed-eni", "type": "DirectoryOrCreate"},
                    "name": "log-dir",
                },
                {
                    "hostPath": {"path": "/var/run/aws-node", "type": "DirectoryOrCreate"},
                    "name": "run-dir",
                },
            ],
            mounts=[
                {"mountPath": "/host/opt/cni/bin", "name": "cni-bin-dir"},
                {"mountPath": "/host/etc/cni/net.d", "name": "cni-net-dir"},
                {"mountPath": "/host/var/log/aws-routed-eni", "name": "log-dir"},
                {"mountPath": "/var/run/aws-node", "name": "run-dir"},
            ],
        )
        ds(
            "kube-system",
            "ebs-csi-node",
            "app",
            "ebs-csi",
            allnodes,
            10,
            40 * MI,
            extra_containers=[reg, lp],
            port=9808,
            args=["node", "--endpoint=$(CSI_ENDPOINT)", "--logging-format=text", "--v=2"],
            vols=[
                {
                    "hostPath": {"path": "/var/lib/kubelet", "type": "Directory"},
                    "name": "kubelet-dir",
                },
                {
                    "hostPath": {
                        "path": "/var/lib/kubelet/plugins/ebs.csi.aws.com/",
                        "type": "DirectoryOrCreate",
                    },
                    "name": "plugin-dir",
                },
                {
                    "hostPath": {"path": "/var/lib/kubelet/plugins_registry/", "type": "Directory"},
                    "name": "registration-dir",
                },
                {"hostPath": {"path": "/dev", "type": "Directory"}, "name": "device-dir"},
            ],
            mounts=[
                {
                    "mountPath": "/var/lib/kubelet",
                    "mountPropagation": "Bidirectional",
                    "name": "kubelet-dir",
                },
                {"mountPath": "/csi", "name": "plugin-dir"},
                {"mountPath": "/dev", "name": "device-dir"},
            ],
        )
        ds(
            "monitoring",
            "prometheus-node-exporter",
            "app.kubernetes.io/name",
            "node-exporter",
            allnodes,
            50,
            64 * MI,
            privileged=False,
            port=9100,
            args=[
                "--path.procfs=/host/proc",
                "--path.sysfs=/host/sys",
                "--path.rootfs=/host/root",
                "--web.listen-address=[$(HOST_IP)]:9100",
            ],
            vols=host_vols,
            mounts=host_mounts,
            labels={
                "app.kubernetes.io/instance": "kube-prometheus-stack",
                "app.kubernetes.io/part-of": "prometheus-node-exporter",
                "jobLabel": "node-exporter",
                "release": "kube-prometheus-stack",
            },
        )
        ds(
            "logging",
            "fluent-bit",
            "app.kubernetes.io/name",
            "fluent-bit",
            allnodes,
            100,
            128 * MI,
            privileged=False,
            port=2020,
            vols=[
                {"hostPath": {"path": "/var/log", "type": ""}, "name": "varlog"},
                {
                    "hostPath": {"path": "/var/lib/docker/containers", "type": ""},
                    "name": "varlibdockercontainers",
                },
                {"configMap": {"defaultMode": 420, "name": "fluent-bit"}, "name": "config"},
            ],
            mounts=[
                {"mountPath": "/var/log", "name": "varlog"},
                {
                    "mountPath": "/fluent-bit/etc/fluent-bit.conf",
                    "name": "config",
                    "subPath": "fluent-bit.conf",
                },
            ],
            labels={"app.kubernetes.io/instance": "fluent-bit"},
        )
        ds(
            "gpu-operator",
            "gpu-operator-node-feature-discovery-worker",
            "app.kubernetes.io/name",
            "nfd",
            allnodes,
            5,
            64 * MI,
            privileged=False,
            args=["-feature-gates=NodeFeatureAPI=true", "-metrics=8081"],
            labels={"app.kubernetes.io/instance": "gpu-operator", "role": "worker"},
            vols=host_vols,
            mounts=host_mounts,
        )
        # the GPU operator's operands, one pod per GPU node; labels app=<name> as the operator sets them
        gsel = "nvidia.com/gpu.deploy."
        driver_mounts = [
            {"mountPath": "/run/nvidia", "mountPropagation": "Bidirectional", "name": "run-nvidia"},
            {
                "mountPath": "/host",
                "mountPropagation": "HostToContainer",
                "name": "host-root",
                "readOnly": True,
            },
        ]
        driver_vols = [
            {
                "hostPath": {"path": "/run/nvidia", "type": "DirectoryOrCreate"},
                "name": "run-nvidia",
            },
            {"hostPath": {"path": "/", "type": ""}, "name": "host-root"},
            {
                "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": ""},
                "name": "device-plugin",
            },
            {"hostPath": {"path": "/dev", "type": ""}, "name": "host-dev"},
        ]
        op = {
            "images": GPU_IMAGES,
            "labels": {
                "app.kubernetes.io/managed-by": "gpu-operator",
                "helm.sh/chart": "gpu-operator-v24.3.0",
            },
        }
        validation_init = [
            self.container(
                "toolkit-validation",
                GPU_IMAGES["validator"][0],
                cpu=10,
                mem=32 * MI,
                limit_cpu=False,
                probes=False,
                privileged=True,
                command=["sh", "-c"],
                args=[
                    "until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for nvidia container stack to be setup; sleep 5; done"
                ],
                mounts=[
                    {
                        "mountPath": "/run/nvidia",
                        "mountPropagation": "HostToContainer",
                        "name": "run-nvidia",
                    }
                ],
            )
        ]
        ds(
            "gpu-operator",
            "nvidia-driver-daemonset",
            "app",
            "driver",
            gpu_nodes,
            100,
            512 * MI,
            sel={gsel + "driver": "true"},
            vols=driver_vols,
            mounts=driver_mounts,
            args=["init"],
            sa="nvidia-driver",
            **op,
        )
        ds(
            "gpu-operator",
            "nvidia-container-toolkit-daemonset",
            "app",
            "toolkit",
            gpu_nodes,
            20,
            64 * MI,
            sel={gsel + "container-toolkit": "true"},
            vols=driver_vols,
            mounts=driver_mounts,
            sa="nvidia-container-toolkit",
            **op,
        )
        self.device_plugin_ds = ds(
            "gpu-operator",
            "nvidia-device-plugin-daemonset",
            "app",
            "device-plugin",
            gpu_nodes,
            20,
            64 * MI,
            sel={gsel + "device-plugin": "true"},
            init=validation_init,
            sa="nvidia-device-plugin",
            vols=driver_vols,
            mounts=[
                {"mountPath": "/var/lib/kubelet/device-plugins", "name": "device-plugin"},
                *driver_mounts,
            ],
            extra_containers=[
                self.container(
                    "config-manager",
                    GPU_IMAGES["device-plugin"][0],
                    cpu=5,
                    mem=16 * MI,
                    limit_cpu=False,
                    probes=False,
                    command=["config-manager"],
                    env=[
                        {"name": "ONESHOT", "value": "false"},
                        {"name": "DEFAULT_CONFIG", "value": ""},
                    ],
                )
            ],
            **op,
        )
        ds(
            "gpu-operator",
            "gpu-feature-discovery",
            "app",
            "gfd",
            gpu_nodes,
            10,
            32 * MI,
            sel={gsel + "gpu-feature-discovery": "true"},
            init=validation_init,
            vols=driver_vols,
            mounts=driver_mounts,
            sa="nvidia-gpu-feature-discovery",
            **op,
        )
        ds(
            "gpu-operator",
            "nvidia-dcgm-exporter",
            "app",
            "dcgm-exporter",
            gpu_nodes,
            100,
            512 * MI,
            sel={gsel + "dcgm-exporter": "true"},
            init=validation_init,
            port=9400,
            privileged=False,
            sa="nvidia-dcgm-exporter",
            **op,
        )
        ds(
            "gpu-operator",
            "nvidia-operator-validator",
            "app",
            "validator",
            gpu_nodes,
            10,
            32 * MI,
            sel={gsel + "operator-validator": "true"},
            sa="nvidia-operator-validator",
            vols=driver_vols,
            mounts=driver_mounts,
            **op,
        )
        for p in self.device_plugin_ds.pods:
            if p.node and p.node.plugin != "ok":
                p.state = "crashloop"
                p.restarts = self.r.randint(40, 180)
                self.targets.append(
                    f"crashlooping device plugin: {p.ns}/{p.name} on {p.node.name} ({p.node.plugin})"
                )

        # system deployments
        cpu_nodes = [
            nd
            for nd in self.nodes
            if nd.pool in ("general", "memory") and not nd.unschedulable and nd.ready
        ]
        ingress_nodes = [nd for nd in self.nodes if nd.pool == "ingress"]
        sysdeps = [
            (
                "kube-system",
                "coredns",
                max(2, len(self.nodes) // 100),
                "coredns",
                100,
                70 * MI,
                cpu_nodes,
                "system-cluster-critical",
            ),
            (
                "kube-system",
                "metrics-server",
                2,
                "registry.k8s.io/metrics-server/metrics-server:v0.7.1",
                100,
                200 * MI,
                cpu_nodes,
                "system-cluster-critical",
            ),
            (
                "kube-system",
                "cluster-autoscaler",
                1,
                "registry.k8s.io/autoscaling/cluster-autoscaler:v1.29.2",
                100,
                600 * MI,
                cpu_nodes,
                "system-cluster-critical",
            ),
            (
                "kube-system",
                "aws-load-balancer-controller",
                2,
                "public.ecr.aws/eks/aws-load-balancer-controller:v2.7.2",
                100,
                200 * MI,
                cpu_nodes,
                None,
            ),
            (
                "kube-system",
                "ebs-csi-controller",
                2,
                f"{ECR}/eks/aws-ebs-csi-driver:v1.30.0",
                60,
                240 * MI,
                cpu_nodes,
                "system-cluster-critical",
            ),
            (
                "gpu-operator",
                "gpu-operator",
                1,
                GPU_IMAGES["operator"][0],
                200,
                200 * MI,
                cpu_nodes,
                "system-node-critical",
            ),
            (
                "gpu-operator",
                "gpu-operator-node-feature-discovery-master",
                1,
                SYSTEM_IMAGES["nfd"][0],
                100,
                128 * MI,
                cpu_nodes,
                None,
            ),
            (
                "gpu-operator",
                "gpu-operator-node-feature-discovery-gc",
                1,
                SYSTEM_IMAGES["nfd"][0],
                10,
                128 * MI,
                cpu_nodes,
                None,
            ),
            (
                "monitoring",
                "kube-prometheus-stack-operator",
                1,
                "quay.io/prometheus-operator/prometheus-operator:v0.73.2",
                100,
                256 * MI,
                cpu_nodes,
                None,
            ),
            (
                "monitoring",
                "kube-state-metrics",
                1,
                "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.12.0",
                200,
                1 * GI,
                cpu_nodes,
                None,
            ),
            (
                "monitoring",
                "grafana",
                1,
                "docker.io/grafana/grafana:10.4.1",
                250,
                512 * MI,
                cpu_nodes,
                None,
            ),
            (
                "monitoring",
                "otel-collector",
                6,
                "otel/opentelemetry-collector-contrib:0.100.0",
                500,
                1 * GI,
                cpu_nodes,
                None,
            ),
            (
                "ingress-nginx",
                "ingress-nginx-controller",
                len(ingress_nodes),
                "registry.k8s.io/ingress-nginx/controller:v1.10.1",
                1000,
                1 * GI,
                ingress_nodes,
                None,
            ),
            (
                "cert-manager",
                "cert-manager",
                2,
                "quay.io/jetstack/cert-manager-controller:v1.14.5",
                50,
                128 * MI,
                cpu_nodes,
                None,
            ),
            (
                "cert-manager",
                "cert-manager-cainjector",
                1,
                "quay.io/jetstack/cert-manager-cainjector:v1.14.5",
                50,
                128 * MI,
                cpu_nodes,
                None,
            ),
            (
                "cert-manager",
                "cert-manager-webhook",
                2,
                "quay.io/jetstack/cert-manager-webhook:v1.14.5",
                50,
                64 * MI,
                cpu_nodes,
                None,
            ),
        ]
        for ns, name, replicas, image, cpu, mem, cands, pc in sysdeps:
            if image in SYSTEM_IMAGES:
                image = SYSTEM_IMAGES[image][0]
            tol = (
                [
                    {
                        "effect": "NoSchedule",
                        "key": "dedicated",
                        "operator": "Equal",
                        "value": "ingress",
                    }
                ]
                if ns == "ingress-nginx"
                else (
                    [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
                    if ns == "kube-system"
                    else None
                )
            )
            self.deployment(
                ns,
                name,
                replicas,
                image,
                cpu,
                mem,
                cands,
                priority_class=pc,
                tolerations=tol,
                age=self.r.uniform(60, 200),
                sa=name,
            )
        # prometheus and alertmanager StatefulSets
        for name, n, cpu, mem in (
            ("prometheus-kube-prometheus-stack-prometheus", 2, 2000, 16 * GI),
            ("alertmanager-kube-prometheus-stack-alertmanager", 3, 100, 256 * MI),
        ):
            self.statefulset(
                "monitoring",
                name,
                n,
                "quay.io/prometheus/prometheus:v2.51.2"
                if n == 2
                else "quay.io/prometheus/alertmanager:v0.27.0",
                cpu,
                mem,
                cpu_nodes,
            )

    def deployment(
        self,
        ns: str,
        name: str,
        replicas: int,
        image: str,
        cpu: int,
        mem: int,
        cands: list[NodePlan],
        *,
        priority_class: str | None = None,
        tolerations: list[Obj] | None = None,
        age: float | None = None,
        sa: str | None = None,
        gpus: int = 0,
        node_selector: dict[str, str] | None = None,
        sidecar: bool = False,
        pending: int = 0,
        states: list[str] | None = None,
        annotations: dict[str, str] | None = None,
        port: int = 8080,
    ) -> Owner:
        kv, kvname = self.kube_api_volume()
        labels = {
            "app": name,
            "app.kubernetes.io/instance": name,
            "app.kubernetes.io/name": name,
            "app.kubernetes.io/part-of": ns,
            "app.kubernetes.io/version": image.rsplit(":", 1)[-1][:63],
        }
        if not ns.startswith(("kube", "gpu", "monitoring", "cert", "ingress")):
            labels["team"] = ns
        mounts = [
            {"mountPath": "/etc/app", "name": "config", "readOnly": True},
            {"mountPath": "/tmp", "name": "tmp"},
            {
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": kvname,
                "readOnly": True,
            },
        ]
        vols = [
            {"configMap": {"defaultMode": 420, "name": f"{name}-config"}, "name": "config"},
            {"emptyDir": {}, "name": "tmp"},
        ]
        if gpus:
            mounts.insert(0, {"mountPath": "/dev/shm", "name": "dshm"})
            vols.insert(0, {"emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}, "name": "dshm"})
        ports = [
            {"containerPort": port, "name": "http", "protocol": "TCP"},
            {"containerPort": 9090, "name": "metrics", "protocol": "TCP"},
        ]
        containers = [
            self.container(
                name.split("-")[0] if gpus else "app",
                image,
                cpu=cpu,
                mem=mem,
                gpus=gpus,
                args=[f"--port={port}", "--metrics-port=9090", "--config=/etc/app/config.yaml"],
                env=self.env_std(name, ns),
                ports=ports,
                mounts=mounts,
            )
        ]
        req_cpu = cpu
        req_mem = mem
        if sidecar:
            containers.append(
                self.container(
                    "envoy",
                    "envoyproxy/envoy:v1.30.1",
                    cpu=100,
                    mem=128 * MI,
                    probes=True,
                    args=[
                        "-c",
                        "/etc/envoy/envoy.yaml",
                        "--service-cluster",
                        name,
                        "--service-node",
                        "$(POD_NAME)",
                    ],
                    env=[
                        {
                            "name": "POD_NAME",
                            "valueFrom": {
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}
                            },
                        }
                    ],
                    ports=[{"containerPort": 15001, "name": "envoy-admin", "protocol": "TCP"}],
                    mounts=[
                        {"mountPath": "/etc/envoy", "name": "envoy-config", "readOnly": True},
                        mounts[-1],
                    ],
                )
            )
            vols.append(
                {"configMap": {"defaultMode": 420, "name": f"{name}-envoy"}, "name": "envoy-config"}
            )
            req_cpu += 100
            req_mem += 128 * MI
        vols.append(kv)
        aff = (
            {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": name}},
                                "topologyKey": "kubernetes.io/hostname",
                            },
                            "weight": 100,
                        }
                    ]
                }
            }
            if replicas > 1
            else None
        )
        ann = {
            "kubectl.kubernetes.io/restartedAt": ts(NOW - timedelta(days=self.r.randint(1, 30))),
            "prometheus.io/port": "9090",
            "prometheus.io/scrape": "true",
            "checksum/config": self.rnd.hex(64),
        }
        ann.update(annotations or {})
        tol = list(tolerations or [])
        if gpus:
            tol.append({"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"})
        tpl = self.template(
            ns,
            name,
            labels,
            containers,
            volumes=vols,
            sa=sa or "default",
            tolerations=tol,
            affinity=aff,
            annotations=ann,
            priority_class=priority_class,
            node_selector=node_selector,
            spread=replicas > 3 and not gpus,
        )
        o = self.owner(
            "Deployment",
            ns,
            name,
            name,
            tpl,
            (req_cpu, req_mem, gpus),
            age_days=age,
            image=image,
            port=port,
        )
        o.replicas = replicas + pending
        states = states or []
        for i in range(replicas):
            st = states[i] if i < len(states) else "running"
            self.add_pod(o, self.pod_name(o, i), candidates=cands, state=st)
        for _ in range(pending):
            self.add_pod(
                o,
                self.pod_name(o, 0),
                state="pending",
                created=NOW - timedelta(minutes=self.r.randint(5, 300)),
            )
        self.service(ns, name, labels, port)
        return o

    def statefulset(
        self,
        ns: str,
        name: str,
        replicas: int,
        image: str,
        cpu: int,
        mem: int,
        cands: list[NodePlan],
        *,
        gpus: int = 0,
        node_selector: dict[str, str] | None = None,
        pending_from: int | None = None,
        pvc: bool = True,
        annotations: dict[str, str] | None = None,
        age: float | None = None,
    ) -> Owner:
        kv, kvname = self.kube_api_volume()
        labels = {"app": name, "app.kubernetes.io/name": name, "app.kubernetes.io/instance": name}
        mounts = [
            {"mountPath": "/data", "name": "data"},
            {
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": kvname,
                "readOnly": True,
            },
        ]
        vols = [kv]
        tol = []
        if gpus:
            mounts.insert(0, {"mountPath": "/dev/shm", "name": "dshm"})
            vols.insert(0, {"emptyDir": {"medium": "Memory", "sizeLimit": "128Gi"}, "name": "dshm"})
            tol.append({"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"})
        if not pvc:
            vols.insert(0, {"emptyDir": {}, "name": "data"})
        env = (
            self.env_std(
                name,
                ns,
                [
                    {"name": "NCCL_DEBUG", "value": "INFO"},
                    {"name": "WORLD_SIZE", "value": str(replicas)},
                    {"name": "MASTER_ADDR", "value": f"{name}-0.{name}.{ns}.svc"},
                ],
            )
            if gpus
            else None
        )
        c = self.container(
            "trainer" if gpus else name.split("-")[0],
            image,
            cpu=cpu,
            mem=mem,
            gpus=gpus,
            env=env,
            command=["torchrun"] if gpus else None,
            args=[
                "--nnodes=$(WORLD_SIZE)",
                "--nproc-per-node=8",
                "train.py",
                "--config=/etc/train/config.yaml",
            ]
            if gpus
            else None,
            ports=[
                {
                    "containerPort": 9090 if not gpus else 29500,
                    "name": "web" if not gpus else "c10d",
                    "protocol": "TCP",
                }
            ],
            mounts=mounts,
            probes=not gpus,
        )
        tpl = self.template(
            ns,
            name,
            labels,
            [c],
            volumes=vols,
            tolerations=tol,
            node_selector=node_selector,
            annotations=annotations,
            grace=120 if gpus else 30,
        )
        tpl["spec"]["hostname"] = ""
        tpl["spec"]["subdomain"] = name
        o = self.owner("StatefulSet", ns, name, name, tpl, (cpu, mem, gpus), age_days=age)
        o.replicas = replicas
        o.extra["pvc"] = pvc
        for i in range(replicas):
            if pending_from is not None and i >= pending_from:
                if i == pending_from:  # OrderedReady: only the first missing ordinal exists
                    self.add_pod(
                        o,
                        f"{name}-{i}",
                        state="pending",
                        created=NOW - timedelta(minutes=self.r.randint(20, 200)),
                        index=i,
                    )
                break
            self.add_pod(o, f"{name}-{i}", candidates=cands, index=i)
        self.service(ns, name, labels, 9090, headless=True)
        return o

    def service(
        self, ns: str, name: str, selector: dict[str, str], port: int, headless: bool = False
    ) -> None:
        ip = "None" if headless else f"172.20.{self.r.randint(0, 255)}.{self.r.randint(1, 254)}"
        self.services[ns].append(
            {
                "metadata": {
                    "annotations": {
                        "meta.helm.sh/release-name": name,
                        "meta.helm.sh/release-namespace": ns,
                    },
                    "creationTimestamp": ts(NOW - timedelta(days=self.r.randint(30, 300))),
                    "labels": {
                        "app.kubernetes.io/managed-by": "Helm",
                        "app.kubernetes.io/name": name,
                    },
                    "name": name,
                    "namespace": ns,
                    "resourceVersion": self.rnd.resource_version(),
                    "uid": self.rnd.uid(),
                },
                "spec": {
                    "clusterIP": ip,
                    "clusterIPs": [ip],
                    "internalTrafficPolicy": "Cluster",
                    "ipFamilies": ["IPv4"],
                    "ipFamilyPolicy": "SingleStack",
                    "ports": [
                        {
                            "name": "http",
                            "port": 80 if not headless else port,
                            "protocol": "TCP",
                            "targetPort": port if headless else "http",
                        },
                        {"name": "metrics", "port": 9090, "protocol": "TCP", "targetPort": 9090},
                    ],
                    "selector": {
                        "app.kubernetes.io/name": selector.get("app.kubernetes.io/name", name)
                    },
                    "sessionAffinity": "None",
                    "type": "ClusterIP",
                },
                "status": {"loadBalancer": {}},
            }
        )

    # ---------------------------------------------------------------- GPU workloads

    def plan_gpu(self) -> None:
        healthy = [nd for nd in self.nodes if nd.is_gpu and nd.plugin == "ok"]
        by_product: dict[str, list[NodePlan]] = defaultdict(list)
        for nd in healthy:
            by_product[nd.instance].append(nd)
        # fill patterns: every healthy GPU node has at most one free GPU
        patterns = [
            ([8], 40),
            ([4, 4], 15),
            ([4, 2, 1, 1], 8),
            ([4, 2, 1], 10),
            ([2, 2, 2, 2], 8),
            ([2, 2, 2, 1], 5),
            ([1] * 8, 7),
            ([1] * 7, 7),
        ]
        pat_list = [p for p, _ in patterns]
        pat_w = [w for _, w in patterns]
        open_owners: dict[tuple[str, int], Owner] = {}
        counters: Counter[str] = Counter()
        for inst, nodes in sorted(by_product.items()):
            product = INSTANCES[inst][3]
            short = "a100" if "A100" in product else "h100"
            for nd in nodes:
                for size in self.r.choices(pat_list, pat_w)[0]:
                    key = (inst, size)
                    o = open_owners.get(key)
                    if o is None or len(o.pods) >= o.replicas:
                        o = self.new_gpu_owner(size, product, short, counters)
                        open_owners[key] = o
                    i = len(o.pods)
                    p = self.add_pod(o, self.pod_name(o, i), node=nd, index=i)
                    if self.r.random() < 0.01:
                        p.state = "crashloop"
                        p.restarts = self.r.randint(3, 30)
        # close the last owners: replicas = what exists
        for o in open_owners.values():
            if o.kind != "Deployment":
                o.replicas = len(o.pods)
            else:
                o.replicas = len(o.pods)

    def new_gpu_owner(self, size: int, product: str, short: str, counters: Counter[str]) -> Owner:
        sel = {"nvidia.com/gpu.product": product}
        models = [
            "llama3-8b",
            "llama3-70b",
            "mixtral-8x7b",
            "mistral-7b",
            "bert-large",
            "vit-h14",
            "whisper-large",
            "sdxl",
            "t5-xxl",
            "gpt-neox-20b",
            "falcon-40b",
            "clip-vit-l",
        ]
        model = self.r.choice(models)
        if size == 8:
            counters["train"] += 1
            ns = self.r.choice(["ml-team", "research", "research", "batch-gpu"])
            name = f"{model}-{self.r.choice(['pretrain', 'finetune', 'sft', 'dpo', 'eval'])}-{short}-{counters['train']:03d}"
            return self.gpu_job(ns, name, self.r.choice([1, 2, 2, 4, 4, 8]), product, sel)
        if size == 4:
            counters["serve4"] += 1
            return self.gpu_deploy(
                "llm-serving",
                f"vllm-{model}-{short}-{counters['serve4']}",
                self.r.randint(2, 10),
                4,
                GPU_IMAGES["vllm"][0],
                sel,
            )
        if size == 2:
            counters["serve2"] += 1
            if self.r.random() < 0.5:
                return self.gpu_deploy(
                    "llm-serving",
                    f"vllm-{model}-tp2-{short}-{counters['serve2']}",
                    self.r.randint(2, 12),
                    2,
                    GPU_IMAGES["vllm"][0],
                    sel,
                )
            name = f"{model}-hpo-{short}-{counters['serve2']:03d}"
            return self.gpu_job(
                "research", name, self.r.randint(2, 6), product, sel, gpus=2, kind="Job"
            )
        counters["serve1"] += 1
        if self.r.random() < 0.2:
            o = self.gpu_deploy(
                "research",
                f"jupyter-{self.r.choice(['alice', 'bob', 'carol', 'dan', 'erin', 'frank', 'grace', 'heidi'])}-{counters['serve1']}",
                1,
                1,
                GPU_IMAGES["jupyter"][0],
                {},
            )
            return o
        return self.gpu_deploy(
            "inference",
            f"triton-{model}-{short}-{counters['serve1']}",
            self.r.randint(3, 24),
            1,
            GPU_IMAGES["triton"][0],
            sel if self.r.random() < 0.5 else {},
        )

    def gpu_deploy(
        self,
        ns: str,
        name: str,
        replicas: int,
        gpus: int,
        image: str,
        sel: dict[str, str],
        pending: int = 0,
    ) -> Owner:
        cpu = gpus * self.r.choice([4000, 6000, 8000])
        mem = gpus * self.r.choice([32, 48, 64]) * GI
        o = self.deployment(
            ns,
            name,
            0,
            image,
            cpu,
            mem,
            [],
            gpus=gpus,
            node_selector=sel or None,
            pending=pending,
            age=self.r.uniform(1, 60),
            port=8000,
            annotations={"gpubot.io/gpu-memory-mib": str(gpus * 40960)}
            if self.r.random() < 0.1
            else None,
        )
        o.replicas = replicas + pending
        return o

    def gpu_job(
        self,
        ns: str,
        name: str,
        workers: int,
        product: str,
        sel: dict[str, str],
        *,
        gpus: int = 8,
        kind: str = "PyTorchJob",
        pending: bool = False,
    ) -> Owner:
        kv, kvname = self.kube_api_volume()
        labels = (
            {
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-type": "worker",
                "app": name,
                "team": ns,
            }
            if kind == "PyTorchJob"
            else {"batch.kubernetes.io/job-name": name, "job-name": name, "app": name, "team": ns}
        )
        image = GPU_IMAGES["pytorch"][0]
        mounts = [
            {"mountPath": "/dev/shm", "name": "dshm"},
            {"mountPath": "/checkpoints", "name": "checkpoints"},
            {"mountPath": "/datasets", "name": "datasets", "readOnly": True},
            {
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": kvname,
                "readOnly": True,
            },
        ]
        vols = [
            {"emptyDir": {"medium": "Memory", "sizeLimit": "256Gi"}, "name": "dshm"},
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": f"{ns}-checkpoints"}},
            {
                "name": "datasets",
                "persistentVolumeClaim": {"claimName": "datasets-fsx", "readOnly": True},
            },
            kv,
        ]
        env = self.env_std(
            name,
            ns,
            [
                {"name": "NCCL_DEBUG", "value": "WARN"},
                {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
                {"name": "FI_PROVIDER", "value": "efa"},
                {"name": "PYTHONUNBUFFERED", "value": "1"},
                {"name": "WANDB_PROJECT", "value": name.split("-")[0]},
                {
                    "name": "WANDB_API_KEY",
                    "valueFrom": {"secretKeyRef": {"key": "api-key", "name": "wandb"}},
                },
            ],
        )
        c = self.container(
            "pytorch",
            image,
            cpu=gpus * 8000,
            mem=gpus * 100 * GI,
            gpus=gpus,
            env=env,
            probes=False,
            command=["torchrun"],
            args=[
                "--nnodes=$(PET_NNODES)",
                f"--nproc-per-node={gpus}",
                "train.py",
                "--config=/etc/train/config.yaml",
                "--resume-from=/checkpoints/latest",
            ],
            ports=[{"containerPort": 23456, "name": "pytorchjob-port", "protocol": "TCP"}],
            mounts=mounts,
        )
        ann = {"sidecar.istio.io/inject": "false"}
        if self.r.random() < 0.3:
            ann["gpubot.io/gpu-family"] = "hopper" if "H100" in product else "ampere"
        tpl = self.template(
            ns,
            name,
            labels,
            [c],
            volumes=vols,
            sa="training",
            tolerations=[{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}],
            node_selector=sel or None,
            annotations=ann,
            grace=300,
        )
        tpl["spec"]["restartPolicy"] = "OnFailure" if kind == "Job" else "Never"
        o = self.owner(
            kind,
            ns,
            name,
            name,
            tpl,
            (gpus * 8000, gpus * 100 * GI, gpus),
            age_days=self.r.uniform(0.05, 20),
        )
        o.replicas = workers
        o.extra["product"] = product
        return o

    def plan_pending_gpu(self) -> None:
        s = self.scale
        cpu_nodes: list[NodePlan] = []
        # the known target: a StatefulSet whose first replica needs a whole 8-GPU node
        sts = self.statefulset(
            "ml-team",
            "train",
            2,
            GPU_IMAGES["pytorch"][0],
            24000,
            256 * GI,
            cpu_nodes,
            gpus=8,
            node_selector={"nvidia.com/gpu.present": "true"},
            pending_from=0,
            pvc=False,
            annotations={"gpubot.io/gpu-memory-mib": "81920"},
            age=0.2,
        )
        self.targets.insert(0, f"why-pending target: {TARGET} (Pending, requests 8 nvidia.com/gpu)")
        assert sts.pods[0].name == "train-0"
        n = max(1, round(5 * s))
        for k in range(n):
            o = self.gpu_job(
                "research",
                f"llama3-70b-pretrain-h100-q{k:02d}",
                5,
                INSTANCES["p5.48xlarge"][3],
                {"nvidia.com/gpu.product": INSTANCES["p5.48xlarge"][3]},
            )
            for i in range(o.replicas):
                self.add_pod(
                    o,
                    self.pod_name(o, i),
                    state="pending",
                    created=NOW - timedelta(minutes=self.r.randint(30, 600)),
                    index=i,
                )
        o = self.gpu_deploy(
            "llm-serving",
            "vllm-llama3-70b-a100-burst",
            0,
            4,
            GPU_IMAGES["vllm"][0],
            {"nvidia.com/gpu.product": INSTANCES["p4de.24xlarge"][3]},
            pending=max(1, round(20 * s)),
        )
        o = self.gpu_deploy(
            "inference",
            "triton-ensemble-tp2",
            0,
            2,
            GPU_IMAGES["triton"][0],
            {},
            pending=max(1, round(15 * s)),
        )
        for p in (
            self.pods["ml-team"]
            + self.pods["research"]
            + self.pods["llm-serving"]
            + self.pods["inference"]
        ):
            if p.state == "pending" and p.name != "train-0" and len(self.targets) < 6:
                self.targets.append(
                    f"other pending GPU pod: {p.ns}/{p.name} (requests {p.gpus} nvidia.com/gpu)"
                )
                break

    # ---------------------------------------------------------------- CPU workloads

    WORKLOAD_NS = (
        "payments",
        "checkout",
        "catalog",
        "search",
        "recommendations",
        "identity",
        "notifications",
        "web-frontend",
        "api-gateway",
        "data-pipeline",
        "analytics",
        "reporting",
        "billing",
        "inventory",
        "shipping",
        "messaging",
    )
    SERVICE_WORDS = (
        "api",
        "worker",
        "consumer",
        "scheduler",
        "gateway",
        "cache",
        "indexer",
        "sync",
        "router",
        "validator",
        "aggregator",
        "exporter",
        "writer",
        "reader",
        "resolver",
        "notifier",
    )

    def plan_cpu(self) -> None:
        cands = [nd for nd in self.nodes if nd.pool in ("general", "memory")]
        mem_nodes = [nd for nd in self.nodes if nd.pool == "memory"]
        used = sum(len(v) for v in self.pods.values())
        n_pending = max(2, round(13 * self.scale))
        budget = max(0, self.n_pods - used - n_pending)
        weights = [self.r.uniform(0.5, 2.0) for _ in self.WORKLOAD_NS]
        tot = sum(weights)
        shares = [int(budget * w / tot) for w in weights]
        shares[0] += budget - sum(shares)
        sizes = [
            (100, 128 * MI),
            (100, 256 * MI),
            (250, 512 * MI),
            (250, 256 * MI),
            (500, 1 * GI),
            (1000, 2 * GI),
            (200, 384 * MI),
            (1500, 3 * GI),
        ]
        for ns, share in zip(self.WORKLOAD_NS, shares, strict=True):
            left = share
            k = 0
            sidecar = self.r.random() < 0.5
            while left > 0:
                k += 1
                if ns in ("data-pipeline", "reporting") and self.r.random() < 0.25:
                    n = min(left, self.r.randint(3, 40))
                    self.cron_jobs(
                        ns, f"{ns}-{self.r.choice(self.SERVICE_WORDS)}-job-{k}", n, cands
                    )
                    left -= n
                    continue
                n = min(left, max(1, int(self.r.paretovariate(1.2) * 6)), 120)
                cpu, mem = self.r.choice(sizes)
                states = []
                for _ in range(n):
                    x = self.r.random()
                    states.append(
                        "crashloop"
                        if x < 0.004
                        else "notready"
                        if x < 0.007
                        else "imagepull"
                        if x < 0.008
                        else "running"
                    )
                name = f"{ns.split('-')[0]}-{self.r.choice(self.SERVICE_WORDS)}-{k}"
                self.deployment(
                    ns,
                    name,
                    n,
                    f"{APP_REGISTRY}/{ns}/{name.rsplit('-', 1)[0]}:v{self.r.randint(1, 9)}.{self.r.randint(0, 40)}.{self.r.randint(0, 20)}",
                    cpu,
                    mem,
                    cands,
                    sidecar=sidecar,
                    states=states,
                )
                left -= n
        # pending CPU pods: requests bigger than any memory-pool node, and unbound claims
        n_big = max(1, n_pending - 2)
        self.deployment(
            "analytics",
            "spark-executor-xl",
            0,
            f"{APP_REGISTRY}/analytics/spark:3.5.1",
            8000,
            300 * GI,
            [],
            node_selector={"node.kubernetes.io/instance-type": "r6i.8xlarge"},
            pending=n_big,
        )
        sts = self.statefulset(
            "data-pipeline",
            "kafka-archive",
            3,
            "docker.io/bitnami/kafka:3.7.0",
            2000,
            8 * GI,
            mem_nodes,
            pending_from=1,
        )
        sts.extra["unbound_pvc"] = True

    def cron_jobs(self, ns: str, name: str, n: int, cands: list[NodePlan]) -> None:
        kv, kvname = self.kube_api_volume()
        labels = {"batch.kubernetes.io/job-name": name, "job-name": name, "app": name, "team": ns}
        c = self.container(
            "job",
            f"{APP_REGISTRY}/{ns}/batch:v2.{self.r.randint(0, 30)}.0",
            cpu=500,
            mem=1 * GI,
            env=self.env_std(name, ns),
            probes=False,
            mounts=[
                {
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "name": kvname,
                    "readOnly": True,
                }
            ],
        )
        tpl = self.template(ns, name, labels, [c], volumes=[kv])
        tpl["spec"]["restartPolicy"] = "Never"
        for i in range(n):
            o = self.owner(
                "Job",
                ns,
                f"{name}-{28_000_000 + i * 60 + self.r.randint(0, 59)}",
                name,
                tpl,
                (500, 1 * GI, 0),
                age_days=i / 24,
            )
            o.replicas = 1
            self.add_pod(
                o,
                self.pod_name(o, 0),
                candidates=cands,
                state="succeeded" if i > 0 else "running",
                created=o.created + timedelta(seconds=1),
            )

    # ---------------------------------------------------------------- scheduler simulation

    @staticmethod
    def tolerates(tols: list[Obj], taint: Obj) -> bool:
        for t in tols:
            if t.get("effect") and t["effect"] != taint["effect"]:
                continue
            if t.get("operator") == "Exists":
                if not t.get("key") or t["key"] == taint["key"]:
                    return True
            elif t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
                return True
        return False

    def failed_scheduling_message(self, pod: PodPlan) -> str:
        spec = pod.owner.template["spec"]
        total = len(self.nodes)
        if pod.owner.extra.get("unbound_pvc"):
            return (
                f"0/{total} nodes are available: pod has unbound immediate PersistentVolumeClaims. "
                f"preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
            )
        sel = spec.get("nodeSelector") or {}
        tols = spec.get("tolerations") or []
        reasons: Counter[str] = Counter()
        preempt: Counter[str] = Counter()
        feasible = 0
        for nd in self.nodes:
            if nd.unschedulable:
                reasons["node(s) were unschedulable"] += 1
                preempt["Preemption is not helpful for scheduling"] += 1
                continue
            bad = next(
                (
                    t
                    for t in nd.taints
                    if t["effect"] in ("NoSchedule", "NoExecute") and not self.tolerates(tols, t)
                ),
                None,
            )
            if bad is not None:
                reasons[
                    f"node(s) had untolerated taint {{{bad['key']}: {bad.get('value', '')}}}"
                ] += 1
                preempt["Preemption is not helpful for scheduling"] += 1
                continue
            if any(nd.labels.get(k) != v for k, v in sel.items()):
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
                preempt["Preemption is not helpful for scheduling"] += 1
                continue
            insuff = []
            if nd.used_pods + 1 > nd.pods_cap:
                insuff.append("Too many pods")
            if nd.used_cpu + pod.cpu_m > nd.cpu_m:
                insuff.append("Insufficient cpu")
            if nd.used_mem + pod.mem_b > nd.mem_b:
                insuff.append("Insufficient memory")
            if pod.gpus and nd.used_gpu + pod.gpus > nd.gpu_alloc:
                insuff.append("Insufficient nvidia.com/gpu")
            if not insuff:
                feasible += 1
                continue
            for x in insuff:
                reasons[x] += 1
            preempt["No preemption victims found for incoming pod"] += 1
        if feasible:
            print(
                f"warning: pending pod {pod.ns}/{pod.name} would fit on {feasible} node(s)",
                file=sys.stderr,
            )
        r1 = ", ".join(sorted(f"{v} {k}" for k, v in reasons.items()))
        r2 = ", ".join(sorted(f"{v} {k}" for k, v in preempt.items()))
        return (
            f"0/{total} nodes are available: {r1}. preemption: 0/{total} nodes are available: {r2}."
        )

    def plan_messages(self) -> None:
        cache: dict[tuple[int, int, int, int], str] = {}
        for ns in self.pods:
            for p in self.pods[ns]:
                if p.state == "pending":
                    key = (id(p.owner.template), p.cpu_m, p.mem_b, p.gpus)
                    if key not in cache:
                        cache[key] = self.failed_scheduling_message(p)
                    p.message = cache[key]

    # ---------------------------------------------------------------- build objects

    def meta(
        self,
        name: str,
        ns: str | None,
        created: datetime,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        owner: Obj | None = None,
        uid: str | None = None,
        generate_name: str | None = None,
        generation: int | None = None,
    ) -> Obj:
        m: Obj = {}
        if annotations:
            m["annotations"] = annotations
        m["creationTimestamp"] = ts(created)
        if generate_name:
            m["generateName"] = generate_name
        if generation is not None:
            m["generation"] = generation
        if labels:
            m["labels"] = labels
        m["name"] = name
        if ns:
            m["namespace"] = ns
        if owner:
            m["ownerReferences"] = [owner]
        m["resourceVersion"] = self.rnd.resource_version()
        m["uid"] = uid or self.rnd.uid()
        return m

    def owner_ref(self, o: Owner) -> Obj:
        if o.kind == "Deployment":
            return {
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "ReplicaSet",
                "name": o.rs_name,
                "uid": o.rs_uid,
            }
        api = {
            "DaemonSet": "apps/v1",
            "StatefulSet": "apps/v1",
            "Job": "batch/v1",
            "PyTorchJob": "kubeflow.org/v1",
        }[o.kind]
        return {
            "apiVersion": api,
            "blockOwnerDeletion": True,
            "controller": True,
            "kind": o.kind,
            "name": o.name,
            "uid": o.uid,
        }

    def build_pod(self, p: PodPlan) -> Obj:
        o = p.owner
        tpl = o.template
        labels = dict(tpl["metadata"]["labels"])
        if o.kind == "DaemonSet":
            labels["controller-revision-hash"] = o.extra.setdefault("crh", self.rnd.suffix(10))
            labels["pod-template-generation"] = "3"
        elif o.kind == "StatefulSet":
            labels["controller-revision-hash"] = f"{o.name}-" + o.extra.setdefault(
                "crh", self.rnd.suffix(10)
            )
            labels["statefulset.kubernetes.io/pod-name"] = p.name
            labels["apps.kubernetes.io/pod-index"] = str(p.index or 0)
        elif o.kind == "PyTorchJob":
            labels["training.kubeflow.org/replica-index"] = str(p.index or 0)
            if p.index == 0:
                labels["training.kubeflow.org/replica-type"] = "master"
                labels["training.kubeflow.org/job-role"] = "master"
        elif o.kind == "Job":
            labels["controller-uid"] = o.uid
            labels["batch.kubernetes.io/controller-uid"] = o.uid
        gen = None
        if o.kind in ("Deployment", "DaemonSet", "Job"):
            gen = (o.rs_name if o.kind == "Deployment" else o.name) + "-"
        meta = self.meta(
            p.name,
            p.ns,
            p.created,
            labels,
            tpl["metadata"].get("annotations"),
            self.owner_ref(o),
            p.uid,
            generate_name=gen,
        )
        spec = dict(tpl["spec"])
        if o.kind == "DaemonSet" and p.node:
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {
                                        "key": "metadata.name",
                                        "operator": "In",
                                        "values": [p.node.name],
                                    }
                                ]
                            }
                        ]
                    }
                }
            }
            spec = {k: spec[k] for k in sorted(spec)}
        if o.kind == "StatefulSet":
            spec["hostname"] = p.name
            if o.extra.get("pvc"):
                spec["volumes"] = [
                    {"name": "data", "persistentVolumeClaim": {"claimName": f"data-{p.name}"}}
                ] + spec["volumes"]
        if p.node:
            spec["nodeName"] = p.node.name
            spec = {k: spec[k] for k in sorted(spec)}
        qos = "Burstable"
        status = self.pod_status(p, spec, qos)
        return {"metadata": meta, "spec": spec, "status": status}

    def pod_status(self, p: PodPlan, spec: Obj, qos: str) -> Obj:
        created = p.created
        if p.state == "pending":
            return {
                "conditions": [
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": ts(created),
                        "message": p.message,
                        "reason": "Unschedulable",
                        "status": "False",
                        "type": "PodScheduled",
                    }
                ],
                "phase": "Pending",
                "qosClass": qos,
            }
        nd = p.node
        assert nd is not None
        sched = created + timedelta(seconds=1)
        started = sched + timedelta(seconds=self.r.randint(2, 90 if p.gpus == 0 else 400))
        ready_at = started + timedelta(seconds=self.r.randint(1, 30))
        ready = p.state == "running"
        cstats = []
        for c in spec["containers"]:
            image = c["image"]
            cs: Obj = {
                "containerID": f"containerd://{self.rnd.hex(64)}",
                "image": image,
                "imageID": self.img.image_id(image),
                "lastState": {},
                "name": c["name"],
                "ready": ready,
                "restartCount": 0,
                "started": ready,
                "state": {"running": {"startedAt": ts(started)}},
            }
            if c is spec["containers"][0]:
                if p.state == "crashloop":
                    fin = NOW - timedelta(seconds=self.r.randint(5, 280))
                    msg = self.crash_message(p)
                    term: Obj = {
                        "containerID": cs["containerID"],
                        "exitCode": 1,
                        "finishedAt": ts(fin),
                        "reason": "Error",
                        "startedAt": ts(fin - timedelta(seconds=self.r.randint(1, 20))),
                    }
                    if msg:
                        term["message"] = msg
                    cs.update(
                        lastState={"terminated": term},
                        restartCount=p.restarts,
                        started=False,
                        state={
                            "waiting": {
                                "message": f"back-off 5m0s restarting failed container={c['name']} pod={p.name}_{p.ns}({p.uid})",
                                "reason": "CrashLoopBackOff",
                            }
                        },
                    )
                    del cs["containerID"]
                    cs["containerID"] = term["containerID"]
                elif p.state == "imagepull":
                    cs = {
                        "image": image + "-rc1",
                        "imageID": "",
                        "lastState": {},
                        "name": c["name"],
                        "ready": False,
                        "restartCount": 0,
                        "started": False,
                        "state": {
                            "waiting": {
                                "message": f'Back-off pulling image "{image}-rc1"',
                                "reason": "ImagePullBackOff",
                            }
                        },
                    }
                elif p.state == "succeeded":
                    cs.update(
                        ready=False,
                        started=False,
                        state={
                            "terminated": {
                                "containerID": cs["containerID"],
                                "exitCode": 0,
                                "finishedAt": ts(
                                    started + timedelta(seconds=self.r.randint(20, 900))
                                ),
                                "reason": "Completed",
                                "startedAt": ts(started),
                            }
                        },
                    )
            cstats.append(cs)
        if p.state == "succeeded":
            ready_cond = {
                "lastProbeTime": None,
                "lastTransitionTime": ts(ready_at),
                "reason": "PodCompleted",
                "status": "False",
                "type": "Ready",
            }
            cready = dict(ready_cond, type="ContainersReady")
        elif ready:
            ready_cond = {
                "lastProbeTime": None,
                "lastTransitionTime": ts(ready_at),
                "status": "True",
                "type": "Ready",
            }
            cready = dict(ready_cond, type="ContainersReady")
        else:
            names = (
                ",".join(c["name"] for c in cstats if not c["ready"])
                or spec["containers"][0]["name"]
            )
            t = ts(NOW - timedelta(seconds=self.r.randint(60, 3600)))
            ready_cond = {
                "lastProbeTime": None,
                "lastTransitionTime": t,
                "message": f"containers with unready status: [{names}]",
                "reason": "ContainersNotReady",
                "status": "False",
                "type": "Ready",
            }
            cready = dict(ready_cond, type="ContainersReady")
        conds = [
            {
                "lastProbeTime": None,
                "lastTransitionTime": ts(started),
                "status": "True" if p.state != "succeeded" else "False",
                "type": "PodReadyToStartContainers",
            },
            {
                "lastProbeTime": None,
                "lastTransitionTime": ts(sched),
                "status": "True",
                "type": "Initialized",
            },
            ready_cond,
            cready,
            {
                "lastProbeTime": None,
                "lastTransitionTime": ts(sched),
                "status": "True",
                "type": "PodScheduled",
            },
        ]
        st: Obj = {
            "conditions": conds,
            "containerStatuses": cstats,
            "hostIP": nd.ip,
            "hostIPs": [{"ip": nd.ip}],
        }
        if spec.get("initContainers"):
            st["initContainerStatuses"] = [
                {
                    "containerID": f"containerd://{self.rnd.hex(64)}",
                    "image": ic["image"],
                    "imageID": self.img.image_id(ic["image"]),
                    "lastState": {},
                    "name": ic["name"],
                    "ready": True,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "containerID": "",
                            "exitCode": 0,
                            "finishedAt": ts(started),
                            "reason": "Completed",
                            "startedAt": ts(sched + timedelta(seconds=1)),
                        }
                    },
                }
                for ic in spec["initContainers"]
            ]
            for ics in st["initContainerStatuses"]:
                ics["state"]["terminated"]["containerID"] = ics["containerID"]
        host_net = spec.get("hostNetwork")
        ip = nd.ip if host_net else p.ip
        st.update(
            {
                "phase": "Succeeded" if p.state == "succeeded" else "Running",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "qosClass": qos,
                "startTime": ts(sched),
            }
        )
        return st

    def crash_message(self, p: PodPlan) -> str:
        if p.owner is getattr(self, "device_plugin_ds", None) and p.node:
            if p.node.plugin == "driver-mismatch":
                return "Failed to initialize NVML: Driver/library version mismatch\n"
            return "error starting plugins: error creating plugin manager: unable to create plugin manager: nvml init failed: ERROR_LIBRARY_NOT_FOUND\n"
        if p.gpus:
            return "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.12 GiB is free.\n"
        return ""

    def build_node(self, nd: NodePlan) -> Obj:
        vcpu, mem_gib, gpus, *_ = INSTANCES[nd.instance]
        cap = {
            "attachable-volumes-aws-ebs": "39" if vcpu <= 32 else "27",
            "cpu": str(vcpu),
            "ephemeral-storage": "524275692Ki" if gpus else "104845292Ki",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            "memory": f"{mem_gib * 1024 * 1024 - 1_512_000}Ki",
            "pods": str(nd.pods_cap),
        }
        alloc = dict(
            cap,
            cpu=cpu_str(nd.cpu_m),
            memory=f"{nd.mem_b // KI - 1_512_000}Ki",
            **{"ephemeral-storage": "482009528657" if gpus else "95551679124"},
        )
        if nd.gpu_cap:
            cap["nvidia.com/gpu"] = str(nd.gpu_cap)
            alloc["nvidia.com/gpu"] = str(nd.gpu_alloc)
        cap = {k: cap[k] for k in sorted(cap)}
        alloc = {k: alloc[k] for k in sorted(alloc)}
        hb = NOW - timedelta(seconds=self.r.randint(0, 50))
        ready_since = ts(nd.created + timedelta(seconds=40))
        conds = [
            {
                "lastHeartbeatTime": ts(hb),
                "lastTransitionTime": ready_since,
                "message": "kubelet has sufficient memory available",
                "reason": "KubeletHasSufficientMemory",
                "status": "False",
                "type": "MemoryPressure",
            },
            {
                "lastHeartbeatTime": ts(hb),
                "lastTransitionTime": ready_since,
                "message": "kubelet has no disk pressure",
                "reason": "KubeletHasNoDiskPressure",
                "status": "False",
                "type": "DiskPressure",
            },
            {
                "lastHeartbeatTime": ts(hb),
                "lastTransitionTime": ready_since,
                "message": "kubelet has sufficient PID available",
                "reason": "KubeletHasSufficientPID",
                "status": "False",
                "type": "PIDPressure",
            },
            {
                "lastHeartbeatTime": ts(hb),
                "lastTransitionTime": ready_since,
                "message": "kubelet is posting ready status",
                "reason": "KubeletReady",
                "status": "True",
                "type": "Ready",
            },
        ]
        if not nd.ready:
            t = ts(NOW - timedelta(minutes=12))
            hb2 = ts(NOW - timedelta(minutes=13))
            for c in conds:
                c.update(
                    lastHeartbeatTime=hb2,
                    lastTransitionTime=t,
                    message="Kubelet stopped posting node status.",
                    reason="NodeStatusUnknown",
                    status="Unknown",
                )
        ann = {
            "alpha.kubernetes.io/provided-node-ip": nd.ip,
            "csi.volume.kubernetes.io/nodeid": json.dumps(
                {"ebs.csi.aws.com": f"i-0{self.rnd.hex(16)}"}, separators=(",", ":")
            ),
            "nfd.node.kubernetes.io/feature-labels": ",".join(
                k.split("/", 1)[1]
                for k in nd.labels
                if k.startswith(("feature.node", "nvidia.com/gpu.p"))
            ),
            "nfd.node.kubernetes.io/worker.version": "v0.15.4",
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        }
        if nd.is_gpu:
            ann["nvidia.com/gpu-driver-upgrade-enabled"] = "true"
        spec: Obj = {"providerID": f"aws:///{nd.zone}/i-0{self.rnd.hex(16)}"}
        if nd.taints:
            spec["taints"] = nd.taints
        if nd.unschedulable:
            spec["unschedulable"] = True
        # the images a node holds: system images, what runs there, some leftovers
        imgs = [SYSTEM_IMAGES[k][0] for k in SYSTEM_IMAGES if k != "coredns"]
        if nd.is_gpu:
            imgs += [
                GPU_IMAGES[k][0]
                for k in (
                    "driver",
                    "toolkit",
                    "device-plugin",
                    "dcgm-exporter",
                    "validator",
                    "cuda",
                )
            ]
        imgs += nd.images
        imgs = list(dict.fromkeys(imgs))
        entries = sorted((self.img.node_entry(i) for i in imgs), key=lambda e: -e["sizeBytes"])
        vers = "1.7.11"
        status = {
            "addresses": [
                {"address": nd.ip, "type": "InternalIP"},
                {"address": nd.name, "type": "InternalDNS"},
                {"address": nd.name, "type": "Hostname"},
            ],
            "allocatable": alloc,
            "capacity": cap,
            "conditions": conds,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": entries,
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": self.rnd.uid(),
                "containerRuntimeVersion": f"containerd://{vers}",
                "kernelVersion": "5.10.215-203.850.amzn2.x86_64",
                "kubeProxyVersion": KUBE_VERSION,
                "kubeletVersion": KUBE_VERSION,
                "machineID": self.rnd.hex(32),
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2",
                "systemUUID": self.rnd.uid().replace("-", "")[:8] + "-" + self.rnd.uid()[9:],
            },
        }
        if nd.is_gpu:
            status["volumesAttached"] = [
                {
                    "devicePath": "",
                    "name": f"kubernetes.io/csi/ebs.csi.aws.com^vol-0{self.rnd.hex(16)}",
                }
            ]
            status["volumesInUse"] = [v["name"] for v in status["volumesAttached"]]
        meta = self.meta(nd.name, None, nd.created, nd.labels, ann)
        return {"metadata": meta, "spec": spec, "status": status}

    def build_controllers(self, ns: str) -> tuple[list[Obj], list[Obj], list[Obj]]:
        deps, rss, dss = [], [], []
        for o in self.owners[ns]:
            tpl_meta = {"creationTimestamp": None, **o.template["metadata"]}
            tpl = {"metadata": tpl_meta, "spec": o.template["spec"]}
            sel_labels = {
                k: v
                for k, v in o.template["metadata"]["labels"].items()
                if k
                in (
                    "app",
                    "app.kubernetes.io/name",
                    "k8s-app",
                    "app.kubernetes.io/instance",
                    "pod-template-hash",
                )
            }
            n = len(o.pods)
            ready = sum(1 for p in o.pods if p.state == "running")
            if o.kind == "Deployment":
                dsel = {k: v for k, v in sel_labels.items() if k != "pod-template-hash"}
                gen = self.r.randint(2, 30)
                dep_meta = self.meta(
                    o.name,
                    ns,
                    o.created,
                    {
                        k: v
                        for k, v in o.template["metadata"]["labels"].items()
                        if k != "pod-template-hash"
                    },
                    {
                        "deployment.kubernetes.io/revision": str(gen),
                        "meta.helm.sh/release-name": o.name,
                        "meta.helm.sh/release-namespace": ns,
                    },
                    uid=o.uid,
                    generation=gen,
                )
                dtpl = {
                    "metadata": {
                        "creationTimestamp": None,
                        "annotations": o.template["metadata"].get("annotations"),
                        "labels": {
                            k: v
                            for k, v in o.template["metadata"]["labels"].items()
                            if k != "pod-template-hash"
                        },
                    },
                    "spec": o.template["spec"],
                }
                last = ts(NOW - timedelta(days=self.r.randint(0, 20)))
                dst: Obj = {
                    "availableReplicas": ready,
                    "conditions": [
                        {
                            "lastTransitionTime": last,
                            "lastUpdateTime": last,
                            "message": "Deployment has minimum availability."
                            if ready >= o.replicas - 1
                            else "Deployment does not have minimum availability.",
                            "reason": "MinimumReplicasAvailable"
                            if ready >= o.replicas - 1
                            else "MinimumReplicasUnavailable",
                            "status": "True" if ready >= o.replicas - 1 else "False",
                            "type": "Available",
                        },
                        {
                            "lastTransitionTime": ts(o.created),
                            "lastUpdateTime": last,
                            "message": f'ReplicaSet "{o.rs_name}" has successfully progressed.',
                            "reason": "NewReplicaSetAvailable",
                            "status": "True",
                            "type": "Progressing",
                        },
                    ],
                    "observedGeneration": gen,
                    "readyReplicas": ready,
                    "replicas": o.replicas,
                    "updatedReplicas": o.replicas,
                }
                if o.replicas - ready:
                    dst["unavailableReplicas"] = o.replicas - ready
                if not ready:
                    del dst["availableReplicas"], dst["readyReplicas"]
                deps.append(
                    {
                        "metadata": dep_meta,
                        "spec": {
                            "progressDeadlineSeconds": 600,
                            "replicas": o.replicas,
                            "revisionHistoryLimit": 10,
                            "selector": {"matchLabels": dsel},
                            "strategy": {
                                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
                                "type": "RollingUpdate",
                            },
                            "template": dtpl,
                        },
                        "status": dst,
                    }
                )
                dep_ref = {
                    "apiVersion": "apps/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Deployment",
                    "name": o.name,
                    "uid": o.uid,
                }
                # the current ReplicaSet and two old ones scaled to 0
                for k in range(3):
                    cur = k == 0
                    rs_name = o.rs_name if cur else f"{o.name}-{self.rnd.suffix(10)}"
                    rs_labels = dict(o.template["metadata"]["labels"])
                    rs_labels["pod-template-hash"] = rs_name.rsplit("-", 1)[1]
                    rs_meta = self.meta(
                        rs_name,
                        ns,
                        o.created if not cur else NOW - timedelta(days=self.r.randint(0, 20)),
                        rs_labels,
                        {
                            "deployment.kubernetes.io/desired-replicas": str(o.replicas),
                            "deployment.kubernetes.io/max-replicas": str(
                                o.replicas + max(1, o.replicas // 4)
                            ),
                            "deployment.kubernetes.io/revision": str(gen - k),
                        },
                        dep_ref,
                        uid=o.rs_uid if cur else None,
                        generation=2,
                    )
                    rs_tpl = {
                        "metadata": dict(tpl_meta, labels=rs_labels),
                        "spec": o.template["spec"],
                    }
                    rst: Obj = {"observedGeneration": 2, "replicas": o.replicas if cur else 0}
                    if cur and n:
                        rst = {
                            "availableReplicas": ready,
                            "fullyLabeledReplicas": o.replicas,
                            "observedGeneration": 2,
                            "readyReplicas": ready,
                            "replicas": o.replicas,
                        }
                    rss.append(
                        {
                            "metadata": rs_meta,
                            "spec": {
                                "replicas": o.replicas if cur else 0,
                                "selector": {
                                    "matchLabels": dict(
                                        dsel,
                                        **{"pod-template-hash": rs_labels["pod-template-hash"]},
                                    )
                                },
                                "template": rs_tpl,
                            },
                            "status": rst,
                        }
                    )
            elif o.kind == "DaemonSet":
                ds_meta = self.meta(
                    o.name,
                    ns,
                    o.created,
                    dict(o.template["metadata"]["labels"]),
                    {"deprecated.daemonset.template.generation": "3"},
                    uid=o.uid,
                    generation=3,
                )
                unavailable = n - ready
                dst = {
                    "currentNumberScheduled": n,
                    "desiredNumberScheduled": n,
                    "numberAvailable": ready,
                    "numberMisscheduled": 0,
                    "numberReady": ready,
                    "observedGeneration": 3,
                    "updatedNumberScheduled": n,
                }
                if unavailable:
                    dst["numberUnavailable"] = unavailable
                dss.append(
                    {
                        "metadata": ds_meta,
                        "spec": {
                            "revisionHistoryLimit": 10,
                            "selector": {"matchLabels": {o.extra["lab_key"]: o.name}},
                            "template": tpl,
                            "updateStrategy": {
                                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
                                "type": "RollingUpdate",
                            },
                        },
                        "status": dst,
                    }
                )
        return deps, rss, dss

    # ---------------------------------------------------------------- events

    def ev(
        self,
        ns: str,
        kind: str,
        name: str,
        uid: str,
        reason: str,
        message: str,
        *,
        typ: str = "Normal",
        component: str = "kubelet",
        host: str | None = None,
        first: datetime,
        last: datetime | None = None,
        count: int = 1,
        field_path: str | None = None,
        api: str = "v1",
    ) -> None:
        last = last or first
        inv: Obj = {"apiVersion": api, "kind": kind, "name": name, "namespace": ns, "uid": uid}
        if field_path:
            inv["fieldPath"] = field_path
        inv["resourceVersion"] = self.rnd.resource_version()
        src: Obj = {"component": component}
        if host:
            src["host"] = host
        e = {
            "metadata": {
                "creationTimestamp": ts(first),
                "name": f"{name}.{self.rnd.hex(16)}",
                "namespace": ns,
                "resourceVersion": self.rnd.resource_version(),
                "uid": self.rnd.uid(),
            },
            "involvedObject": inv,
            "reason": reason,
            "message": message,
            "source": src,
            "firstTimestamp": ts(first),
            "lastTimestamp": ts(last),
            "count": count,
            "type": typ,
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host or "",
        }
        self.events[ns].append(e)

    def ev_new(
        self,
        ns: str,
        kind: str,
        name: str,
        uid: str,
        reason: str,
        message: str,
        *,
        typ: str = "Normal",
        controller: str = "default-scheduler",
        action: str = "Scheduling",
        at: datetime,
        series: tuple[int, datetime] | None = None,
        api: str = "v1",
    ) -> None:
        """An events.k8s.io/v1 event as core/v1 shows it: eventTime set, timestamps null."""
        e: Obj = {
            "metadata": {
                "creationTimestamp": ts(at),
                "name": f"{name}.{self.rnd.hex(16)}",
                "namespace": ns,
                "resourceVersion": self.rnd.resource_version(),
                "uid": self.rnd.uid(),
            },
            "involvedObject": {
                "apiVersion": api,
                "kind": kind,
                "name": name,
                "namespace": ns,
                "resourceVersion": self.rnd.resource_version(),
                "uid": uid,
            },
            "reason": reason,
            "message": message,
            "source": {},
            "firstTimestamp": None,
            "lastTimestamp": None,
            "type": typ,
            "eventTime": ts_micro(at + timedelta(microseconds=self.r.randint(0, 999_999))),
        }
        if series:
            e["series"] = {"count": series[0], "lastObservedTime": ts_micro(series[1])}
        e["action"] = action
        e["reportingComponent"] = controller
        e["reportingInstance"] = (
            f"{controller}-ip-10-0-{self.r.randint(0, 255)}-{self.r.randint(0, 255)}"
        )
        self.events[ns].append(e)

    def plan_events(self) -> None:
        target_total = round(20000 * self.scale)
        # pending pods: FailedScheduling (scheduler, events.k8s.io style), autoscaler's verdict
        for ns, pods in self.pods.items():
            for p in pods:
                if p.state != "pending":
                    continue
                first = p.created + timedelta(seconds=1)
                last = (
                    NOW if p.name == "train-0" else NOW - timedelta(seconds=self.r.randint(1, 240))
                )
                n = max(2, int((last - first).total_seconds() // self.r.choice([30, 60, 120])))
                self.ev_new(
                    ns,
                    "Pod",
                    p.name,
                    p.uid,
                    "FailedScheduling",
                    p.message,
                    typ="Warning",
                    at=first,
                    series=(n, last),
                )
                if p.gpus:
                    msg = (
                        "pod didn't trigger scale-up: 2 max node group size reached, 7 node(s) didn't match Pod's "
                        "node affinity/selector"
                        if p.name == "train-0" or p.gpus >= 4
                        else "pod didn't trigger scale-up: 2 max node group size reached, 3 node(s) had untolerated "
                        "taint {dedicated: ingress}, 4 Insufficient nvidia.com/gpu"
                    )
                    self.ev(
                        ns,
                        "Pod",
                        p.name,
                        p.uid,
                        "NotTriggerScaleUp",
                        msg,
                        component="cluster-autoscaler",
                        first=first + timedelta(seconds=10),
                        last=last - timedelta(seconds=5),
                        count=max(1, n // 2),
                    )
                elif p.owner.extra.get("unbound_pvc"):
                    self.ev(
                        ns,
                        "PersistentVolumeClaim",
                        f"data-{p.name}",
                        self.rnd.uid(),
                        "ProvisioningFailed",
                        'failed to provision volume with StorageClass "gp3-encrypted": rpc error: code = Internal desc = '
                        'Could not create volume "pvc-'
                        + self.rnd.uid()
                        + '": could not create volume in EC2: '
                        "VolumeLimitExceeded: You have exceeded your maximum gp3 storage limit of 500 TiB in this region.",
                        typ="Warning",
                        component="ebs.csi.aws.com_ebs-csi-controller-7d9b8c6f4-x2k8p_"
                        + self.rnd.uid(),
                        first=first,
                        last=last,
                        count=n,
                        api="v1",
                    )
        # crash-looping containers
        for ns, pods in self.pods.items():
            for p in pods:
                if p.state not in ("crashloop", "imagepull", "notready") or not p.node:
                    continue
                c0 = p.owner.template["spec"]["containers"][0]
                fp = f"spec.containers{{{c0['name']}}}"
                first = max(p.created, NOW - timedelta(hours=self.r.randint(1, 20)))
                if p.state == "crashloop":
                    self.ev(
                        ns,
                        "Pod",
                        p.name,
                        p.uid,
                        "BackOff",
                        f"Back-off restarting failed container {c0['name']} in pod {p.name}_{ns}({p.uid})",
                        typ="Warning",
                        host=p.node.name,
                        first=first,
                        last=NOW - timedelta(seconds=self.r.randint(1, 100)),
                        count=p.restarts * 5 + 3,
                        field_path=fp,
                    )
                    self.ev(
                        ns,
                        "Pod",
                        p.name,
                        p.uid,
                        "Pulled",
                        f'Container image "{c0["image"]}" already present on machine',
                        host=p.node.name,
                        first=first,
                        last=NOW - timedelta(seconds=self.r.randint(60, 300)),
                        count=p.restarts,
                        field_path=fp,
                    )
                    for reason, msg in (
                        ("Created", f"Created container {c0['name']}"),
                        ("Started", f"Started container {c0['name']}"),
                    ):
                        self.ev(
                            ns,
                            "Pod",
                            p.name,
                            p.uid,
                            reason,
                            msg,
                            host=p.node.name,
                            first=first,
                            last=NOW - timedelta(seconds=self.r.randint(60, 300)),
                            count=p.restarts,
                            field_path=fp,
                        )
                elif p.state == "imagepull":
                    img = c0["image"] + "-rc1"
                    self.ev(
                        ns,
                        "Pod",
                        p.name,
                        p.uid,
                        "Failed",
                        f'Failed to pull image "{img}": rpc error: code = NotFound desc = failed to pull and unpack image "{img}": failed to resolve reference "{img}": {img}: not found',
                        typ="Warning",
                        host=p.node.name,
                        first=first,
                        last=NOW - timedelta(seconds=30),
                        count=40,
                        field_path=fp,
                    )
                    self.ev(
                        ns,
                        "Pod",
                        p.name,
                        p.uid,
                        "BackOff",
                        f'Back-off pulling image "{img}"',
                        typ="Normal",
                        host=p.node.name,
                        first=first,
                        last=NOW - timedelta(seconds=10),
                        count=900,
                        field_path=fp,
                    )
                else:
                    port = p.owner.extra.get("port", 8080)
                    self.ev(
                        ns,
                        "Pod",
                        p.name,
                        p.uid,
                        "Unhealthy",
                        f'Readiness probe failed: Get "http://{p.ip}:{port}/ready": context deadline exceeded (Client.Timeout exceeded while awaiting headers)',
                        typ="Warning",
                        host=p.node.name,
                        first=first,
                        last=NOW - timedelta(seconds=self.r.randint(1, 60)),
                        count=self.r.randint(50, 2000),
                        field_path=fp,
                    )
        # node events (default namespace), unhealthy node
        for nd in self.nodes:
            if not nd.ready:
                self.ev(
                    "default",
                    "Node",
                    nd.name,
                    nd.name,
                    "NodeNotReady",
                    f"Node {nd.name} status is now: NodeNotReady",
                    component="node-controller",
                    first=NOW - timedelta(minutes=12),
                    api="",
                )
            if nd.unschedulable:
                self.ev(
                    "default",
                    "Node",
                    nd.name,
                    nd.name,
                    "NodeNotSchedulable",
                    f"Node {nd.name} status is now: NodeNotSchedulable",
                    component="kubelet",
                    host=nd.name,
                    first=NOW - timedelta(minutes=47),
                    api="",
                )
        # HPA and deployment scaling
        for ns, owners in self.owners.items():
            for o in owners:
                if o.kind == "Deployment" and o.replicas >= 6 and self.r.random() < 0.5:
                    t = NOW - timedelta(minutes=self.r.randint(1, 55))
                    self.ev(
                        ns,
                        "HorizontalPodAutoscaler",
                        o.name,
                        self.rnd.uid(),
                        "SuccessfulRescale",
                        f"New size: {o.replicas}; reason: cpu resource utilization (percentage of request) above target",
                        component="horizontal-pod-autoscaler",
                        first=t,
                        count=self.r.randint(1, 6),
                        api="autoscaling/v2",
                    )
                    self.ev(
                        ns,
                        "Deployment",
                        o.name,
                        o.uid,
                        "ScalingReplicaSet",
                        f"Scaled up replica set {o.rs_name} to {o.replicas} from {max(1, o.replicas - self.r.randint(1, 4))}",
                        component="deployment-controller",
                        first=t,
                        api="apps/v1",
                    )
        # recently started pods: scheduling, image pulls, container starts (most events a real
        # cluster holds, since events live for an hour)
        total = sum(len(v) for v in self.events.values())
        running = [
            p for ns in sorted(self.pods) for p in self.pods[ns] if p.state == "running" and p.node
        ]
        self.r.shuffle(running)
        for p in running:
            if total >= target_total:
                break
            p.recent = True
            p.created = NOW - timedelta(seconds=self.r.randint(60, 3500))
            ns = p.ns
            host = p.node.name if p.node else None
            self.ev_new(
                ns,
                "Pod",
                p.name,
                p.uid,
                "Scheduled",
                f"Successfully assigned {ns}/{p.name} to {host}",
                at=p.created + timedelta(seconds=1),
                action="Binding",
            )
            total += 1
            t = p.created + timedelta(seconds=2)
            for c in p.owner.template["spec"]["containers"]:
                fp = f"spec.containers{{{c['name']}}}"
                if self.r.random() < 0.3:
                    secs = self.r.uniform(0.5, 40 if not p.gpus else 300)
                    self.ev(
                        ns,
                        "Pod",
                        p.name,
                        p.uid,
                        "Pulling",
                        f'Pulling image "{c["image"]}"',
                        host=host,
                        first=t,
                        field_path=fp,
                    )
                    self.ev(
                        ns,
                        "Pod",
                        p.name,
                        p.uid,
                        "Pulled",
                        f'Successfully pulled image "{c["image"]}" in {secs:.3f}s ({secs:.3f}s including waiting). Image size: {self.img.sizes.get(c["image"], 0)} bytes.',
                        host=host,
                        first=t + timedelta(seconds=int(secs)),
                        field_path=fp,
                    )
                    total += 2
                else:
                    self.ev(
                        ns,
                        "Pod",
                        p.name,
                        p.uid,
                        "Pulled",
                        f'Container image "{c["image"]}" already present on machine',
                        host=host,
                        first=t,
                        field_path=fp,
                    )
                    total += 1
                self.ev(
                    ns,
                    "Pod",
                    p.name,
                    p.uid,
                    "Created",
                    f"Created container {c['name']}",
                    host=host,
                    first=t,
                    field_path=fp,
                )
                self.ev(
                    ns,
                    "Pod",
                    p.name,
                    p.uid,
                    "Started",
                    f"Started container {c['name']}",
                    host=host,
                    first=t,
                    field_path=fp,
                )
                total += 2
            o = p.owner
            if o.kind == "Deployment":
                self.ev(
                    ns,
                    "ReplicaSet",
                    o.rs_name,
                    o.rs_uid,
                    "SuccessfulCreate",
                    f"Created pod: {p.name}",
                    component="replicaset-controller",
                    first=p.created,
                    api="apps/v1",
                )
                total += 1
            elif o.kind == "DaemonSet":
                self.ev(
                    ns,
                    "DaemonSet",
                    o.name,
                    o.uid,
                    "SuccessfulCreate",
                    f"Created pod: {p.name}",
                    component="daemonset-controller",
                    first=p.created,
                    api="apps/v1",
                )
                total += 1
        for evs in self.events.values():
            evs.sort(key=lambda e: e["metadata"]["creationTimestamp"])

    # ---------------------------------------------------------------- logs

    def plan_logs(self) -> None:
        dp = getattr(self, "device_plugin_ds", None)
        if dp is None:
            return
        crashing = [p for p in dp.pods if p.state == "crashloop"]
        healthy = [p for p in dp.pods if p.state == "running"][:10]
        for p in crashing + healthy:
            assert p.node is not None
            start = (
                NOW - timedelta(seconds=self.r.randint(30, 280))
                if p.state == "crashloop"
                else p.created + timedelta(seconds=20)
            )
            self.logs[(p.ns, p.name)] = self.device_plugin_log(p, start)

    def device_plugin_log(self, p: PodPlan, start: datetime) -> str:
        assert p.node is not None
        t = start

        def line(level: str, src: str, msg: str, dt: float = 0.0003) -> str:
            nonlocal t
            t += timedelta(seconds=dt)
            return f"{level}{klog_ts(t)}       1 {src}] {msg}\n"

        body = [
            line("I", "main.go:199", "Starting FS watcher."),
            line("I", "main.go:206", "Starting OS watcher."),
            line("I", "main.go:221", "Starting Plugins."),
            line("I", "main.go:278", "Loading configuration."),
            line("I", "main.go:303", "Updating config with default resource matching patterns."),
            line(
                "I",
                "main.go:314",
                '\nRunning with config:\n{\n  "version": "v1",\n  "flags": {\n    "migStrategy": "single",\n'
                '    "failOnInitError": true,\n    "nvidiaDriverRoot": "/run/nvidia/driver",\n    "gdsEnabled": false,\n'
                '    "mofedEnabled": false,\n    "useNodeFeatureAPI": null,\n    "plugin": {\n      "passDeviceSpecs": true,\n'
                '      "deviceListStrategy": [\n        "envvar"\n      ],\n      "deviceIDStrategy": "uuid",\n'
                '      "cdiAnnotationPrefix": "cdi.k8s.io/",\n      "nvidiaCTKPath": "/usr/local/nvidia/toolkit/nvidia-ctk",\n'
                '      "containerDriverRoot": "/driver-root"\n    }\n  },\n  "resources": {\n    "gpus": [\n      {\n'
                '        "pattern": "*",\n        "name": "nvidia.com/gpu"\n      }\n    ]\n  },\n  "sharing": {\n'
                '    "timeSlicing": {}\n  }\n}',
            ),
            line("I", "main.go:317", "Retrieving plugins."),
        ]
        if p.node.plugin == "ok":
            body += [
                line("I", "factory.go:107", "Detected NVML platform: found NVML library"),
                line(
                    "I",
                    "factory.go:107",
                    "Detected non-Tegra platform: /sys/devices/soc0/family file not found",
                ),
                line("I", "server.go:165", "Starting GRPC server for 'nvidia.com/gpu'", 0.12),
                line(
                    "I",
                    "server.go:117",
                    "Starting to serve 'nvidia.com/gpu' on /var/lib/kubelet/device-plugins/nvidia-gpu.sock",
                ),
                line(
                    "I",
                    "server.go:125",
                    "Registered device plugin for 'nvidia.com/gpu' with Kubelet",
                    0.004,
                ),
            ]
        elif p.node.plugin == "driver-mismatch":
            body += [
                line("I", "factory.go:107", "Detected NVML platform: found NVML library"),
                line(
                    "E",
                    "factory.go:68",
                    "Failed to initialize NVML: Driver/library version mismatch",
                ),
                line(
                    "E",
                    "factory.go:69",
                    "If this is a GPU node, did you set the docker default runtime to `nvidia`?",
                ),
                line(
                    "E",
                    "factory.go:70",
                    "You can check the prerequisites at: https://github.com/NVIDIA/k8s-device-plugin#prerequisites",
                ),
                line(
                    "E",
                    "factory.go:71",
                    "You can learn how to set the runtime at: https://github.com/NVIDIA/k8s-device-plugin#quick-start",
                ),
                line(
                    "E",
                    "factory.go:72",
                    "If this is not a GPU node, you should set up a toleration or nodeSelector to only deploy this plugin on GPU nodes",
                ),
                line(
                    "E",
                    "main.go:132",
                    "error starting plugins: error creating plugin manager: unable to create plugin manager: nvml init failed: ERROR_LIB_RM_VERSION_MISMATCH",
                ),
            ]
        else:
            body += [
                line(
                    "I",
                    "factory.go:104",
                    "Detected non-NVML platform: could not load NVML library: libnvidia-ml.so.1: cannot open shared object file: No such file or directory",
                ),
                line(
                    "I",
                    "factory.go:104",
                    "Detected non-Tegra platform: /sys/devices/soc0/family file not found",
                ),
                line("E", "factory.go:112", "Incompatible platform detected"),
                line(
                    "E",
                    "factory.go:113",
                    "If this is a GPU node, did you configure the NVIDIA Container Toolkit?",
                ),
                line(
                    "E",
                    "factory.go:114",
                    "You can check the prerequisites at: https://github.com/NVIDIA/k8s-device-plugin#prerequisites",
                ),
                line(
                    "E",
                    "main.go:132",
                    "error starting plugins: error creating plugin manager: unable to create plugin manager: nvml init failed: ERROR_LIBRARY_NOT_FOUND",
                ),
            ]
        ctr = p.owner.template["spec"]["containers"]
        out = []
        for c in ctr:
            out.append(f"==== START logs for container {c['name']} of pod {p.ns}/{p.name} ====\n")
            if c is ctr[0]:
                out += body
            else:
                out.append(
                    f"{t.strftime('%Y/%m/%d %H:%M:%S')} Waiting for change to 'nvidia.com/device-plugin.config' label\n"
                )
            out.append(f"==== END logs for container {c['name']} of pod {p.ns}/{p.name} ====\n")
        return "".join(out)

    # ---------------------------------------------------------------- run

    def plan(self) -> None:
        self.plan_nodes()
        self.plan_system()
        self.plan_gpu()
        self.plan_pending_gpu()
        self.plan_cpu()
        self.plan_messages()
        # node image lists: what runs there
        for ns in self.pods:
            for p in self.pods[ns]:
                if p.node and len(p.node.images) < 14:
                    for c in p.owner.template["spec"]["containers"]:
                        if c["image"] not in p.node.images:
                            p.node.images.append(c["image"])
        self.plan_events()
        self.plan_logs()
        sys_ns = [
            "default",
            "kube-node-lease",
            "kube-public",
            "kube-system",
            "gpu-operator",
            "monitoring",
            "logging",
            "ingress-nginx",
            "cert-manager",
        ]
        gpu_ns = ["ml-team", "research", "batch-gpu", "llm-serving", "inference"]
        self.namespaces = sorted({*sys_ns, *gpu_ns, *self.WORKLOAD_NS, *self.pods})
        self.services["default"].insert(
            0,
            {
                "metadata": {
                    "creationTimestamp": ts(NOW - timedelta(days=400)),
                    "labels": {"component": "apiserver", "provider": "kubernetes"},
                    "name": "kubernetes",
                    "namespace": "default",
                    "resourceVersion": "196",
                    "uid": self.rnd.uid(),
                },
                "spec": {
                    "clusterIP": "172.20.0.1",
                    "clusterIPs": ["172.20.0.1"],
                    "internalTrafficPolicy": "Cluster",
                    "ipFamilies": ["IPv4"],
                    "ipFamilyPolicy": "SingleStack",
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 443}],
                    "sessionAffinity": "None",
                    "type": "ClusterIP",
                },
                "status": {"loadBalancer": {}},
            },
        )


# --------------------------------------------------------------------------------------
# writing, in kubectl's layout: json.MarshalIndent(obj, "", "    ")


def write_list(path: str, kind: str, api: str, items: list[Obj], rv: str) -> int:
    """Write a *List streaming item by item (same bytes as dumping the whole list at once)."""
    head = json.dumps(
        {"kind": kind, "apiVersion": api, "metadata": {"resourceVersion": rv}}, indent=4
    )
    head = head[:-2]  # drop "\n}"
    with open(path, "w", encoding="utf-8") as f:
        f.write(head)
        if not items:
            f.write(',\n    "items": []\n}\n')
        else:
            f.write(',\n    "items": [\n')
            last = len(items) - 1
            for i, it in enumerate(items):
                s = "        " + json.dumps(it, indent=4, ensure_ascii=False).replace(
                    "\n", "\n        "
                )
                f.write(s)
                f.write(",\n" if i < last else "\n")
            f.write("    ]\n}\n")
        return f.tell()


def generate(out: str, nodes: int, pods: int, seed: int,
             gpu_nodes: int | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    g = Generator(nodes, pods, seed, gpu_nodes)
    g.plan()
    t_plan = time.perf_counter() - t0
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    rv = str(g.rnd.rv + 1000)
    size = 0
    node_objs = [g.build_node(nd) for nd in g.nodes]
    size += write_list(os.path.join(out, "nodes.json"), "NodeList", "v1", node_objs, rv)
    node_sizes = [len(json.dumps(n, separators=(",", ":"))) for n in node_objs[:50]]
    del node_objs
    pod_sizes: list[int] = []
    counts: Counter[str] = Counter()
    for ns in g.namespaces:
        d = os.path.join(out, ns)
        os.makedirs(d, exist_ok=True)
        deps, rss, dss = g.build_controllers(ns)
        pod_objs = [g.build_pod(p) for p in g.pods.get(ns, [])]
        if len(pod_sizes) < 200:
            pod_sizes += [len(json.dumps(p, separators=(",", ":"))) for p in pod_objs[:20]]
        lists = [
            ("events.json", "EventList", "v1", g.events.get(ns, [])),
            ("replication-controllers.json", "ReplicationControllerList", "v1", []),
            ("services.json", "ServiceList", "v1", g.services.get(ns, [])),
            ("daemonsets.json", "DaemonSetList", "apps/v1", dss),
            ("deployments.json", "DeploymentList", "apps/v1", deps),
            ("replicasets.json", "ReplicaSetList", "apps/v1", rss),
            ("pods.json", "PodList", "v1", pod_objs),
        ]
        for fname, kind, api, items in lists:
            size += write_list(os.path.join(d, fname), kind, api, items, rv)
            counts[kind] += len(items)
    for (ns, pod), text in sorted(g.logs.items()):
        d = os.path.join(out, ns, pod)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "logs.txt"), "w", encoding="utf-8") as f:
            f.write(text)
            size += f.tell()
    return {
        "seconds": time.perf_counter() - t0,
        "plan_seconds": t_plan,
        "bytes": size,
        "counts": counts,
        "namespaces": len(g.namespaces),
        "nodes": len(g.nodes),
        "gpu_nodes": sum(nd.is_gpu for nd in g.nodes),
        "logs": len(g.logs),
        "targets": g.targets,
        "pod_kb": sum(pod_sizes) / max(1, len(pod_sizes)) / 1024,
        "node_kb": sum(node_sizes) / max(1, len(node_sizes)) / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gpu-nodes", type=int, default=None,
                    help="GPU nodes among --nodes (default: a quarter)")
    a = ap.parse_args(argv)
    if a.nodes < 20:
        ap.error("--nodes must be at least 20")
    if a.gpu_nodes is not None and not 2 <= a.gpu_nodes <= a.nodes - 20:
        ap.error("--gpu-nodes must be between 2 and --nodes minus 20")
    info = generate(a.out_dir, a.nodes, a.pods, a.seed, a.gpu_nodes)
    c = info["counts"]
    print(
        f"wrote {a.out_dir}: {info['bytes'] / 1e6:.1f} MB in {info['seconds']:.1f} s "
        f"({info['nodes']} nodes, {info['gpu_nodes']} GPU; {c['PodList']} pods; {c['EventList']} events; "
        f"{info['namespaces']} namespaces; {info['logs']} logs.txt; "
        f"avg compact JSON: pod {info['pod_kb']:.1f} KB, node {info['node_kb']:.1f} KB)",
        file=sys.stderr,
    )
    for t in info["targets"]:
        print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
