"""Runs the registered stages over one GPU node, in the order their ``after`` declarations
give, and makes their outcomes the node's findings.

Every root cause is one finding per node: when two stages prove the same code (the plugin's
log and the validator's log both say the driver is not loaded), their drafts merge into one
finding with both lines as evidence, the first stage's words and the graver report's
conditions. Amendments apply after the stage's own findings, in the order returned. A stage
sees only what the stages it runs after (directly or through others) found.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache

from handlers.cards import card, codes
from handlers.chain.facts import ChainContext, NodeFacts, node_ready
from handlers.chain.model import NodeChain
from handlers.chain.outcome import Amendment, Draft, NoRestart, Note, Outcome, Retell, Waiting
from handlers.chain.row import make_row
from handlers.chain.stage import REGISTRY, Registry, Stage
from handlers.codes import code_rank
from handlers.consistency import UNVERIFIED, NodeEvidence, withhold
from handlers.model import Finding, Fix, ObjectRef, Severity
from handlers.view import Obj

_MAX_EVIDENCE = 14
_RESTART = "restart-device-plugin"


@dataclass
class _Merged:
    code: str
    conditions: frozenset[str]
    summary: str
    fix: Fix
    objects: list[ObjectRef] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    actions: list[tuple[str, str]] = field(default_factory=list)
    stages: set[str] = field(default_factory=set)  # who reported it

    @property
    def severity(self) -> Severity:
        return card(self.code).severity(self.conditions)

    def add_evidence(self, lines: Iterable[str]) -> None:
        for e in lines:
            if e and e not in self.evidence:
                self.evidence.append(e)

    def finding(self) -> Finding:
        return Finding(self.code, self.summary, tuple(self.objects),
                       tuple(self.evidence[:_MAX_EVIDENCE]), self.fix, tuple(self.actions),
                       self.conditions)


class _Found:
    """The node's findings so far, merged by code, and what each stage handed on."""

    def __init__(self) -> None:
        self.by_code: dict[str, _Merged] = {}
        self.outcomes: dict[str, Outcome] = {}

    def merge(self, stage: str, drafts: Iterable[Draft]) -> None:
        for d in drafts:
            m = self.by_code.get(d.code)
            if m is None:
                m = self.by_code[d.code] = _Merged(d.code, d.conditions, d.summary, d.fix)
            elif card(d.code).severity(d.conditions).rank < m.severity.rank:
                m.conditions = d.conditions  # the graver report's conditions stand
            m.fix = m.fix or d.fix
            m.objects += [o for o in d.objects if o not in m.objects]
            m.add_evidence(d.evidence)
            m.actions += [a for a in d.actions if a not in m.actions]
            m.stages.add(stage)

    def amend(self, amendments: Iterable[Amendment]) -> None:
        for a in amendments:
            m = self.by_code.get(a.code)
            if m is None:
                continue
            if isinstance(a, Note):
                m.add_evidence(a.evidence)
            elif isinstance(a, Retell):
                m.summary, m.fix = a.summary, a.fix
            elif isinstance(a, NoRestart):
                m.actions = [x for x in m.actions if x[0] != _RESTART]
                m.fix = a.fix
                m.add_evidence(a.evidence)


@dataclass(frozen=True)
class _Before:
    """``Before``: the findings of the stages ``seen`` (a stage's predecessors)."""

    found: _Found
    seen: frozenset[str]

    def _visible(self) -> list[_Merged]:
        return [m for m in self.found.by_code.values() if m.stages & self.seen]

    def _get(self, code: str) -> _Merged | None:
        m = self.found.by_code.get(code)
        return m if m is not None and m.stages & self.seen else None

    def has(self, *codes: str) -> bool:
        return any(self._get(c) is not None for c in codes)

    def problems(self) -> list[str]:
        return [m.code for m in self._visible() if m.severity.is_problem]

    def evidence(self, code: str) -> tuple[str, ...]:
        m = self._get(code)
        return tuple(m.evidence) if m else ()

    def actions(self, code: str) -> tuple[tuple[str, str], ...]:
        m = self._get(code)
        return tuple(m.actions) if m else ()

    def objects(self, code: str) -> tuple[ObjectRef, ...]:
        m = self._get(code)
        return tuple(m.objects) if m else ()

    @property
    def waiting(self) -> tuple[Waiting, ...]:
        return tuple(w for s, o in self.found.outcomes.items() if s in self.seen
                     for w in o.waiting)

    @property
    def stuck(self) -> tuple[str, ...]:
        return tuple(x for s, o in self.found.outcomes.items() if s in self.seen
                     for x in o.stuck)


@dataclass(frozen=True)
class Plan:
    """The registry's stages in order, each with every stage it runs after."""

    stages: tuple[Stage, ...]
    before: dict[str, frozenset[str]]
    fails: dict[str, frozenset[str]]  # stage -> the codes that mean its check did not pass

    @property
    def checks(self) -> list[str]:
        return [s.check for s in self.stages if s.check]


def plan(registry: Registry) -> Plan:
    order = registry.ordered()
    before = registry.predecessors()
    fails: dict[str, set[str]] = {}
    for c in codes().values():
        for check in c.checks:
            if check in registry.stages:
                fails.setdefault(check, set()).add(c.code)
    return Plan(tuple(order), before, {k: frozenset(v) for k, v in fails.items()})


@cache
def default_plan() -> Plan:
    from handlers.chain import stages

    stages.load()
    return plan(REGISTRY)


def run_node(ctx: ChainContext, node: Obj, p: Plan | None = None) -> NodeChain:
    p = p or default_plan()
    n = NodeFacts(ctx, node)
    ready, why = node_ready(node)
    if not ready:
        ctx.unchecked.append(f"chain on {n.name}: not checked (node {why.strip()})")
        return NodeChain(n.name, [], [], make_row(n, "NotReady"))
    found = _Found()
    halted = False
    passed: list[Stage] = []
    ran: list[str] = []  # the checks that applied to the node (passed, failed, or found)
    for s in p.stages:
        if halted and not s.always:
            continue
        out = s.run(n, _Before(found, p.before[s.name]))
        found.merge(s.name, out.findings)
        found.amend(out.amendments)
        found.outcomes[s.name] = out
        if out.passed and s.check:
            passed.append(s)
        if s.check and (out.passed is not None or out.findings or out.waiting or out.stuck):
            ran.append(s.check)
        halted = halted or out.halt
    _consistent(n, found)
    if n.plugin_only:  # maybe not a GPU node at all: nothing on it is critical
        for m in found.by_code.values():
            m.conditions |= {"unconfirmed-node"}
    findings = [m.finding() for m in found.by_code.values()]
    problems = [f for f in findings if f.severity.is_problem]
    codes_now = {f.code for f in problems}
    checks = [s.check for s in passed
              if s.check and not codes_now & p.fails.get(s.name, frozenset())]
    verdict = "ok" if not problems else min(
        problems, key=lambda f: (f.severity.rank, code_rank(f.code))).code
    return NodeChain(n.name, findings, checks, make_row(n, verdict), ran)


def _consistent(n: NodeFacts, found: _Found) -> None:
    """No absence claim beside the evidence of the opposite (handlers/consistency.py): the
    claim is not made and the fact is said instead; a claim resting on a kind that could
    not be read is at most a warning."""
    reader = n.ctx.reader
    evidence = NodeEvidence(n.node, lambda: reader.pods_on([n.name])[n.name], n.dra,
                            reader.view.now())
    for code, m in list(found.by_code.items()):
        v = withhold(code, m.conditions, evidence, reader.readable)
        if v.withheld is not None:
            del found.by_code[code]
            if v.withheld not in reader.withheld:
                reader.withheld.append(v.withheld)
        elif v.unverified:
            m.conditions |= {UNVERIFIED}
            m.add_evidence([f"not read: {', '.join(v.unverified)} (the claim rests on them)"])
