"""What is wrong with one pod, read from its status the way `kubectl describe` shows it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from handlers.gpu import name_of, ns_of
from handlers.model import ObjectRef
from handlers.timefmt import age_text, parse_time

Obj = dict[str, Any]

IMAGE_PULL_REASONS = frozenset({
    "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull",
    "RegistryUnavailable",
})
CREATE_ERROR_REASONS = frozenset({
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "StartError",
    "PreCreateHookError", "PostStartHookError", "CreatePodSandboxError",
})
CRASH_RESTARTS = 3
# A pod still starting is not failing yet: the driver container compiles for minutes.
STUCK_AFTER = timedelta(minutes=10)
RECENT_CRASH = timedelta(hours=1)

# Issue kinds, most telling first.
IMAGE_PULL = "image_pull"
CRASHLOOP = "crashloop"
CREATE_ERROR = "create_error"
BLOCKED = "blocked"  # an init container still running (waiting for a validation file)
CREATING = "creating"  # ContainerCreating: sandbox, mounts, runtime handler
UNREADY = "unready"  # running, readiness/startup probe failing
UNSCHEDULED = "unscheduled"
_KIND_ORDER = [IMAGE_PULL, CRASHLOOP, CREATE_ERROR, UNSCHEDULED, BLOCKED, CREATING, UNREADY]


def aware(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


@dataclass
class Issue:
    kind: str
    container: str
    init: bool
    reason: str = ""
    message: str = ""
    restarts: int = 0
    image: str = ""
    last_exit: str = ""  # "Error (exit code 1) at 2024-05-01T10:00:00Z"
    last_message: str = ""  # lastState.terminated.message: counts as log text

    def describe(self) -> str:
        """`container nvidia-device-plugin: CrashLoopBackOff: back-off 5m0s ...`"""
        what = "init container" if self.init else "container"
        text = f"{what} {self.container}: {self.reason or self.kind}"
        if self.message:
            text += f": {self.message}"
        return text


@dataclass
class PodState:
    pod: Obj
    ready: bool
    phase: str
    age: timedelta | None
    issues: list[Issue] = field(default_factory=list)
    scheduling_message: str = ""

    @property
    def name(self) -> str:
        return name_of(self.pod)

    @property
    def namespace(self) -> str:
        return ns_of(self.pod)

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef("Pod", self.name, self.namespace or None)

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def kind(self) -> str | None:
        """The most telling issue kind, or None."""
        kinds = {i.kind for i in self.issues}
        return next((k for k in _KIND_ORDER if k in kinds), None)

    @property
    def primary(self) -> Issue | None:
        k = self.kind
        return next((i for i in self.issues if i.kind == k), None)

    @property
    def failing(self) -> bool:
        """Not ready for a reason (pull, crash, create error) or for too long."""
        if self.phase == "Succeeded":
            return False
        if self.kind in (IMAGE_PULL, CRASHLOOP, CREATE_ERROR):
            return True
        if self.ready:
            return False
        return self.age is None or self.age >= STUCK_AFTER

    @property
    def blocked_on(self) -> str | None:
        """The init container the pod waits in (``driver-validation``...), when only waiting."""
        if self.kind not in (BLOCKED, CREATING, None) or self.ready:
            return None
        blocked = [i for i in self.issues if i.kind == BLOCKED]
        return blocked[0].container if blocked else None

    def state_evidence(self) -> list[str]:
        """`pod gpu-operator/x: container y: CrashLoopBackOff: ...`, restarts, last exit."""
        out = []
        for i in self.issues:
            if i.kind == UNSCHEDULED:
                continue
            out.append(f"pod {self.label}: {i.describe()}")
            if i.restarts >= CRASH_RESTARTS:
                out.append(f"pod {self.label}: container {i.container} restartCount: {i.restarts}")
            if i.last_exit:
                out.append(f"pod {self.label}: container {i.container} last terminated: "
                           f"{i.last_exit}")
        if self.scheduling_message:
            out.append(f"pod {self.label}: PodScheduled=False: {self.scheduling_message}")
        if not out and not self.ready:
            age = f" for {fmt_age(self.age)}" if self.age else ""
            out.append(f"pod {self.label}: phase {self.phase or 'Unknown'}, not Ready{age}")
        return out

    def log_containers(self) -> list[str]:
        """Containers whose log explains the failure (crashing, blocked, unready ones)."""
        return [i.container for i in self.issues
                if i.kind in (CRASHLOOP, CREATE_ERROR, BLOCKED, UNREADY)]

    def messages(self) -> list[str]:
        """Waiting and termination messages: log text the pod object itself carries."""
        out = []
        for i in self.issues:
            if i.message:
                out.append(i.message)
            if i.last_message:
                out.append(i.last_message)
        return out


def fmt_age(age: timedelta) -> str:
    return age_text(age.total_seconds())


def _last_exit(cs: Obj) -> tuple[str, str]:
    term = (cs.get("lastState") or {}).get("terminated") or {}
    if not term:
        return "", ""
    text = f"{term.get('reason') or 'Terminated'} (exit code {term.get('exitCode', '?')})"
    if term.get("finishedAt"):
        text += f" at {term['finishedAt']}"
    return text, str(term.get("message") or "").strip()


def _container_issue(cs: Obj, init: bool, ready_pod: bool, now: datetime) -> Issue | None:
    name = str(cs.get("name", ""))
    state = cs.get("state") or {}
    restarts = int(cs.get("restartCount") or 0)
    last_exit, last_msg = _last_exit(cs)
    base: dict[str, Any] = {"container": name, "init": init, "restarts": restarts,
                            "image": str(cs.get("image", "")), "last_exit": last_exit,
                            "last_message": last_msg}
    waiting = state.get("waiting")
    if waiting is not None:
        reason = str(waiting.get("reason") or "")
        msg = str(waiting.get("message") or "").strip()
        if reason in IMAGE_PULL_REASONS:
            return Issue(IMAGE_PULL, reason=reason, message=msg, **base)
        if reason == "CrashLoopBackOff":
            return Issue(CRASHLOOP, reason=reason, message=msg, **base)
        if reason in CREATE_ERROR_REASONS:
            return Issue(CREATE_ERROR, reason=reason, message=msg, **base)
        if reason == "ContainerCreating":
            return Issue(CREATING, reason=reason, message=msg, **base)
        # PodInitializing: an earlier init container is the one to look at.
        return None
    term = state.get("terminated")
    if term is not None:
        code = term.get("exitCode", 0)
        if code not in (0, None):
            reason = str(term.get("reason") or "Error")
            return Issue(CRASHLOOP, reason=reason, message=str(term.get("message") or "").strip(),
                         **{**base, "last_exit": last_exit or
                            f"{reason} (exit code {code})"})
        return None
    if state.get("running") is not None:
        if init:
            return Issue(BLOCKED, reason="Running", message="", **base)
        if restarts >= CRASH_RESTARTS:
            finished = parse_time(((cs.get("lastState") or {}).get("terminated") or {})
                                  .get("finishedAt"))
            recent = finished is not None and now - finished <= RECENT_CRASH
            if recent or not ready_pod:
                return Issue(CRASHLOOP, reason="Restarting", message="", **base)
        if not cs.get("ready", True) and not ready_pod:
            return Issue(UNREADY, reason="NotReady", message="readiness probe not passing",
                         **base)
    return None


def pod_state(pod: Obj, now: datetime) -> PodState:
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "")
    conds = {c.get("type"): c for c in status.get("conditions") or []}
    ready = (conds.get("Ready") or {}).get("status") == "True"
    started = parse_time(status.get("startTime")) or parse_time(
        (pod.get("metadata") or {}).get("creationTimestamp"))
    age = aware(now) - started if started else None
    st = PodState(pod, ready, phase, age)
    for init, key in ((True, "initContainerStatuses"), (False, "containerStatuses")):
        for cs in status.get(key) or []:
            issue = _container_issue(cs, init, ready, now)
            if issue is not None:
                st.issues.append(issue)
        if init and any(i.init and i.kind != BLOCKED for i in st.issues):
            break  # main containers have not started: they only say PodInitializing
    sched = conds.get("PodScheduled") or {}
    if sched.get("status") == "False":
        st.scheduling_message = str(sched.get("message") or sched.get("reason") or "")
        st.issues.append(Issue(UNSCHEDULED, container="", init=False,
                               reason=str(sched.get("reason") or "Unschedulable"),
                               message=st.scheduling_message))
    return st


def owner(obj: Obj, kind: str | None = None) -> Obj | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if kind is None or ref.get("kind") == kind:
            return dict(ref)
    return None
