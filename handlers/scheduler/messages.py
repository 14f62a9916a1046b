"""Parse kube-scheduler ``FailedScheduling`` event messages, in every format it has printed.

kube-scheduler has printed the "why is this pod unschedulable" text in several shapes::

    1.4       pod (ns-x) failed to fit in any node
              fit failure on node (n1): Insufficient cpu
              fit failure on node (n2): Insufficient cpu
    1.4-1.6   [SchedulerPredicates failed due to PersistentVolumeClaim is not bound: "x", ...]
    1.5-1.6   pod (x) failed to fit in any node
              fit failure summary on nodes : MatchNodeSelector (2), PodToleratesNodeTaints (1)
    1.6-1.7   No nodes are available that match all of the following predicates::
              Insufficient cpu (3).                              (one line)
    1.8-1.9   0/4 nodes are available: 1 Insufficient cpu, 1 NodeUnschedulable, 3 MatchNodeSelector.
    1.10-1.17 0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had taints that
              the pod didn't tolerate.
    1.18-1.24 ... 3 node(s) had taint {node-role.kubernetes.io/master: }, that the pod didn't
              tolerate, 2 Insufficient nvidia.com/gpu.          (note the comma inside a reason)
    1.23+     ... . preemption: 0/5 nodes are available: 5 No preemption victims found for
              incoming pod.
    1.25+     ... 1 node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: ...
    1.26+     DRA PostFilter text between the reasons and "preemption:"
              (". , preemption:", ". no new claims to deallocate, preemption:")
    1.27+     a PreFilter rejection has no per-node counts:
              "0/2 nodes are available: resource claim ns/c is in the process of being allocated."
    newer     "node(s) had untolerated taint(s)" without the key

The counted reasons are ``"%d %s"`` strings sorted as strings and joined with ``", "``
(``pkg/scheduler/framework/types.go: FitError.Error``). Reasons themselves may contain ``", "``
(the 1.18-1.24 taint text), so the list is split only on ``", "`` followed by a count and outside
``{...}``.

Besides those, a FailedScheduling event can carry plain errors ("skip schedule deleting pod: ns/x",
"binding rejected: ...", 'running PreFilter plugin "VolumeBinding": ...'); they come back as one
``Reason`` without a count. ``parse_scheduling_message`` never raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "CATEGORIES",
    "Reason",
    "SchedulingMessage",
    "classify_reason",
    "parse_scheduling_message",
]

CATEGORIES: tuple[str, ...] = (
    "insufficient",
    "too_many_pods",
    "taint",
    "node_selector",
    "node_affinity",
    "node_affinity_selector",
    "unschedulable",
    "not_ready",
    "pressure",
    "pod_affinity",
    "pod_anti_affinity",
    "volume_node_affinity",
    "volume",
    "ports",
    "node_name",
    "topology_spread",
    "dra",
    "no_preemption_victims",
    "preemption_not_helpful",
    "other",
)

Taint = tuple[str, str | None, str | None]


@dataclass(frozen=True)
class Reason:
    """One reason kube-scheduler printed, with the number of nodes it printed for it."""

    count: int | None  # None when the message gives no count
    text: str  # the reason as printed, e.g. "Insufficient nvidia.com/gpu"
    category: str  # one of CATEGORIES
    resource: str | None = None  # "insufficient"/"too_many_pods": "nvidia.com/gpu", "cpu", "pods"
    taint: Taint | None = None  # (key, value, effect) when the message names the taint


@dataclass(frozen=True)
class SchedulingMessage:
    """A parsed FailedScheduling message.

    - ``total_nodes``: N of "0/N nodes are available"; when the main part lacks it (a PreFilter
      rejection quoted alone) the N of the preemption part; 0 for "no nodes available to
      schedule pods"; None for the pre-1.8 formats, which never printed N.
    - ``reasons``: the per-node filter failures, in message order (kube-scheduler sorts them as
      strings), or the PreFilter/other error as one count-less Reason.
    - ``preemption``: what the PostFilter plugins said: the reasons listed after
      "preemption: 0/N nodes are available:" and the DRA plugin's "no new claims to deallocate"
      (which 1.26+ prints for every pod when DRA is on, so it is kept out of ``reasons``).
    - ``preemption_summary``: the preemption reason with the largest count (first on a tie), or
      the free text after "preemption:" ("not eligible due to preemptionPolicy=Never."); always
      ending in one period.
    - ``counts_add_up``: False when the counted reasons do not sum to N. Older schedulers counted
      a node once per failing predicate; NodeResourcesFit still reports "Insufficient cpu" and
      "Insufficient memory" for one node; True when there is nothing to compare.
    - Taint effects are never printed by kube-scheduler, so ``Reason.taint[2]`` is always None.
    """

    raw: str
    total_nodes: int | None  # N in "0/N nodes are available"
    reasons: tuple[Reason, ...]
    preemption: tuple[Reason, ...]
    preemption_summary: str | None
    counts_add_up: bool  # False when the counts do not sum to N

    def by_category(self, category: str) -> list[Reason]:
        """The main (non-preemption) reasons of one category, in message order."""
        return [reason for reason in self.reasons if reason.category == category]


# --------------------------------------------------------------------------------------------
# classification

# Node-condition taints (node.kubernetes.io/...) say something more specific than "a taint".
_TAINT_KEY_CATEGORY: dict[str, str] = {
    "node.kubernetes.io/unschedulable": "unschedulable",
    "node.kubernetes.io/not-ready": "not_ready",
    "node.kubernetes.io/unreachable": "not_ready",
    "node.kubernetes.io/network-unavailable": "not_ready",
    "node.cloudprovider.kubernetes.io/uninitialized": "not_ready",
    "node.kubernetes.io/memory-pressure": "pressure",
    "node.kubernetes.io/disk-pressure": "pressure",
    "node.kubernetes.io/pid-pressure": "pressure",
    "node.kubernetes.io/out-of-disk": "pressure",
}

# "{key: value}" as printed by fmt.Sprintf("{%s: %s}", taint.Key, taint.Value).
_TAINT_RE = re.compile(r"\btaint \{(?P<key>[^{}:]*):\s?(?P<value>[^{}]*)\}")
_INSUFFICIENT_RE = re.compile(r"^insufficient\s+(?P<resource>\S+)", re.IGNORECASE)
_NOT_ENOUGH_RESOURCE_RE = re.compile(r"didn't have enough resource:\s*(?P<resource>[^,\s]+)")

# (category, regex) tried in order on the reason text; the first match wins. Predicate names
# (1.5-1.9: "MatchNodeSelector", "PodToleratesNodeTaints", ...) are listed with their text.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern, re.IGNORECASE))
    for category, pattern in (
        ("no_preemption_victims", r"no preemption victims found|no victims found on node"),
        ("preemption_not_helpful", r"preemption is not helpful"),
        ("too_many_pods", r"^too many pods\b|^insufficient pods\b"),
        ("insufficient", r"^insufficient\s|didn't have enough resource|^PodFitsResources$"),
        ("node_affinity_selector", r"didn't match pod's node affinity/selector"),
        ("node_affinity", r"didn't match pod's node affinity|scheduler-enforced node affinity"),
        (
            "node_selector",
            r"didn't match node selector|^MatchNodeSelector$|didn't have the requested labels"
            r"|^CheckNodeLabelPresence$",
        ),
        (
            "pod_anti_affinity",
            r"pod anti-affinity rules|existing pods anti-affinity|anti-affinity rules"
            r"|AntiAffinityRulesNotMatch",
        ),
        (
            "pod_affinity",
            r"pod affinity|^MatchInterPodAffinity$|^PodAffinityRulesNotMatch$|inter-pod affinity",
        ),
        ("volume_node_affinity", r"volume node affinity conflict|^VolumeNodeAffinityConflict$"),
        ("topology_spread", r"topology spread constraint|^PodTopologySpread$|^EvenPodsSpread$"),
        ("ports", r"free ports|^PodFitsHostPorts$|^PodFitsPorts$"),
        ("node_name", r"requested node name|requested hostname|^HostName$|^MatchNodeName$"),
        ("unschedulable", r"were unschedulable|^NodeUnschedulable$|node is unschedulable"),
        (
            "not_ready",
            r"were not ready|^NodeNotReady$|unavailable network|^NodeNetworkUnavailable$"
            r"|unknown condition|^NodeUnknownCondition$|^CheckNodeCondition$",
        ),
        (
            "pressure",
            r"(?:memory|disk|pid) pressure|out of disk space|^NodeOutOfDisk$"
            r"|^(?:CheckNode|NodeUnder)(?:Memory|Disk|PID)Pressure$",
        ),
        (
            "dra",
            r"resource ?claim|\bclaims?\b|deallocate|dynamic resource|^DynamicResources\b"
            r"|device class|resourceslice",
        ),
        (
            "volume",
            r"volume|persistentvolumeclaim|\bpvcs?\b|\bpvc\(s\)|storage|^NoDiskConflict$"
            r"|had no available disk|^MaxVolumeCount$|^NoVolumeZoneConflict$",
        ),
        ("taint", r"taint|^PodToleratesNodeTaints$"),
    )
)


def classify_reason(text: str) -> tuple[str, str | None, Taint | None]:
    """(category, resource, taint) of one reason text as kube-scheduler prints it."""
    match = _TAINT_RE.search(text)
    if match is not None and "taint" in text.lower():
        key = match.group("key").strip()
        value = match.group("value").strip() or None
        taint: Taint = (key, value, None)
        return _TAINT_KEY_CATEGORY.get(key, "taint"), None, taint
    for category, pattern in _RULES:
        if not pattern.search(text):
            continue
        resource: str | None = None
        if category in ("insufficient", "too_many_pods"):
            found = _INSUFFICIENT_RE.search(text) or _NOT_ENOUGH_RESOURCE_RE.search(text)
            resource = found.group("resource") if found is not None else None
            if category == "too_many_pods":
                resource = "pods"
        return category, resource, None
    return "other", None, None


def _reason(count: int | None, text: str) -> Reason:
    category, resource, taint = classify_reason(text)
    return Reason(count=count, text=text, category=category, resource=resource, taint=taint)


# --------------------------------------------------------------------------------------------
# splitting

_HEADER_RE = re.compile(r"(?<!\d)(\d+)/(\d+) nodes are available\b:?")
_PREEMPTION_RE = re.compile(r"(?<![\w-])preemption:")
_REPEATED_RE = re.compile(r"\s*\((?:repeated \d+ times|combined from similar events)\)")
_COUNT_AHEAD_RE = re.compile(r"\d+\s")
_COUNTED_RE = re.compile(r"^(\d+)\s+(\S.*)$", re.DOTALL)
_ITEM_WITH_COUNT_RE = re.compile(r"^(.*?)\s*\((\d+)\)$", re.DOTALL)
_OLD_PREDICATES_RE = re.compile(
    r"no nodes are available that match all of the following predicates\s*::?", re.IGNORECASE
)
_OLD_SUMMARY_RE = re.compile(r"fit failure summary on nodes\s*:", re.IGNORECASE)
_OLD_PER_NODE_RE = re.compile(r"fit failure on node \(([^)]*)\):", re.IGNORECASE)
_OLD_PREDICATES_FAILED_RE = re.compile(r"SchedulerPredicates failed due to\s*", re.IGNORECASE)
_NO_NODES_RE = re.compile(r"no nodes available to schedule pods", re.IGNORECASE)
# Wrappers that tools put in front of a message without counts.
_LEADING_NOISE_RE = re.compile(
    r"^(?:\[\s*Unschedulable\s*\]|Unschedulable\s*:|FailedScheduling\s*:|Warning\s+FailedScheduling\b)"
    r"\s*",
    re.IGNORECASE,
)
# PostFilter messages that are not per-node filter reasons (DRA, 1.26+).
_POSTFILTER_TEXTS = ("no new claims to deallocate",)

_EDGE_JUNK = " \t\r\n.,;"
_QUOTES = "\"'`"


def _clean(text: str) -> str:
    return text.strip(_EDGE_JUNK)


def _unquote(text: str) -> str:
    """Drop quotes a tool wrapped around the message (an unbalanced quote at either end), so
    'Unschedulable: "0/1 nodes are available: 1 Insufficient cpu."' ends in "cpu"."""
    text = _clean(text)
    changed = True
    while changed and text:
        changed = False
        for quote in _QUOTES:
            if len(text) > 1 and text[0] == quote and text[-1] == quote:
                text = _clean(text[1:-1])
                changed = True
            elif text.count(quote) % 2 == 1:
                if text.endswith(quote):
                    text = _clean(text[:-1])
                    changed = True
                elif text.startswith(quote):
                    text = _clean(text[1:])
                    changed = True
    return text


def _split_outside_braces(text: str, separator: str) -> Iterator[tuple[str, int]]:
    """Yield (piece, index after the separator) for ``text`` split on ``separator`` outside
    ``{...}``; the last piece comes with ``len(text)``."""
    depth = 0
    start = 0
    i = 0
    n = len(text)
    size = len(separator)
    while i < n:
        char = text[i]
        if char == "{":
            depth += 1
        elif char == "}":
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(separator, i):
            yield text[start:i], i + size
            i += size
            start = i
            continue
        i += 1
    yield text[start:], n


def _split_sentences(body: str) -> list[str]:
    """Split on ". " outside braces: reasons list, then PreFilter/PostFilter sentences."""
    sentences: list[str] = []
    depth = 0
    start = 0
    for i, char in enumerate(body):
        if char == "{":
            depth += 1
        elif char == "}":
            depth = max(0, depth - 1)
        elif char == "." and depth == 0 and i + 1 < len(body) and body[i + 1].isspace():
            sentences.append(body[start:i])
            start = i + 1
    sentences.append(body[start:])
    return [cleaned for cleaned in (_clean(s) for s in sentences) if cleaned]


def _split_counted(sentence: str) -> list[str]:
    """Split "1 A, 2 B {x: }, that C, 3 D" into items; only ", " followed by a count splits."""
    items: list[str] = []
    current: list[str] = []
    for piece, next_index in _split_outside_braces(sentence, ", "):
        current.append(piece)
        if next_index >= len(sentence) or _COUNT_AHEAD_RE.match(sentence, next_index):
            items.append(", ".join(current))
            current = []
    if current:
        items.append(", ".join(current))
    return [cleaned for cleaned in (_clean(item) for item in items) if cleaned]


def _parse_body(body: str) -> tuple[list[Reason], list[Reason]]:
    """Reasons of a "0/N nodes are available:" body -> (filter reasons, postfilter reasons)."""
    reasons: list[Reason] = []
    postfilter: list[Reason] = []
    for sentence in _split_sentences(body):
        if _COUNTED_RE.match(sentence):
            for item in _split_counted(sentence):
                counted = _COUNTED_RE.match(item)
                if counted is not None:
                    reasons.append(_reason(int(counted.group(1)), _clean(counted.group(2))))
                else:
                    reasons.append(_reason(None, item))
        elif sentence.lower() in _POSTFILTER_TEXTS:
            postfilter.append(_reason(None, sentence))
        else:
            reasons.append(_reason(None, sentence))
    return reasons, postfilter


def _aggregate(texts: list[str]) -> list[Reason]:
    """Count identical per-node reason texts (1.4-1.6 listed one line per node)."""
    counts: dict[str, int] = {}
    for text in texts:
        if text:
            counts[text] = counts.get(text, 0) + 1
    return [_reason(count, text) for text, count in counts.items()]


def _parse_old_items(text: str) -> list[Reason]:
    """1.5-1.7 "Name (count), Name (count)" lists."""
    reasons: list[Reason] = []
    for piece, _rest in _split_outside_braces(_clean(text), ", "):
        item = _clean(piece)
        if not item:
            continue
        match = _ITEM_WITH_COUNT_RE.match(item)
        if match is not None and match.group(1):
            reasons.append(_reason(int(match.group(2)), _clean(match.group(1))))
        else:
            reasons.append(_reason(None, item))
    return reasons


def _parse_legacy(text: str) -> list[Reason] | None:
    """The pre-1.8 formats; None when ``text`` is none of them."""
    match = _OLD_PREDICATES_RE.search(text) or _OLD_SUMMARY_RE.search(text)
    if match is not None:
        return _parse_old_items(text[match.end() :])
    per_node = list(_OLD_PER_NODE_RE.finditer(text))
    if per_node:
        texts: list[str] = []
        for index, node in enumerate(per_node):
            end = per_node[index + 1].start() if index + 1 < len(per_node) else len(text)
            for piece, _rest in _split_outside_braces(text[node.end() : end], ", "):
                texts.append(_clean(piece))
        return _aggregate(texts)
    if _OLD_PREDICATES_FAILED_RE.search(text):
        parts = _OLD_PREDICATES_FAILED_RE.split(text.strip().strip("[]"))
        return _aggregate([_clean(part) for part in parts])
    return None


def _summary_of(text: str) -> str:
    return text.rstrip(" .") + "."


def _parse_preemption(text: str) -> tuple[int | None, list[Reason], str | None]:
    """The part after "preemption:" -> (N, reasons, summary)."""
    header = _HEADER_RE.search(text)
    if header is None:
        cleaned = _unquote(text)
        return None, [], (_summary_of(cleaned) if cleaned else None)
    reasons, postfilter = _parse_body(_unquote(text[header.end() :]))
    reasons.extend(postfilter)
    counted = [reason for reason in reasons if reason.count is not None]
    if counted:
        top = max(counted, key=lambda reason: reason.count or 0)
        summary: str | None = _summary_of(top.text)
    elif reasons:
        summary = _summary_of(reasons[0].text)
    else:
        summary = None
    return int(header.group(2)), reasons, summary


def _parse(message: str) -> SchedulingMessage:
    text = _REPEATED_RE.sub("", " ".join(message.split()))

    preemption: list[Reason] = []
    summary: str | None = None
    preemption_total: int | None = None
    marker = _PREEMPTION_RE.search(text)
    main = text
    if marker is not None:
        main = text[: marker.start()]
        preemption_total, preemption, summary = _parse_preemption(text[marker.end() :])

    total: int | None = None
    reasons: list[Reason]
    header = _HEADER_RE.search(main)
    if header is not None:
        total = int(header.group(2))
        reasons, postfilter = _parse_body(_unquote(main[header.end() :]))
    else:
        legacy = _parse_legacy(main)
        no_nodes = _NO_NODES_RE.search(main)
        postfilter = []
        if legacy is not None:
            reasons = legacy
        elif no_nodes is not None:
            total = 0
            reasons = [_reason(None, no_nodes.group(0))]
        else:
            reasons, postfilter = _parse_body(_unquote(_LEADING_NOISE_RE.sub("", _clean(main))))
    if total is None:
        total = preemption_total
    preemption = postfilter + preemption

    counted = [reason.count for reason in reasons if reason.count is not None]
    counts_add_up = total is None or not counted or sum(counted) == total
    return SchedulingMessage(
        raw=message,
        total_nodes=total,
        reasons=tuple(reasons),
        preemption=tuple(preemption),
        preemption_summary=summary,
        counts_add_up=counts_add_up,
    )


def parse_scheduling_message(message: str) -> SchedulingMessage:
    """Parse a FailedScheduling message (or PodScheduled condition message). Never raises:
    text that is not understood comes back as one Reason of category "other"."""
    raw = message if isinstance(message, str) else str(message)
    try:
        return _parse(raw)
    except Exception:  # pragma: no cover - defensive: a diagnosis must never crash on a message
        cleaned = _clean(" ".join(raw.split()))
        return SchedulingMessage(
            raw=raw,
            total_nodes=None,
            reasons=(Reason(None, cleaned, "other"),) if cleaned else (),
            preemption=(),
            preemption_summary=None,
            counts_add_up=True,
        )
