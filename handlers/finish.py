"""The last word on a diagnosis: every command's findings go through the same named steps,
in this order, so that the same finding reads the same (code, severity, causes) in
why-pending, doctor, pending, quota and nodes.

Severity changes here are conditions (``knowledge/severity.yaml``) added to a finding, and
its card turns them into a severity: nothing here sets a severity by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from handlers.cards import CHANGES, card
from handlers.codes import code_rank
from handlers.consistency import resolve
from handlers.grouping import group_by_node
from handlers.model import Diagnosis, Finding, Fix, Severity
from handlers.rootcause import link


def resolve_conflicts(diag: Diagnosis) -> None:
    """Of two findings that cannot both be true about one node, the one whose evidence
    wins stays (knowledge/consistency.yaml), and the other is said not to be."""
    diag.findings, dropped = resolve(diag.findings)
    diag.withheld.extend(d for d in dropped if d not in diag.withheld)


def group(diag: Diagnosis) -> None:
    """One finding for one fault on several nodes, naming the nodes and their pool."""
    diag.findings = group_by_node(diag.findings, diag.node_pools)


def dedupe(diag: Diagnosis) -> None:
    """The same finding reported twice (same code, summary and objects) is kept once."""
    seen: set[tuple[str, str, tuple[object, ...]]] = set()
    unique = []
    for f in diag.findings:
        key = (f.code, f.summary, f.objects)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    diag.findings = unique


def all_clear(diag: Diagnosis) -> None:
    """Nothing wrong, in a diagnosis that can say so: ALL_CLEAR, the checks as evidence."""
    if diag.can_clear and not diag.problems and "ALL_CLEAR" not in diag.codes:
        diag.add(Finding("ALL_CLEAR", "Every check in the chain passed.",
                         evidence=tuple(diag.checks)))


def order(diag: Diagnosis) -> None:
    """Worst first; among equals, the code deeper in the chain first."""
    diag.findings.sort(key=lambda f: (f.severity.rank, code_rank(f.code)))


def link_causes(diag: Diagnosis) -> None:
    """caused_by on every finding; the root cause leads, its symptoms under it, and it is
    as grave as its worst symptom (handlers.rootcause)."""
    diag.findings, diag.root_cause = link(diag.findings)


def one_critical_per_cause(diag: Diagnosis) -> None:
    """A symptom that a critical finding explains is not one more critical problem."""
    critical = {f.code for f in diag.findings if f.severity == Severity.CRITICAL}
    diag.findings = [_with(f, "explained") if f.severity == Severity.CRITICAL
                     and set(f.caused_by) & critical else f for f in diag.findings]


def blocking(diag: Diagnosis) -> None:
    """The pod fits nowhere now: its root cause, and every node exclusion nothing else
    explains, each block it on their own."""
    if not diag.fits_nowhere:
        return
    root = diag.root_cause.finding if diag.root_cause is not None else None
    diag.findings = [_with(f, "blocking") if f.severity == Severity.WARNING and (
        i == root or (card(f.code).excludes_nodes and not f.caused_by)) else f
        for i, f in enumerate(diag.findings)]


def order_fits_if(diag: Diagnosis) -> None:
    """Cheapest change first: fewest objects changed and no evictions, then the kind."""
    diag.fits_if.sort(key=lambda c: (c.cost, CHANGES.index(c.change)))


def rollback(diag: Diagnosis) -> None:
    """A recent rollout whose previous revision would fit leads the root cause's fix, and
    is one more way to make the pod fit."""
    rb, rc = diag.rollback, diag.root_cause
    if rb is None or rc is None:
        return
    f = diag.findings[rc.finding]
    diag.findings[rc.finding] = replace(f, evidence=(*f.evidence, rb.evidence),
                                        fix=rb.fix.then(_or(f.fix)))
    diag.root_cause = replace(rc, fix=diag.findings[rc.finding].fix)
    diag.fits_if.append(rb.option)


def _or(fix: Fix) -> Fix:
    """A fix said as the other way, after a rollback."""
    return replace(fix, summary=f"Or: {fix.summary}") if fix.summary else fix


def _with(f: Finding, condition: str) -> Finding:
    return replace(f, conditions=f.conditions | {condition})


STEPS: tuple[Callable[[Diagnosis], None], ...] = (
    resolve_conflicts, group, dedupe, all_clear, order, link_causes, one_critical_per_cause,
    blocking, order_fits_if, rollback)


def finish(diag: Diagnosis) -> Diagnosis:
    for step in STEPS:
        step(diag)
    return diag
