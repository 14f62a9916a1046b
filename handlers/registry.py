"""Every command gpubot runs, described once.

A ``CommandSpec`` names a command and says what parameters it takes, which handler it runs,
what it reads, which Slack channels may run it, whether it reads Prometheus and which alerts
it answers. Everything else is built from ``COMMANDS``: the CLI's subcommands
(``bot/cli.py``), the ``/gpu`` parser and router (``bot/slack/commands.py``), the commands
given metrics (``bot/metrics``), the alert mapping (``bot/alerts/mapping.py``) and the
scenario harness (``tests/scenarios.py``). A command's name is also its ``command`` label in
the ``gpubot_*`` metrics and names its templates (``templates/{cli,slack}/<name>``, ``-`` as
``_``).

Importing this module is cheap (``gpubot --version`` does): a handler is imported when its
command runs, a target parsed when a command is bound.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from handlers.errors import GpubotError

if TYPE_CHECKING:
    import argparse

    from handlers.model import Diagnosis
    from handlers.target import Target
    from handlers.view import Reader


@dataclass(frozen=True)
class Param:
    """One parameter of a command, as both argparse parsers take it: the CLI's (with
    metavar and help) and ``/gpu``'s."""

    dest: str  # the field of Params, and of the Slack Command, it fills
    flags: tuple[str, ...] = ()  # ("-n", "--namespace"); none: a positional
    metavar: str | None = None
    help: str = ""
    type: Callable[[str], Any] = str
    default: Any = None
    choices: tuple[str, ...] = ()
    required: bool = False  # a positional that must be given
    switch: bool = False  # a flag that takes no value
    cli: bool = True  # `gpubot NAME` takes it
    slack: bool = True  # `/gpu NAME` takes it
    same_as: str | None = None  # another spelling of that parameter: both given must agree
    excludes: str | None = None  # may not be given with that parameter
    missing: str = ""  # what /gpu says when this required one is left out

    def add_to(self, parser: argparse.ArgumentParser, *, described: bool) -> None:
        """Add to an argparse parser; ``described``: with metavar and help (the CLI)."""
        kw: dict[str, Any] = {"help": self.help} if described else {}
        if self.switch:
            parser.add_argument(*self.flags, dest=self.dest, action="store_true", **kw)
            return
        if described:
            kw["metavar"] = self.metavar
        if self.type is not str:
            kw["type"] = self.type
        if self.default is not None:
            kw["default"] = self.default
        if self.choices:
            kw["choices"] = self.choices
        if self.flags:
            parser.add_argument(*self.flags, dest=self.dest, **kw)
        else:
            parser.add_argument(self.dest, nargs=None if self.required else "?", **kw)


TARGET = Param("target", metavar="TARGET", required=True, missing="name the pod or workload",
               help="POD, NS/POD, or KIND/NAME (deployment, statefulset, job, replicaset)")
# The CLI takes -n before or after any command (a global flag, bot/cli.py); /gpu only here.
NAMESPACE = Param("namespace", ("-n", "--namespace"), metavar="NS", cli=False)
ALL_NAMESPACES = Param("all_namespaces", ("-A", "--all-namespaces"), switch=True,
                       excludes="namespace", help="every namespace (the default)")
LIMIT = Param("limit", ("--limit",), metavar="N", type=int, default=50, slack=False,
              help="diagnose at most N workloads (default 50)")


@dataclass(frozen=True)
class Params:
    """A command's parameters, parsed once (``CommandSpec.bind``): the same whether the
    CLI, ``/gpu``, an alert or a scenario gave them. Each command reads its own."""

    target: Target | None = None
    node: str | None = None
    namespace: str | None = None  # None or "": every namespace
    all_namespaces: bool = False
    selector: str | None = None
    limit: int = LIMIT.default
    png: str | None = None  # where the CLI also writes the chart


class ParamConflict(GpubotError):
    """Two parameters that exclude each other were given, or two spellings of one that
    disagree (``values``). ``str()`` is the CLI's wording; /gpu words it its own way."""

    def __init__(self, param: Param, other: Param,
                 values: tuple[str, str] | None = None) -> None:
        self.param, self.other, self.values = param, other, values
        if values is None:
            text = f"give a {other.dest} ({other.flags[0]}) or {param.flags[0]}, not both"
        else:
            text = f"two {other.dest}s given ({values[0]}, {other.flags[0]} {values[1]}): give one"
        super().__init__(text)


class Scope(StrEnum):
    """Which Slack channels may run a command (``bot/slack/access.py``)."""

    NAMESPACE = "namespace"  # reads one namespace (access control applies)
    NAMESPACES = "namespaces"  # one namespace, or all of them when none is given
    CLUSTER = "cluster"  # node-level state (doctor, nodes)
    NONE = "none"  # help


Runner = Callable[["Reader", Params], "Diagnosis"]
# An alert's labels -> the command's parameters as a user would type them; None: the
# alert is not this command's (the next command that answers it may take it).
AlertParams = Callable[[Mapping[str, str]], "dict[str, Any] | None"]


@dataclass(frozen=True)
class Alert:
    name: str  # alertname, as in deploy/prometheus/gpubot-rules.yaml
    params: AlertParams


@dataclass(frozen=True)
class CommandSpec:
    name: str
    summary: str  # its line in /gpu help
    usage: str  # /gpu's usage line
    example: str  # shown with a /gpu usage error
    scope: Scope
    params: tuple[Param, ...] = ()
    run: Runner | None = None  # None: runs no diagnosis (help), and is no CLI subcommand
    module: str | None = None  # the handlers module run calls
    reads: frozenset[str] = frozenset()  # the kinds it reads, "pods/log" for logs (RBAC)
    metrics: bool = False  # reads Prometheus when one is configured
    alerts: tuple[Alert, ...] = ()
    aliases: tuple[str, ...] = ()  # other words /gpu takes for it
    cli_summary: str = ""  # its line in `gpubot --help`, when not the summary

    def param(self, dest: str) -> Param:
        return next(p for p in self.params if p.dest == dest)

    def settle(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Each parameter's value, from ``given`` (parameter name -> what was typed) or its
        default, a second spelling folded into the first (quota's NS into -n). Raises
        ParamConflict."""
        values = {p.dest: given.get(p.dest, p.default) for p in self.params}
        for p in self.params:
            if p.same_as is not None:
                mine, theirs = values.pop(p.dest), values.get(p.same_as)
                if mine and theirs and mine != theirs:
                    raise ParamConflict(p, self.param(p.same_as), (mine, theirs))
                values[p.same_as] = theirs or mine
        for p in self.params:
            if p.excludes is not None and values.get(p.dest) and values.get(p.excludes):
                raise ParamConflict(p, self.param(p.excludes))
        return values

    def bind(self, given: Mapping[str, Any], *,
             context_namespace: str | None = None) -> Params:
        """Typed parameters from what was typed. The target is parsed here, once: in -n's
        namespace, else in ``context_namespace`` (the CLI's kubeconfig context) unless it
        names its own, else in ``default``. Raises ParamConflict or UsageError."""
        values = self.settle(given)
        if "target" in values:
            values["target"] = _target(values["target"] or "", values.get("namespace"),
                                       context_namespace)
        return Params(**values)


def _target(text: str, namespace: str | None, context_namespace: str | None) -> Target:
    # Imported here: the kinds it knows come from handlers.batchjobs, too slow for --version.
    from handlers.target import UsageError, parse_target

    if namespace or not context_namespace:
        return parse_target(text, namespace)
    try:
        return parse_target(text, context_namespace)
    except UsageError:  # TARGET names another namespace: it wins, as in kubectl
        return parse_target(text)


# -- the commands ----------------------------------------------------------------------------
# Each runner imports its handler when the command runs, not when gpubot starts.


def _why_pending(reader: Reader, p: Params) -> Diagnosis:
    from handlers import why_pending

    assert p.target is not None  # TARGET is required: bind parsed it
    return why_pending.run(reader, p.target)


def _doctor(reader: Reader, p: Params) -> Diagnosis:
    from handlers import doctor

    return doctor.run(reader, p.node)


def _nodes(reader: Reader, p: Params) -> Diagnosis:
    from handlers import nodes

    return nodes.run(reader)


def _pending(reader: Reader, p: Params) -> Diagnosis:
    from handlers import pending_all

    return pending_all.run(reader, p.namespace, limit=p.limit, selector=p.selector)


def _quota(reader: Reader, p: Params) -> Diagnosis:
    from handlers import quota

    return quota.run(reader, p.namespace)


def _pending_pod(labels: Mapping[str, str]) -> dict[str, Any] | None:
    ns, pod = labels.get("namespace"), labels.get("pod")
    return {"target": f"{ns}/{pod}"} if ns and pod else None


def _pending_namespace(labels: Mapping[str, str]) -> dict[str, Any]:
    ns = labels.get("namespace")
    return {"namespace": ns or None, "all_namespaces": not ns}


def _quota_namespace(labels: Mapping[str, str]) -> dict[str, Any]:
    return {"namespace": labels.get("namespace") or None}


def _node(labels: Mapping[str, str]) -> dict[str, Any]:
    from handlers.runtime.labels import node_of  # `node`, or dcgm-exporter's `Hostname`

    return {"node": node_of(labels) or None}


WHY_PENDING_READS = frozenset({
    "Pod", "Node", "Event", "Namespace", "pods/log", "Deployment", "ReplicaSet", "StatefulSet",
    "Job", "DaemonSet", "ControllerRevision", "JobSet", "RayJob", "PyTorchJob",
    "ResourceQuota", "LimitRange", "PriorityClass", "RuntimeClass", "ConfigMap",
    "ClusterPolicy", "PersistentVolume", "PersistentVolumeClaim", "PodGroup", "Queue",
    "Workload", "ClusterQueue", "LocalQueue", "ResourceFlavor", "DeviceClass", "ResourceSlice",
    "ResourceClaim", "ResourceClaimTemplate", "NodeResourceTopology",
})

COMMANDS: dict[str, CommandSpec] = {c.name: c for c in (
    CommandSpec(
        "why-pending", "root cause of a pending GPU pod or workload, with proof and fix",
        "why-pending TARGET [-n NS]",
        "why-pending ml-team/train-0  ·  why-pending deployment/llm-serve -n inference",
        Scope.NAMESPACE, (TARGET, NAMESPACE), _why_pending, "why_pending",
        reads=WHY_PENDING_READS, metrics=True,
        alerts=(Alert("GPUPodPendingTooLong", _pending_pod),),
        aliases=("why", "whypending", "why_pending"),
        cli_summary="root cause of a pending GPU pod or workload"),
    CommandSpec(
        "doctor", "GPU discovery chain per node: driver, plugin, runtime", "doctor [NODE]",
        "doctor  ·  doctor gpu-node-7", Scope.CLUSTER,
        (Param("node", metavar="NODE", help="one node (default: every GPU node)"),),
        _doctor, "doctor",
        reads=frozenset({"Node", "Pod", "Event", "Namespace", "pods/log", "DaemonSet",
                         "ControllerRevision", "ConfigMap", "ClusterPolicy", "RuntimeClass",
                         "ResourceClaim", "ResourceSlice", "NodeResourceTopology"}),
        metrics=True,
        alerts=tuple(Alert(name, _node) for name in (
            "GPUDevicePluginDown", "GPUNotAdvertised", "GPUXidErrors"))),
    CommandSpec(
        "nodes", "GPU ledger per node and per GPU model", "nodes", "nodes", Scope.CLUSTER,
        (Param("png", ("--png",), metavar="FILE", slack=False,
               help="also write the supply-and-demand chart per GPU model as a PNG "
                    "(needs the chart extra: pip install 'gpubot[chart]')"),),
        _nodes, "nodes",
        # Doctor's: the discovery chain runs on the nodes that lost GPUs.
        reads=frozenset({"Node", "Pod", "Event", "Namespace", "pods/log", "DaemonSet",
                         "ControllerRevision", "ConfigMap", "ClusterPolicy", "RuntimeClass",
                         "ResourceClaim", "ResourceSlice"}), metrics=True,
        alerts=(Alert("GPUResourceExhaustion", lambda labels: {}),), aliases=("node",)),
    CommandSpec(
        "pending", "every pending GPU workload with its one-line root cause", "pending [-n NS]",
        "pending  ·  pending -n ml-team", Scope.NAMESPACES,
        (NAMESPACE, ALL_NAMESPACES,
         Param("selector", ("-l", "--selector"), metavar="SELECTOR", slack=False,
               help="only pods matching this label selector (app=train,tier!=web)"),
         LIMIT),
        _pending, "pending_all",
        # why-pending's per workload; each row's cause comes from the cluster alone.
        reads=WHY_PENDING_READS,
        alerts=(Alert("GPUPodPendingTooLong", _pending_namespace),),
        cli_summary="every pending GPU workload with its root cause"),
    CommandSpec(
        "quota", "GPU quota used/hard per namespace and resource, and its pods", "quota [NS]",
        "quota  ·  quota ml-team", Scope.NAMESPACES,
        (Param("ns_arg", metavar="NS", same_as="namespace", help="one namespace (as -n NS)"),
         NAMESPACE, ALL_NAMESPACES),
        _quota, "quota",
        reads=frozenset({"ResourceQuota", "Pod", "Event", "Deployment", "ReplicaSet",
                         "StatefulSet", "Job", "JobSet", "RayJob", "PyTorchJob", "Queue",
                         "ClusterQueue", "LocalQueue"}),
        alerts=(Alert("GPUQuotaExceeded", _quota_namespace),), aliases=("quotas",),
        cli_summary="GPU quota used/hard per namespace, with the holders"),
    # The sentinel's state: answered by the bot (bot/slack/sentinel.py), not a diagnosis;
    # each incident is shown only where the channel may see what it is about.
    CommandSpec("sentinel", "the incidents gpubot noticed on its own, and its detectors' "
                "settings", "sentinel", "sentinel", Scope.NONE, aliases=("incidents",)),
    CommandSpec("help", "this list", "help", "help", Scope.NONE,
                aliases=("-h", "--help", "?")),
)}


def for_alert(labels: Mapping[str, str]) -> tuple[CommandSpec, dict[str, Any]] | None:
    """The command that answers an alert, with its parameters; None for an alert gpubot
    does not know. The first command (in ``COMMANDS``' order) that takes it answers."""
    alertname = labels.get("alertname", "")
    for spec in COMMANDS.values():
        for alert in spec.alerts:
            if alert.name == alertname and (params := alert.params(labels)) is not None:
                return spec, params
    return None
