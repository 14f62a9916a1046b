"""The data of the supply-and-demand chart of ``nodes``: per GPU model, what the nodes
offer, what is held, what is free, what they have but the scheduler cannot use (lost: the
GPU ledger, handlers/ledger.py), and what pending pods ask. Plain numbers, so that the
picture (bot/chart.py) and its test golden agree."""

from __future__ import annotations

from typing import Any

from handlers.model import Diagnosis
from handlers.words import counted

# (key in the nodes ledger, legend label), in the order the bars are drawn.
SERIES = (
    ("allocatable", "allocatable"),
    ("allocated", "allocated"),
    ("free", "free"),
    ("lost", "lost (has, cannot use)"),
    ("pending", "pending demand"),
)


def chart_data(diag: Diagnosis) -> dict[str, Any]:
    """``{"title", "series": [labels], "groups": [{"label", "values": [...]}]}``."""
    groups = []
    for m in diag.details.get("models") or []:
        values = [float(m.get(key) or 0.0) for key, _ in SERIES]
        if not any(values):
            continue
        nodes = int(m.get("nodes") or 0)
        label = str(m.get("product") or "?")
        if label == "(any model)":
            label = "pods asking any GPU model"
        if nodes:
            label += f" ({nodes} node{'s' if nodes != 1 else ''})"
        groups.append({"label": label, "values": values})
    lost = sum(float(m.get("lost") or 0.0) for m in diag.details.get("models") or [])
    return {"title": "GPUs per model: supply and demand"
                     + (f" ({counted(lost, 'GPU')} lost)" if lost else ""),
            "series": [label for _, label in SERIES], "groups": groups}
