"""The causal chain between findings: which finding explains which, and the deepest cause.

A diagnosis often holds a cause and its symptoms side by side (the image's CUDA needs a
newer driver -> the device plugin crash-loops -> the node advertises no GPUs -> the pod is
pending). ``link`` marks each finding with the codes that cause it (``caused_by``) and picks
the root cause: start from the most important problem and follow its causes down as far
as the evidence goes. Two findings are linked only when the code graph allows it and they
are about the same node, or one of them is about no node at all (a LimitRange), or both
are about the same pod (why-pending's findings about the nodes that could take it: a
NotReady node with the GPUs is why the others are short).
"""

from __future__ import annotations

from dataclasses import replace

from handlers.cards import catalogue
from handlers.codes import code_rank
from handlers.model import Finding, ObjectRef, RootCause


def _nodes(f: Finding) -> set[str]:
    return {o.name for o in f.objects if o.kind == "Node"}


def _pods(f: Finding) -> set[ObjectRef]:
    return {o for o in f.objects if o.kind == "Pod"}


class _Index:
    """Problems by (code, node) and by code: candidates are looked up, not scanned."""

    def __init__(self, problems: list[Finding]) -> None:
        self.by_code: dict[str, list[Finding]] = {}
        self.by_node: dict[tuple[str, str], list[Finding]] = {}
        self.nodeless: dict[str, list[Finding]] = {}
        self.by_pod: dict[tuple[str, ObjectRef], list[Finding]] = {}
        for f in problems:
            self.by_code.setdefault(f.code, []).append(f)
            for p in _pods(f):
                self.by_pod.setdefault((f.code, p), []).append(f)
            ns = _nodes(f)
            if not ns:
                self.nodeless.setdefault(f.code, []).append(f)
            for n in ns:
                self.by_node.setdefault((f.code, n), []).append(f)


def _candidates(f: Finding, ix: _Index) -> list[Finding]:
    """Findings the graph allows as ``f``'s cause: about the same node, about none, or about
    the same pod."""
    mine, pods = _nodes(f), _pods(f)
    out: dict[int, Finding] = {}
    for code in catalogue().causes_of.get(f.code, ()):
        found = ix.by_code.get(code, []) if not mine else [
            *ix.nodeless.get(code, []), *(c for n in mine for c in ix.by_node.get((code, n), [])),
            *(c for p in pods for c in ix.by_pod.get((code, p), []))]
        for c in found:
            if c is not f:
                out.setdefault(id(c), c)
    return list(out.values())


def _importance(f: Finding) -> tuple[int, tuple[int, int]]:
    return f.severity.rank, code_rank(f.code)


def _causes(problems: list[Finding]) -> dict[int, list[Finding]]:
    """Each problem's possible causes among ``problems``, most important first."""
    ix = _Index(problems)
    return {id(f): sorted(_candidates(f, ix), key=_importance) for f in problems}


def cause_codes(findings: list[Finding]) -> dict[int, tuple[str, ...]]:
    """``id(finding)`` -> the codes that explain it, as ``link`` will set ``caused_by``
    (for checks that weigh findings before the diagnosis is finished)."""
    causes = _causes([f for f in findings if f.severity.is_problem])
    return {k: tuple(dict.fromkeys(c.code for c in v)) for k, v in causes.items() if v}


def link(findings: list[Finding]) -> tuple[list[Finding], RootCause | None]:
    """Findings with ``caused_by`` set, the root cause and its symptoms first, then the
    rest in their order; and the root cause (None when nothing is a problem). The root is
    as grave as its worst symptom (condition ``root-of-critical``/``root-of-warning``)."""
    problems = [f for f in findings if f.severity.is_problem]
    causes = _causes(problems)
    out = [replace(f, caused_by=tuple(dict.fromkeys(c.code for c in causes[id(f)])))
           if causes.get(id(f)) else f for f in findings]
    new = {id(old): f for old, f in zip(findings, out, strict=True)}
    if not problems:
        return out, None
    top = min(problems, key=_importance)
    root, seen = top, {id(top)}
    while True:
        nxt = [c for c in causes[id(root)] if id(c) not in seen]
        if not nxt:
            break
        root = nxt[0]
        seen.add(id(root))
    worst = min((f.severity for f in problems if _explains(root, f, causes)),
                key=lambda s: s.rank, default=root.severity)
    root_f = new[id(root)]
    if worst.rank < root_f.severity.rank:
        root_f = replace(root_f, conditions=root_f.conditions | {f"root-of-{worst}"})
    symptoms = [new[id(f)] for f in findings if f is not root and _explains(root, f, causes)]
    symptoms.sort(key=_importance)
    placed = {id(new[id(root)]), *map(id, symptoms)}
    rest = [f for f in out if id(f) not in placed]
    ordered = [root_f, *symptoms, *rest]
    return ordered, RootCause(root_f.code, root_f.summary, 0, root_f.fix,
                              tuple(dict.fromkeys(f.code for f in symptoms)))


def _explains(root: Finding, f: Finding, causes: dict[int, list[Finding]]) -> bool:
    """``root`` is among ``f``'s causes, directly or through other findings."""
    stack, seen = [f], {id(f)}
    while stack:
        cur = stack.pop()
        for c in causes.get(id(cur), ()):
            if c is root:
                return True
            if id(c) not in seen:
                seen.add(id(c))
                stack.append(c)
    return False

