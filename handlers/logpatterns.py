"""Known error lines in GPU component logs, event messages and termination messages.

``classify_log(text)`` returns ``(code, line)`` for every line that proves a finding code,
the line exactly as it appears in the log (trailing whitespace removed). A line is given
the first code whose pattern matches, so the more specific causes come first: "Failed to
initialize NVML: Driver Not Loaded" is a driver problem, not an NVML library problem.

The lines come from the NVIDIA device plugin (``factory.go``, ``main.go``, ``server.go``,
``health.go``), its config-manager, the GPU operator's driver container and validator,
mig-manager, nvidia-container-cli, kubelet's device manager and CUDA applications.
"""

from __future__ import annotations

import re

# (code, pattern), most specific first.
_PATTERNS: list[tuple[str, str]] = [
    # The image's CUDA needs a newer driver than the node has.
    ("CUDA_DRIVER_MISMATCH", r"CUDA driver version is insufficient for CUDA runtime version"),
    ("CUDA_DRIVER_MISMATCH", r"unsatisfied condition: cuda>=\S+,? please update your driver"),
    ("CUDA_DRIVER_MISMATCH", r"cudaErrorInsufficientDriver|CUDA_ERROR_INSUFFICIENT_DRIVER"),
    ("CUDA_DRIVER_MISMATCH", r"forward compatibility was attempted on non supported HW"),
    # The kernel driver is missing, not loaded, or does not match its user-space libraries.
    ("DRIVER_NOT_READY",
     r"NVIDIA-SMI has failed because it couldn.?t communicate with the NVIDIA driver"),
    ("DRIVER_NOT_READY", r"(?i:driver not loaded)"),
    ("DRIVER_NOT_READY", r"(?i:driver/library version mismatch)"),
    ("DRIVER_NOT_READY", r"Could not resolve Linux kernel version"),
    ("DRIVER_NOT_READY", r"(?i:could not insert 'nvidia)"),
    ("DRIVER_NOT_READY", r"(?i:Could not load NVIDIA driver kernel modules)"),
    # The NVIDIA DRA driver's kubelet plugin finds no driver under NVIDIA_DRIVER_ROOT
    # (NVIDIA/k8s-dra-driver-gpu, hack/kubelet-plugin-prestart.sh).
    ("DRIVER_NOT_READY", r"Check failed\. Has the NVIDIA GPU driver been set up\?"),
    # The device plugin cannot create its socket: mount missing, read-only, not root.
    ("DEVICE_PLUGIN_NOT_PRIVILEGED",
     r"/var/lib/kubelet/device-plugins/\S*:? ?bind: "
     r"(?:permission denied|read-only file system|no such file or directory)"),
    ("DEVICE_PLUGIN_NOT_PRIVILEGED",
     r"/var/lib/kubelet/device-plugins\S*: (?:permission denied|read-only file system)"),
    # The NVIDIA container runtime is not installed or not the runtime the pod runs with.
    ("CONTAINER_RUNTIME_NOT_CONFIGURED", r"did you configure the NVIDIA Container Toolkit"),
    ("CONTAINER_RUNTIME_NOT_CONFIGURED", r"did you set the docker default runtime to"),
    ("CONTAINER_RUNTIME_NOT_CONFIGURED", r"Incompatible (?:strategy|platform) detected"),
    ("CONTAINER_RUNTIME_NOT_CONFIGURED", r"no runtime for \\?\"?nvidia\\?\"? is configured"),
    ("CONTAINER_RUNTIME_NOT_CONFIGURED", r"unknown or invalid runtime name:? \"?nvidia"),
    ("CONTAINER_RUNTIME_NOT_CONFIGURED",
     r"\"?nvidia-container-runtime\"?: (?:executable file not found|no such file or directory)"),
    # NVML (libnvidia-ml) cannot be loaded or initialised inside the container.
    ("NVML_INIT_FAILED", r"Failed to initialize NVML"),
    ("NVML_INIT_FAILED", r"could not load NVML library"),
    ("NVML_INIT_FAILED", r"libnvidia-ml\.so(?:\.1)?: cannot open shared object file"),
    ("NVML_INIT_FAILED", r"nvml init failed"),
    # The plugin serves but kubelet's registration socket is missing or refuses it.
    ("KUBELET_REGISTRATION_FAILED", r"Could not register device plugin"),
    ("KUBELET_REGISTRATION_FAILED", r"failed to dial device plugin"),
    ("KUBELET_REGISTRATION_FAILED", r"Could not contact Kubelet"),
    ("KUBELET_REGISTRATION_FAILED",
     r"kubelet\.sock\S*:? (?:connect: )?(?:no such file or directory|connection refused"
     r"|permission denied)"),
    # The sharing (time-slicing / MPS) config the plugin was told to use.
    ("TIMESLICING_CONFIG_INVALID", r"specified config \S+ does not exist"),
    ("TIMESLICING_CONFIG_INVALID", r"unable to parse config file"),
    ("TIMESLICING_CONFIG_INVALID", r"error parsing config file"),
    ("TIMESLICING_CONFIG_INVALID", r"no configuration files available"),
    ("TIMESLICING_CONFIG_INVALID", r"(?i:unable to load config)"),
    ("TIMESLICING_CONFIG_INVALID",
     r"volume \"available-configs\" : configmap \"[^\"]+\" not found"),
    # mig-manager / mig-parted.
    ("MIG_CONFIG_FAILED", r"Unable to (?:enable|disable) MIG [Mm]ode"),
    ("MIG_CONFIG_FAILED", r"(?i:error (?:applying|setting) (?:the )?MIG)"),
    ("MIG_CONFIG_FAILED", r"(?i:failed to apply MIG)"),
    ("MIG_CONFIG_FAILED", r"mig\.config\.state' node label to 'failed'"),
    # Devices the plugin took out of service.
    ("GPU_UNHEALTHY", r"XidCriticalError"),
    ("GPU_UNHEALTHY", r"(?i:marking device \S* ?as unhealthy)"),
    ("GPU_UNHEALTHY", r"(?i:device (?:marked|is) unhealthy)"),
    ("GPU_UNHEALTHY", r"NVRM: Xid \("),
    ("GPU_UNHEALTHY", r"GPU has fallen off the bus"),
    # kubelet's device manager refused a pod.
    ("DEVICE_ADMISSION_FAILED", r"Allocate failed due to"),
    ("DEVICE_ADMISSION_FAILED", r"UnexpectedAdmissionError"),
]

# Lines that look like a known error but are not one: the plugin's platform auto-detection
# reports "could not load NVML library" on its way to the actual error lines.
_IGNORED = re.compile(r"Detected non-(?:NVML|Tegra) platform")

_COMPILED: list[tuple[str, re.Pattern[str]]] = [(c, re.compile(p)) for c, p in _PATTERNS]
# One pass over the whole text first: most log lines match nothing, and most logs have no
# known error at all.
_ANY = re.compile("|".join(f"(?:{p})" for _, p in _PATTERNS))

CODES_IN_LOGS = frozenset(c for c, _ in _PATTERNS)

# Prefixes that make the same message look different on every line: CRI log format,
# klog header, Go log timestamp, logrus time=.
_PREFIXES = re.compile(
    r"^(?:\S+ (?:stdout|stderr) [FP] )?"
    r"(?:[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] )?"
    r"(?:\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)? )?"
    r"(?:time=\"[^\"]*\" )?"
)
_MAX_LINE = 1000


def classify_line(line: str) -> str | None:
    """The finding code one log line proves, or None."""
    if not _ANY.search(line) or _IGNORED.search(line):
        return None
    for code, rx in _COMPILED:
        if rx.search(line):
            return code
    return None  # pragma: no cover - _ANY matched, so one pattern does


def _message(line: str) -> str:
    return _PREFIXES.sub("", line, count=1)


def classify_log(text: str | None) -> list[tuple[str, str]]:
    """``(code, line)`` for each line of ``text`` that proves a code, in log order.

    A message repeated with different timestamps (a crash loop prints the same lines on
    every start) is returned once, as its first occurrence.
    """
    if not text or not _ANY.search(text):
        return []
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or not _ANY.search(line):
            continue
        code = classify_line(line)
        if code is None:
            continue
        key = (code, _message(line))
        if key in seen:
            continue
        seen.add(key)
        out.append((code, line[:_MAX_LINE]))
    return out


def last_lines(text: str | None, n: int = 5) -> list[str]:
    """The last ``n`` non-empty lines of a log, for evidence when no known line matched."""
    if not text:
        return []
    lines = [ln.rstrip() for ln in text.splitlines()[-(n * 4):] if ln.strip()]
    return [ln[:_MAX_LINE] for ln in lines[-n:]]
