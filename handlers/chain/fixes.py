"""Summaries and fixes for the chain's codes, filled in with the node and pod they are about."""

from __future__ import annotations

from dataclasses import dataclass

from handlers.chain.fixcontext import Setup
from handlers.model import Severity

CRIT = Severity.CRITICAL
WARN = Severity.WARNING
INFO = Severity.INFO


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


def _logs(w: Where, previous: bool = True) -> str:
    c = f" -c {w.container}" if w.container else ""
    prev = " --previous" if previous else ""
    return f"kubectl -n {w.namespace} logs {w.pod}{c}{prev}"


def summary(code: str, w: Where) -> str:
    n = w.node
    return {
        "DRIVER_NOT_READY": f"The NVIDIA driver is not loaded or not ready on {n}.",
        "CONTAINER_RUNTIME_NOT_CONFIGURED":
            f"The NVIDIA container runtime is not configured on {n}: containers get no GPU "
            "libraries.",
        "NVML_INIT_FAILED": f"NVML cannot be initialised in GPU containers on {n}.",
        "CUDA_DRIVER_MISMATCH":
            f"A container needs a newer CUDA than the driver on {n} supports"
            + (f" (driver {w.driver}, CUDA {w.cuda})." if w.driver else "."),
        "KUBELET_REGISTRATION_FAILED":
            f"The device plugin on {n} runs, but the kubelet has not registered it.",
        "DEVICE_PLUGIN_NOT_PRIVILEGED":
            f"The device plugin on {n} cannot create its socket in /var/lib/kubelet/"
            "device-plugins.",
        "TIMESLICING_CONFIG_INVALID": f"The GPU sharing config for {n} is invalid.",
        "MIG_CONFIG_FAILED": f"MIG reconfiguration failed on {n}.",
        "DEVICE_PLUGIN_CRASHLOOP": f"The device plugin on {n} keeps crashing.",
        "DEVICE_PLUGIN_IMAGE_PULL": f"The device-plugin image cannot be pulled on {n}.",
        "OPERATOR_IMAGE_PULL": f"A GPU operator image cannot be pulled on {n}.",
        "OPERATOR_COMPONENT_FAILING": f"A GPU operator component is not ready on {n}.",
        "GPU_UNHEALTHY": f"The device plugin marked GPUs on {n} unhealthy.",
        "GPU_NOT_ADVERTISED": f"{n} does not advertise its GPUs (nvidia.com/gpu).",
        "DEVICE_PLUGIN_MISSING": f"No device-plugin pod runs on {n}.",
        "NFD_LABELS_MISSING": f"GPU feature labels are missing on {n}.",
        "DEVICE_ADMISSION_FAILED": f"The kubelet on {n} rejected pods' GPU allocation.",
        "GPU_HARDWARE_NOT_DETECTED":
            f"{n} is meant to have GPUs but NFD reports no NVIDIA PCI device.",
    }.get(code, f"{code} on {n}.")


def fix(code: str, w: Where) -> str:
    n, ns, pod = w.node, w.namespace, w.pod
    if code == "DRIVER_NOT_READY":
        return (
            f"{_logs(w)}   # why the driver did not load\n"
            f"kubectl debug node/{n} -it --image=ubuntu -- chroot /host sh -c "
            "'lsmod | grep nvidia; dmesg | grep -iE \"nvrm|nvidia\" | tail -20'\n"
            + (("GPU operator: a kernel update needs a driver image built for the new kernel; "
                f"rebuild it with kubectl -n {ns} delete pod -l app=nvidia-driver-daemonset "
                f"--field-selector spec.nodeName={n}.")
               if _managed(w, "driver") else
               (f"The driver is installed on the host ({_why(w, 'driver')}): reinstall it for "
                "the running kernel (modprobe nvidia) or reboot the node.")))
    if code == "CONTAINER_RUNTIME_NOT_CONFIGURED":
        return (
            "Configure the NVIDIA runtime in the node's container runtime and restart it:\n"
            f"kubectl debug node/{n} -it --image=ubuntu -- chroot /host sh -c "
            "'nvidia-ctk runtime configure --runtime=containerd --set-as-default && "
            "systemctl restart containerd'\n"
            "(CRI-O: --runtime=crio; Docker: --runtime=docker). With the GPU operator the "
            f"toolkit DaemonSet does this: kubectl -n {ns} logs -l "
            f"app=nvidia-container-toolkit-daemonset --field-selector spec.nodeName={n}. "
            f"Then restart the device plugin: kubectl -n {ns} delete pod {pod}")
    if code == "NVML_INIT_FAILED":
        return (
            "Run the container with the NVIDIA runtime (runtimeClassName: nvidia, or nvidia as "
            "the default runtime) so libnvidia-ml.so.1 is injected, and check the host "
            f"driver: kubectl debug node/{n} -it --image=ubuntu -- chroot /host nvidia-smi\n"
            "'Failed to initialize NVML: Unknown Error' after `systemctl daemon-reload`: "
            f"restart the pod (kubectl -n {ns} delete pod {pod}) and switch the toolkit to CDI "
            "or SystemdCgroup = true.")
    if code == "CUDA_DRIVER_MISMATCH":
        return _cuda_fix(w)
    if code == "KUBELET_REGISTRATION_FAILED":
        return (
            f"kubectl -n {ns} delete pod {pod}   # the plugin registers again when it starts\n"
            f"On {n}: ls -l /var/lib/kubelet/device-plugins/   # kubelet.sock must exist\n"
            "journalctl -u kubelet | grep -i 'device plugin'\n"
            "A kubelet with a non-default --root-dir (k0s, microk8s) needs that directory "
            "mounted at /var/lib/kubelet/device-plugins in the plugin pod.")
    if code == "DEVICE_PLUGIN_NOT_PRIVILEGED":
        return (
            "Mount the kubelet's device-plugin directory into the plugin as root:\n"
            "        volumeMounts:\n        - name: device-plugin\n"
            "          mountPath: /var/lib/kubelet/device-plugins\n"
            "      volumes:\n      - name: device-plugin\n        hostPath:\n"
            "          path: /var/lib/kubelet/device-plugins")
    if code == "TIMESLICING_CONFIG_INVALID":
        return (
            f"{_logs(w, previous=False)}\n"
            f"kubectl get node {n} -L nvidia.com/device-plugin.config,nvidia.com/gpu.replicas")
    if code == "MIG_CONFIG_FAILED":
        return (
            f"{_logs(w, previous=False)}   # mig-manager's error\n"
            f"Check the profile in nvidia.com/mig.config exists in the mig-parted config "
            f"(kubectl -n {ns} get cm default-mig-parted-config -o yaml) and fits the GPU; "
            "stop GPU workloads on the node (MIG mode changes need idle GPUs), then apply it "
            f"again: kubectl label node {n} nvidia.com/mig.config=<profile> --overwrite")
    if code == "DEVICE_PLUGIN_CRASHLOOP":
        return (
            f"{_logs(w)}\n"
            "Fix the cause its log shows (the other findings on this node), then restart it: "
            f"kubectl -n {ns} delete pod {pod}")
    if code == "DEVICE_PLUGIN_IMAGE_PULL":
        return (
            f"kubectl -n {ns} describe pod {pod}   # the registry's answer\n"
            + _plugin_image_fix(w))
    if code == "OPERATOR_IMAGE_PULL":
        return (
            f"kubectl -n {ns} describe pod {pod}   # the registry's answer\n"
            "Driver images are published per OS (<version>-ubuntu22.04, -ubuntu24.04, "
            "-rhel9.4)" + (f"; this node runs {w.setup.os_image}" if w.setup and w.setup.os_image
                           else "") + ": set a driver version published for it in "
            + _policy_patch(w, "driver", w.setup.newer.driver if w.setup and w.setup.newer
                            else "<version published for the OS>")
            + "; for a private registry set spec.<component>.repository and imagePullSecrets.")
    if code == "OPERATOR_COMPONENT_FAILING":
        return f"kubectl -n {ns} describe pod {pod}\n{_logs(w)}"
    if code == "GPU_UNHEALTHY":
        return (
            f"kubectl -n {ns} delete pod {pod}   # the plugin re-checks device health on start\n"
            f"kubectl debug node/{n} -it --image=ubuntu -- chroot /host sh -c "
            "'dmesg | grep -i xid; nvidia-smi -q | grep -i -A2 retired'\n"
            "Xid 79 (fallen off the bus), 48/63/64/94/95 (ECC): drain the node and reset or "
            f"replace the GPU: kubectl drain {n} --ignore-daemonsets --delete-emptydir-data")
    if code == "GPU_NOT_ADVERTISED":
        return (
            "Fix the cause in the chain (the other findings on this node), then check: "
            f"kubectl get node {n} -o jsonpath='{{.status.capacity.nvidia\\.com/gpu}}'")
    if code == "NFD_LABELS_MISSING":
        return (
            "GPU Feature Discovery sets these labels: check its pod on the node "
            f"(kubectl -n {ns} get pods -o wide --field-selector spec.nodeName={n} | grep "
            "feature-discovery) and enable it ("
            + ("GPU operator: ClusterPolicy spec.gfd.enable: true; " if _has_operator(w)
               else "") + "device-plugin chart: helm upgrade nvdp nvidia/nvidia-device-plugin "
            "--set gfd.enabled=true).")
    if code == "DEVICE_ADMISSION_FAILED":
        return (
            f"kubectl delete pod -n {ns} {pod}   # its controller creates a new one\n"
            "If it happens again, restart the device plugin so kubelet and plugin agree on "
            f"the healthy devices: kubectl -n <plugin namespace> delete pod "
            f"<device-plugin pod on {n}>")
    if code == "GPU_HARDWARE_NOT_DETECTED":
        return (
            f"kubectl debug node/{n} -it --image=ubuntu -- chroot /host sh -c "
            "'lspci -nn | grep -i 10de; dmesg | grep -i xid'\n"
            "No NVIDIA device listed: the machine has no GPU attached (wrong instance type, "
            "PCI passthrough not configured, or a GPU fallen off the bus): replace the node, "
            f"kubectl drain {n} --ignore-daemonsets --delete-emptydir-data && kubectl delete "
            f"node {n}. Listed: restart the NFD worker on {n} so it relabels the node.")
    return ""


def _managed(w: Where, component: str) -> bool:
    """True when the operator manages it, or when that could not be checked."""
    m = getattr(w.setup, component, None) if w.setup else None
    return m is None or m.yes or not m.known


def _unknown(w: Where, component: str) -> bool:
    m = getattr(w.setup, component, None) if w.setup else None
    return m is not None and not m.known


def _why(w: Where, component: str) -> str:
    m = getattr(w.setup, component, None) if w.setup else None
    return m.why if m is not None else ""


def _policy_patch(w: Where, component: str, version: str) -> str:
    """``component``: the ClusterPolicy spec key; Setup names it ``plugin`` for devicePlugin."""
    attr = "plugin" if component == "devicePlugin" else component
    m = getattr(w.setup, attr, None) if w.setup else None
    name = (m.policy if m is not None and m.policy else "cluster-policy")
    now = f" (now {m.version})" if m is not None and m.version else ""
    return (f"ClusterPolicy {name}{now}: kubectl patch clusterpolicy {name} --type merge -p "
            f"'{{\"spec\":{{\"{component}\":{{\"version\":\"{version}\"}}}}}}'")


def _cuda_fix(w: Where) -> str:
    """Options that work here: the image, a node with a newer driver that exists, the
    driver upgrade through whoever manages the driver."""
    want = w.cuda or "<node CUDA>"
    now = f" {w.driver}" if w.driver else ""
    out = [f"Use an image built for CUDA <= {want} (the newest the node's driver{now} "
           "supports)."]
    newer = w.setup.newer if w.setup else None
    if newer is not None:
        out.append(f"Or keep the pod on nodes with a newer driver, as {newer.node} has "
                   f"({newer.driver}" + (f", CUDA {newer.cuda}" if newer.cuda else "") + "):\n"
                   f"nodeSelector:\n  nvidia.com/cuda.driver.major: \"{newer.major}\"")
    target = newer.driver if newer is not None else "<a branch that supports the image's CUDA>"
    if _unknown(w, "driver"):
        out.append(f"Or upgrade the driver on {w.node} to {target} ({_why(w, 'driver')}): if "
                   "the GPU operator installs it, " + _policy_patch(w, "driver", target)
                   + f"; if it is installed on the host, upgrade it there ({CUDA_COMPAT})")
    elif _managed(w, "driver"):
        out.append("Or upgrade the driver through the GPU operator, "
                   + _policy_patch(w, "driver", target)
                   + ("" if newer else f" (versions: {CUDA_COMPAT})"))
    else:
        out.append(f"Or upgrade the host driver on {w.node} to {target} ({_why(w, 'driver')}; "
                   f"CUDA support per driver: {CUDA_COMPAT})")
    return "\n".join(out)


def _plugin_image_fix(w: Where) -> str:
    img = w.setup.plugin_image if w.setup else ""
    tag = img.rsplit(":", 1)[1] if ":" in img.rsplit("/", 1)[-1] else ""
    where = (f"the image the running plugin pods use ({img})" if img else
             "a published tag (https://github.com/NVIDIA/k8s-device-plugin/releases)")
    if _managed(w, "plugin"):
        return (f"Set the device plugin to {where} through the GPU operator, "
                + _policy_patch(w, "devicePlugin", tag or "<published tag>")
                + "; for a private registry set spec.devicePlugin.repository and "
                "imagePullSecrets.")
    return (f"Point the DaemonSet at {where} (kubectl -n {w.namespace} set image "
            f"daemonset/<plugin daemonset> <container>={img or '<image:tag>'}) and add "
            "imagePullSecrets for a private registry" + (f" ({_why(w, 'plugin')})"
                                                         if _why(w, "plugin") else "") + ".")


def _has_operator(w: Where) -> bool:
    """A ClusterPolicy exists, or whether one does could not be checked."""
    m = w.setup.driver if w.setup else None
    return m is None or not m.known or bool(m.policy)
