"""Node affinity, nodeSelector and inter-pod affinity, matched as kube-scheduler does.

Node selector terms follow ``component-helpers/scheduling/corev1/nodeaffinity``:

- terms are ORed; a term with neither ``matchExpressions`` nor ``matchFields`` matches
  nothing; inside a term everything is ANDed;
- ``In`` needs the label with one of the values, ``NotIn`` matches when the label is
  absent or has another value, ``Exists``/``DoesNotExist`` test the key, ``Gt``/``Lt`` need
  the label to parse as an int64 (``strconv.ParseInt``) and compare it with the single
  integer value; a non-integer label fails the match;
- an invalid requirement (``In`` without values, ``Exists`` with values, ``Gt`` without
  exactly one integer, an unknown operator) makes its whole term match nothing;
- ``matchFields`` supports ``metadata.name`` with ``In``/``NotIn`` and exactly one value; it
  is skipped when the node has no name (upstream only builds the field set from the name:
  this is why PV node affinity, which is checked against the node's labels only, ignores
  ``matchFields``).

Inter-pod affinity follows ``pkg/scheduler/framework/plugins/interpodaffinity``
(``filtering.go``): counts per topology pair (``topologyKey``, node label value) are built
once per simulation (``PodAffinityState``) and then looked up per node.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from handlers.kube.resources import is_terminated, same_pod_as
from handlers.kube.selectors import selector_from_object
from handlers.kube.taints import parse_int64
from handlers.words import counted

Obj = Mapping[str, Any]
Labels = Mapping[str, str]
LabelMatcher = Callable[[Labels], bool]

_NODE_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _labels(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _ns(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


# --------------------------------------------------------------------------- node selectors


@dataclass(frozen=True)
class NodeRequirement:
    """One matchExpressions entry of a NodeSelectorTerm."""

    key: str
    op: str
    values: tuple[str, ...]
    error: str | None = None

    @property
    def number(self) -> int | None:
        return parse_int64(self.values[0]) if len(self.values) == 1 else None

    def matches(self, labels: Labels) -> bool:
        if self.error:
            return False
        op, key = self.op, self.key
        if op == "In":
            return key in labels and labels[key] in self.values
        if op == "NotIn":
            return key not in labels or labels[key] not in self.values
        if op == "Exists":
            return key in labels
        if op == "DoesNotExist":
            return key not in labels
        # Gt / Lt
        if key not in labels:
            return False
        have = parse_int64(labels[key])
        want = self.number
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want

    def text(self) -> str:
        if self.op in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.op}"
        if self.op in ("Gt", "Lt"):
            return f"{self.key} {self.op} {','.join(self.values)}"
        return f"{self.key} {self.op} [{', '.join(self.values)}]"

    def why_not(self, labels: Labels) -> str:
        """Why the node's labels fail this requirement (call only when it fails)."""
        if self.error:
            return f"{self.text()}: invalid requirement ({self.error})"
        have = labels.get(self.key)
        if self.op == "DoesNotExist":
            return f"{self.text()}: node has {self.key}={have}"
        if have is None:
            return f"{self.text()}: node has no {self.key} label"
        if self.op in ("Gt", "Lt") and parse_int64(have) is None:
            return f"{self.text()}: node has {have} (not an integer)"
        return f"{self.text()}: node has {have}"


@dataclass(frozen=True)
class FieldRequirement:
    key: str
    op: str
    values: tuple[str, ...]
    error: str | None = None

    def matches(self, fields: Mapping[str, str]) -> bool:
        if self.error:
            return False
        have = fields.get(self.key, "")
        return (have == self.values[0]) == (self.op == "In")

    def why_not(self, fields: Mapping[str, str]) -> str:
        text = f"matchFields {self.key} {self.op} [{', '.join(self.values)}]"
        if self.error:
            return f"{text}: invalid requirement ({self.error})"
        return f"{text}: node is {fields.get(self.key, '')!r}"


def _compile_node_req(expr: Obj) -> NodeRequirement:
    key = str(expr.get("key") or "")
    op = str(expr.get("operator") or "")
    values = tuple(str(v) for v in expr.get("values") or ())
    error = None
    if op not in _NODE_OPS:
        error = f"{op!r} is not a valid node selector operator"
    elif op in ("In", "NotIn") and not values:
        error = f"{op} needs at least one value"
    elif op in ("Exists", "DoesNotExist") and values:
        error = f"{op} takes no values"
    elif op in ("Gt", "Lt") and (len(values) != 1 or parse_int64(values[0]) is None):
        error = f"{op} needs exactly one integer value"
    return NodeRequirement(key, op, values, error)


def _compile_field_req(expr: Obj) -> FieldRequirement:
    key = str(expr.get("key") or "")
    op = str(expr.get("operator") or "")
    values = tuple(str(v) for v in expr.get("values") or ())
    error = None
    if op not in ("In", "NotIn"):
        error = f"{op!r} is not a valid node field selector operator"
    elif len(values) != 1:
        error = f"{op} on a field needs exactly one value"
    return FieldRequirement(key, op, values, error)


@dataclass(frozen=True)
class NodeSelectorTerm:
    exprs: tuple[NodeRequirement, ...]
    fields: tuple[FieldRequirement, ...]

    def matches(self, labels: Labels, fields: Mapping[str, str]) -> bool:
        for r in self.exprs:
            if not r.matches(labels):
                return False
        if fields:
            for f in self.fields:
                if not f.matches(fields):
                    return False
        elif any(f.error for f in self.fields):
            return False
        return True

    def first_failure(self, labels: Labels, fields: Mapping[str, str]) -> tuple[str, str]:
        """(label key, reason) of the first requirement that fails (the term must fail)."""
        for r in self.exprs:
            if r.error:  # upstream: a parse error makes the whole term unusable
                return r.key, r.why_not(labels)
        for f in self.fields:
            if f.error:
                return f.key, f.why_not(fields)
        for r in self.exprs:
            if not r.matches(labels):
                return r.key, r.why_not(labels)
        for f in self.fields:
            if fields and not f.matches(fields):
                return f.key, f.why_not(fields)
        return "", "term does not match"


class NodeSelector:
    """A compiled v1.NodeSelector (its nodeSelectorTerms, ORed)."""

    def __init__(self, terms: Sequence[Obj] | Obj | None) -> None:
        if isinstance(terms, Mapping):
            terms = terms.get("nodeSelectorTerms") or ()
        compiled = []
        for t in terms or ():
            exprs = t.get("matchExpressions") or ()
            flds = t.get("matchFields") or ()
            if not exprs and not flds:
                continue  # nil or empty term selects no objects
            compiled.append(NodeSelectorTerm(tuple(_compile_node_req(e) for e in exprs),
                                             tuple(_compile_field_req(f) for f in flds)))
        self.terms: tuple[NodeSelectorTerm, ...] = tuple(compiled)

    def matches(self, labels: Labels, name: str = "") -> bool:
        fields = {"metadata.name": name} if name else {}
        return any(t.matches(labels, fields) for t in self.terms)

    def mismatch(self, labels: Labels, name: str = "") -> tuple[str, str] | None:
        """None when a term matches, else (label key, reason) from the first term."""
        fields = {"metadata.name": name} if name else {}
        if any(t.matches(labels, fields) for t in self.terms):
            return None
        if not self.terms:
            return "", "no usable nodeSelectorTerms (all terms are empty)"
        key, why = self.terms[0].first_failure(labels, fields)
        if len(self.terms) > 1:
            more = len(self.terms) - 1
            why += (f" (and {counted(more, 'more term')} "
                    f"{'does' if more == 1 else 'do'} not match either)")
        return key, why


def match_node_selector_terms(terms: Sequence[Obj] | Obj | None, node: Obj) -> bool:
    """Whether ``node`` matches the nodeSelectorTerms (a list, or a NodeSelector dict)."""
    return NodeSelector(terms).matches(_labels(node), _name(node))


class NodeAffinity:
    """A pod's nodeSelector plus required node affinity, compiled once per pod."""

    def __init__(self, pod: Obj) -> None:
        spec = pod.get("spec") or {}
        self.node_selector: dict[str, str] = {
            str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution"))
        self.required: NodeSelector | None = NodeSelector(required) if required else None

    @property
    def empty(self) -> bool:
        return not self.node_selector and self.required is None

    def mismatch(self, node: Obj) -> tuple[str, str] | None:
        """None when the node matches, else (label key, reason)."""
        labels = _labels(node)
        for k, v in self.node_selector.items():
            have = labels.get(k)
            if have != v:
                where = f"node has {have}" if have is not None else f"node has no {k} label"
                return k, f"nodeSelector {k}={v}: {where}"
        if self.required is not None:
            miss = self.required.mismatch(labels, _name(node))
            if miss is not None:
                return miss[0], f"required node affinity {miss[1]}"
        return None


def node_matches_pod(pod: Obj, node: Obj) -> tuple[bool, str | None]:
    """nodeSelector AND required node affinity; the reason names the first failing label."""
    miss = NodeAffinity(pod).mismatch(node)
    return (True, None) if miss is None else (False, miss[1])


# --------------------------------------------------------------------------- label selectors


def _never(_labels: Labels) -> bool:
    return False


def _always(_labels: Labels) -> bool:
    return True


def compile_label_selector(sel: Obj | None,
                           extra: Iterable[tuple[str, str, frozenset[str]]] = ()) -> LabelMatcher:
    """A metav1.LabelSelector as a predicate: nil matches nothing, {} matches everything.

    ``extra`` adds (key, op, values) requirements (op ``In``/``NotIn``), used for
    matchLabelKeys/mismatchLabelKeys.
    """
    if sel is None:
        return _never
    reqs: list[tuple[str, str, frozenset[str]]] = [
        (str(k), "In", frozenset([str(v)])) for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or ():
        op = str(e.get("operator") or "")
        vals = frozenset(str(v) for v in e.get("values") or ())
        if op in ("In", "NotIn") and not vals:
            return _never  # invalid selector: the scheduler cannot use it
        if op in ("Exists", "DoesNotExist") and vals:
            return _never
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return _never
        reqs.append((str(e.get("key") or ""), op, vals))
    reqs.extend(extra)
    if not reqs:
        return _always
    frozen = tuple(reqs)

    def match(labels: Labels) -> bool:
        for key, op, vals in frozen:
            if op == "In":
                if labels.get(key) not in vals:
                    return False
            elif op == "NotIn":
                if key in labels and labels[key] in vals:
                    return False
            elif op == "Exists":
                if key not in labels:
                    return False
            elif key in labels:  # DoesNotExist
                return False
        return True

    return match


# --------------------------------------------------------------------------- inter-pod affinity

NamespaceLabels = Callable[[str], Labels]


def namespace_labeller(namespaces_labels: Mapping[str, Labels] | None) -> NamespaceLabels:
    """Labels of a namespace; unknown namespaces get only ``kubernetes.io/metadata.name``."""
    known = namespaces_labels or {}

    def get(ns: str) -> Labels:
        lab = known.get(ns)
        return lab if lab is not None else {"kubernetes.io/metadata.name": ns}

    return get


@dataclass(frozen=True)
class AffinityTerm:
    """A required PodAffinityTerm, compiled (namespaces resolved against the owner pod)."""

    topology_key: str
    namespaces: frozenset[str]
    ns_selector: LabelMatcher | None  # None: the term has no namespaceSelector
    selector: LabelMatcher
    text: str  # human form of the label selector and namespaces

    def matches(self, pod: Obj, ns_labels: NamespaceLabels) -> bool:
        ns = _ns(pod)
        if ns in self.namespaces or (self.ns_selector is not None
                                     and self.ns_selector(ns_labels(ns))):
            return self.selector(_labels(pod))
        return False


def compile_affinity_term(owner: Obj, term: Obj) -> AffinityTerm:
    owner_labels = _labels(owner)
    sel = term.get("labelSelector")
    extra: list[tuple[str, str, frozenset[str]]] = []
    if sel is not None:  # the API server merges these only into a non-nil labelSelector
        for k in term.get("matchLabelKeys") or ():
            if k in owner_labels:
                extra.append((k, "In", frozenset([owner_labels[k]])))
        for k in term.get("mismatchLabelKeys") or ():
            if k in owner_labels:
                extra.append((k, "NotIn", frozenset([owner_labels[k]])))
    names = [str(n) for n in term.get("namespaces") or ()]
    ns_sel_obj = term.get("namespaceSelector")
    if not names and ns_sel_obj is None:
        names = [_ns(owner)]
    ns_selector = compile_label_selector(ns_sel_obj) if ns_sel_obj is not None else None
    sel_text = selector_from_object(sel) if sel else ("<everything>" if sel is not None
                                                      else "<nothing>")
    for k, op, vals in extra:
        sel_text += f",{k} {'in' if op == 'In' else 'notin'} ({','.join(sorted(vals))})"
    where = ",".join(sorted(names)) if names else ""
    if ns_sel_obj is not None:
        ns_text = selector_from_object(ns_sel_obj) or "<all>"
        where = f"{where}+" if where else ""
        where += f"namespaceSelector({ns_text})"
    return AffinityTerm(str(term.get("topologyKey") or ""), frozenset(names), ns_selector,
                        compile_label_selector(sel, extra),
                        f"pods matching {sel_text} in namespace {where}")


def _required_terms(pod: Obj, kind: str) -> list[Obj]:
    aff = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return list(aff.get("requiredDuringSchedulingIgnoredDuringExecution") or ())


def _pod_ref(pod: Obj) -> str:
    return f"{_ns(pod)}/{_name(pod)}"


@dataclass
class PodAffinityState:
    """InterPodAffinity's PreFilter state: topology-pair counts for one incoming pod."""

    pod: Obj
    affinity: list[AffinityTerm]
    anti_affinity: list[AffinityTerm]
    ns_labels: NamespaceLabels
    affinity_counts: dict[tuple[str, str], int] = field(default_factory=dict)
    anti_counts: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    existing_anti: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return bool(self.affinity or self.anti_affinity or self.existing_anti)

    @staticmethod
    def needs_every_pod(pod: Obj) -> bool:
        """Whether ``build`` must see every pod; otherwise only the pods with required
        anti-affinity can turn ``pod`` away."""
        return bool(_required_terms(pod, "podAffinity")
                    or _required_terms(pod, "podAntiAffinity"))

    @classmethod
    def build(cls, pod: Obj, nodes_by_name: Mapping[str, Obj],
              pods_by_node: Mapping[str, Iterable[Obj]],
              namespaces_labels: Mapping[str, Labels] | None = None) -> PodAffinityState:
        ns_labels = namespace_labeller(namespaces_labels)
        aff = [compile_affinity_term(pod, t) for t in _required_terms(pod, "podAffinity")]
        anti = [compile_affinity_term(pod, t) for t in _required_terms(pod, "podAntiAffinity")]
        state = cls(pod, aff, anti, ns_labels)
        aff_counts: dict[tuple[str, str], int] = defaultdict(int)
        anti_counts: dict[tuple[str, str], list[str]] = defaultdict(list)
        existing: dict[tuple[str, str], list[str]] = defaultdict(list)
        is_target = same_pod_as(pod)
        for node_name, pods in pods_by_node.items():
            node = nodes_by_name.get(node_name)
            if node is None:
                continue
            labels = _labels(node)
            for p in pods:
                spec = p.get("spec") or {}
                affinity = spec.get("affinity")
                if not aff and not anti and not affinity:
                    continue
                if is_terminated(p) or is_target(p):
                    continue
                if aff and all(t.matches(p, ns_labels) for t in aff):
                    for t in aff:
                        v = labels.get(t.topology_key)
                        if v is not None:
                            aff_counts[(t.topology_key, v)] += 1
                for t in anti:
                    if t.matches(p, ns_labels):
                        v = labels.get(t.topology_key)
                        if v is not None:
                            anti_counts[(t.topology_key, v)].append(_pod_ref(p))
                if affinity and (affinity.get("podAntiAffinity") or {}).get(
                        "requiredDuringSchedulingIgnoredDuringExecution"):
                    for raw in _required_terms(p, "podAntiAffinity"):
                        et = compile_affinity_term(p, raw)
                        if et.matches(pod, ns_labels):
                            v = labels.get(et.topology_key)
                            if v is not None:
                                existing[(et.topology_key, v)].append(_pod_ref(p))
        state.affinity_counts = dict(aff_counts)
        state.anti_counts = dict(anti_counts)
        state.existing_anti = dict(existing)
        return state

    def check(self, node: Obj) -> str | None:
        """None when the node passes InterPodAffinity, else why (upstream check order)."""
        labels = _labels(node)
        if self.affinity:
            missing: AffinityTerm | None = None
            for t in self.affinity:
                v = labels.get(t.topology_key)
                if v is None:
                    return (f"pod affinity: node has no {t.topology_key} label "
                            f"(the term's topologyKey)")
                if self.affinity_counts.get((t.topology_key, v), 0) <= 0 and missing is None:
                    missing = t
            # The first pod of a group with affinity to itself may go anywhere that has the
            # topology labels, if no pod anywhere matches and it matches its own terms.
            if missing is not None and not (
                    not self.affinity_counts
                    and all(t.matches(self.pod, self.ns_labels) for t in self.affinity)):
                v = labels[missing.topology_key]
                return f"pod affinity: no {missing.text} runs in {missing.topology_key}={v}"
        for t in self.anti_affinity:
            v = labels.get(t.topology_key)
            if v is not None:
                holders = self.anti_counts.get((t.topology_key, v))
                if holders:
                    more = f" and {len(holders) - 3} more" if len(holders) > 3 else ""
                    return (f"pod anti-affinity: {', '.join(holders[:3])}{more} ({t.text}) "
                            f"already in {t.topology_key}={v}")
        if self.existing_anti:
            for k, v in labels.items():
                holders = self.existing_anti.get((k, v))
                if holders:
                    more = f" and {len(holders) - 3} more" if len(holders) > 3 else ""
                    return (f"existing pod {', '.join(holders[:3])}{more} has required "
                            f"anti-affinity against this pod in {k}={v}")
        return None


def check_pod_affinity(pod: Obj, node: Obj, nodes_by_name: Mapping[str, Obj],
                       pods_by_node: Mapping[str, Iterable[Obj]],
                       namespaces_labels: Mapping[str, Labels] | None = None) -> str | None:
    """Required podAffinity/podAntiAffinity of ``pod`` and existing pods' required
    anti-affinity (symmetric rule) for one node. Builds the state each call: to check many
    nodes use ``PodAffinityState.build(...).check(node)``.
    """
    return PodAffinityState.build(pod, nodes_by_name, pods_by_node, namespaces_labels).check(node)
