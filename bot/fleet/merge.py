"""Fleet-wide answers: ``nodes`` (the ledger per cluster and in total) and ``pending
--all-clusters`` (grouped by cluster), made of each cluster's own diagnosis.

A merged answer offers no action (a node's name is only unique in its cluster): each
finding says its cluster and loses its buttons; drill-down commands get ``-c``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from handlers.model import Diagnosis, Finding

TARGET = "every cluster"
ALL_CLUSTERS = ("nodes", "pending")  # the commands merge answers for (--all-clusters)


def _finding(cluster: str, f: Finding) -> Finding:
    return replace(f, summary=f"[{cluster}] {f.summary}", actions=())


def _sum(rows: Sequence[dict[str, Any]], key: str) -> Any:
    return sum(r.get(key) or 0 for r in rows)


def merge(command: str, parts: Sequence[tuple[str, Diagnosis]],
          not_read: Sequence[str]) -> Diagnosis:
    """One answer of ``command`` (nodes or pending) from each cluster's (in order);
    ``not_read``: a line per cluster that could not be read."""
    out = Diagnosis(command, TARGET)
    out.can_clear = False  # a cluster not read is no all-clear
    for name, d in parts:
        out.findings.extend(_finding(name, f) for f in d.findings)
        out.checks.extend(c for c in d.checks if c not in out.checks)
        out.unchecked.extend(f"{name}: {u}" for u in d.unchecked)
    out.unchecked.extend(f"not read: {line}" for line in not_read)
    out.details = (_nodes if command == "nodes" else _pending)(parts)
    out.details["clusters"] = [name for name, _ in parts]
    return out


def _nodes(parts: Sequence[tuple[str, Diagnosis]]) -> dict[str, Any]:
    """Rows and models named ``cluster/node``, ``cluster: model``, a total row per cluster
    in the model table, and the fleet's totals."""
    rows: list[dict[str, Any]] = []
    models: list[dict[str, Any]] = []
    totals: dict[str, Any] = {}
    for name, d in parts:
        mine = [dict(m, product=f"{name}: {m['product']}") for m in d.details.get("models", [])]
        models.extend(mine)
        models.append({k: _sum(mine, k) for k in ("nodes", "physical", "capacity",
                                                  "allocatable", "allocated", "free",
                                                  "pending", "cordoned", "lost")}
                      | {"product": f"{name} (all)"})
        rows.extend(dict(r, node=f"{name}/{r['node']}") for r in d.details.get("rows", []))
        for key, value in (d.details.get("totals") or {}).items():
            if isinstance(value, int | float):
                totals[key] = totals.get(key, 0) + value
    return {"rows": rows, "models": models, "totals": totals}


def _pending(parts: Sequence[tuple[str, Diagnosis]]) -> dict[str, Any]:
    """Rows grouped by cluster (``cluster/namespace``), drill-downs with ``-c``."""
    rows: list[dict[str, Any]] = []
    totals: dict[str, int | float] = {}
    more = {"more": 0, "more_pods": 0, "more_gpus": 0.0}
    for name, d in parts:
        for r in d.details.get("rows", []):
            row = dict(r, namespace=f"{name}/{r['namespace']}", cluster=name)
            if isinstance(row.get("drilldown"), str):
                row["drilldown"] = f"{row['drilldown']} -c {name}"
            rows.append(row)
        for key, value in (d.details.get("totals") or {}).items():
            totals[key] = totals.get(key, 0) + value
        for key in more:
            more[key] += d.details.get(key) or 0
    causes: dict[str, dict[str, Any]] = {}
    for r in rows:
        c = causes.setdefault(r["code"] or "UNKNOWN", {
            "code": r["code"], "severity": r["severity"], "workloads": [], "pods": 0,
            "gpus": 0.0})
        c["workloads"].append(f"{r['namespace']}/{r['workload']}")
        c["pods"] += r["pods_pending"]
        c["gpus"] += r["gpus_requested"]
    limit = next((d.details.get("limit") for _, d in parts), None)
    return {"rows": rows, "totals": totals, **more, "causes": list(causes.values()),
            "namespace": next((d.details.get("namespace") for _, d in parts), None),
            "limit": limit, "queues": []}
