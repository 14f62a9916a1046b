"""Pods that only wait in a validation init container (``driver-validation``,
``toolkit-validation``) are not causes of their own: each is evidence for the earliest
broken stage it waits for, or, when no stage reported that fault, the fault itself."""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.outcome import Amendment, Draft, Note, Outcome
from handlers.chain.stage import Before, stage


def _pulled(n: NodeFacts, before: Before, component: str) -> bool:
    """A pod of ``component`` on the node cannot pull its image (OPERATOR_IMAGE_PULL)."""
    refs = set(before.objects("OPERATOR_IMAGE_PULL"))
    return any(st.ref in refs for st in n.comp.get(component, []))


@stage("waiting", after=("driver", "toolkit", "plugin", "operator"))
def waiting(n: NodeFacts, before: Before) -> Outcome:
    if not before.waiting:
        return Outcome()
    driver = ["DRIVER_NOT_READY"] + (["OPERATOR_IMAGE_PULL"] if _pulled(n, before, "driver")
                                     else [])
    toolkit = ["CONTAINER_RUNTIME_NOT_CONFIGURED"] + (
        ["OPERATOR_IMAGE_PULL"] if _pulled(n, before, "toolkit") else [])
    new: list[Draft] = []
    notes: list[Amendment] = []

    def has(code: str) -> bool:
        return before.has(code) or any(d.code == code for d in new)

    for w in before.waiting:
        order = driver if w.code == "DRIVER_NOT_READY" else [
            c for c in driver if has(c)] + toolkit
        target = next((c for c in order if has(c)), None)
        if target is not None:
            notes.append(Note(target, (w.line,)))
        else:
            new.append(n.draft(w.code, [w.line], st=w.pod))
    return Outcome(tuple(new), tuple(notes))
