"""Counts in words: "1 GPU", "2 GPUs", "1 pod", "0 nodes", never "1 GPUs" or "pod(s)".

    counted(1, "GPU")                 -> "1 GPU"
    counted(2.5, "GPU")               -> "2.5 GPUs"
    counted(3, "pending GPU workload") -> "3 pending GPU workloads" (the last word is counted)
    counted(2, "policy")              -> "2 policies"

Handlers, the CLI's templates and Slack's all word counts through it (``counted`` is a global
of both template environments).
"""

from __future__ import annotations

# Nouns whose plural the rules below get wrong.
_IRREGULAR = {"child": "children", "person": "people", "GPU-hours": "GPU-hours"}


def plural(noun: str) -> str:
    """The plural of ``noun``'s last word: workload -> workloads, policy -> policies,
    class -> classes."""
    head, _, last = noun.rpartition(" ")
    if last in _IRREGULAR:
        word = _IRREGULAR[last]
    elif last.endswith(("s", "x", "z", "ch", "sh")):
        word = last + "es"
    elif last.endswith("y") and last[-2:-1].lower() not in ("a", "e", "i", "o", "u", ""):
        word = last[:-1] + "ies"
    else:
        word = last + "s"
    return f"{head} {word}" if head else word


def counted(n: float, noun: str, plural_form: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is exactly 1; whole numbers without a
    fraction (8, not 8.0)."""
    number = f"{n:g}" if isinstance(n, float) else str(n)
    if n == 1:
        return f"{number} {noun}"
    return f"{number} {plural_form or plural(noun)}"
