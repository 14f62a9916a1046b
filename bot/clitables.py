"""The CLI's tables: for each, its columns (what is cut, what is hidden first when the
terminal is narrow, what only ``-o wide`` shows) and the cells of a diagnosis's rows.

Templates call ``table(NAME, rows)``; ``bot/table.py`` lays the table out. Hidden first
are the columns an on-call reader needs least to decide what to do: the container runtime
before the driver, the capacity before the allocatable count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bot.table import Cell, Column, Fit, Row, Styled

Builder = Callable[[Sequence[Any]], tuple[list[Column], list[Row]]]


def num(v: Any) -> str:
    return f"{float(v):g}" if isinstance(v, int | float) and not isinstance(v, bool) else str(v)


def _node(header: str = "NODE") -> Column:
    return Column(header, Fit.MIDDLE, soft=28, min=12)


def _model(drop: int = 0) -> Column:
    return Column("MODEL", Fit.MIDDLE, drop=drop, soft=22, min=10)


def _n(header: str, drop: int = 0, wide: bool | None = None) -> Column:
    return Column(header, right=True, drop=drop, wide=wide)


# doctor: one column per key of the discovery chain's row (handlers/chain/row.py).
DOCTOR = {
    "node": _node(), "product": Column("PRODUCT", Fit.MIDDLE, drop=4, soft=22, min=10),
    "gpus": Column("GPUS"), "labels": Column("LABELS", drop=5),
    "driver": Column("DRIVER", drop=3), "toolkit": Column("TOOLKIT", drop=6),
    "plugin": Column("PLUGIN", drop=2), "runtime": Column("RUNTIME", drop=8),
    "mig": Column("MIG", drop=7), "sharing": Column("SHARING", drop=6),
    "verdict": Column("VERDICT"),
}


def doctor(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Column], list[Row]]:
    keys = list(rows[0]) if rows else list(DOCTOR)
    cols = [DOCTOR.get(k) or Column(k.upper(), drop=9) for k in keys]
    return cols, [Row([num(r.get(k, "-")) for k in keys]) for r in rows]


def node_models(models: Sequence[Mapping[str, Any]]) -> tuple[list[Column], list[Row]]:
    cols = [_model(), _n("NODES", 2), _n("HAS"), _n("CAP", 3), _n("ALLOC"), _n("USED"),
            _n("FREE"), _n("LOST"), _n("PENDING"), _n("CORDONED", 1)]
    return cols, [Row([str(r["product"]), num(r["nodes"]), num(r["physical"]),
                       num(r["capacity"]), num(r["allocatable"]), num(r["allocated"]),
                       num(r["free"]), num(r["lost"]), num(r["pending"]), num(r["cordoned"])])
                  for r in models]


def _flags(r: Mapping[str, Any]) -> str:
    flags = [] if r["ready"] else ["NotReady"]
    if r["cordoned"]:
        flags.append("cordoned")
    if r.get("unhealthy"):
        flags.append(f"{r['unhealthy']} unhealthy")
    flags += [f"taint {t}" for t in r.get("taints", [])]
    flags += [f"{k}={num(v)}" for k, v in (r.get("other_resources") or {}).items()]
    if dra := r.get("dra"):
        flags.append(f"DRA GPUs {dra['published']} published, {dra['allocated']} allocated, "
                     f"{dra['free']} free")
    return ", ".join(flags)


def nodes(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Column], list[Row]]:
    """``gpubot nodes``' per-node table: FLAGS sums up what ``-o wide`` gives columns."""
    cols = [_node(), _model(drop=3), _n("HAS"), _n("CAP", 2), _n("ALLOC"), _n("USED"),
            _n("FREE"), _n("LOST"), Column("FLAGS", Fit.WRAP, min=16, wide=False),
            Column("COUNT FROM", wide=True), Column("READY", wide=True),
            Column("SCHEDULABLE", wide=True), _n("UNHEALTHY", wide=True),
            Column("TAINTS", wide=True), Column("OTHER RESOURCES", wide=True),
            Column("DRA PUB/ALLOC/FREE", wide=True)]
    out = []
    for r in rows:
        other = ", ".join(f"{k}={num(v)}" for k, v in (r.get("other_resources") or {}).items())
        out.append(Row([
            str(r["node"]), str(r["product"]),
            (">=" if r.get("physical_at_least") else "") + num(r["physical"]),
            num(r["capacity"]), num(r["allocatable"]), num(r["allocated"]), num(r["free"]),
            num(r["lost"]), _flags(r), str(r.get("source") or "-"),
            "yes" if r["ready"] else "NotReady", "no" if r["cordoned"] else "yes",
            num(r.get("unhealthy") or 0), ",".join(r.get("taints", [])) or "-", other or "-",
            f"{dra['published']}/{dra['allocated']}/{dra['free']}"
            if (dra := r.get("dra")) else "-"]))
    return cols, out


def pending(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Column], list[Row]]:
    cols = [Column("SEVERITY", drop=2), Column("NAMESPACE", Fit.MIDDLE, soft=16, min=9),
            Column("WORKLOAD", Fit.MIDDLE, soft=28, min=12), _n("PODS"), _n("GPUS"),
            _n("AGE", 1), Column("ROOT CAUSE", Fit.WRAP, min=24, spill=True)]
    out = []
    for r in rows:
        notes: list[Cell] = []
        if fits := r.get("fits_if"):
            more = f" (or {len(fits) - 1} more)" if len(fits) > 1 else ""
            notes.append((Styled("Fits if:", "ok"), f" {fits[0]['summary']}{more}"))
        elif r.get("fits_if_closest"):
            notes.append((Styled("Fits if:", "warning"), f" {r['fits_if_closest']}"))
        sev = str(r["severity"])
        out.append(Row([
            Styled(sev.upper(), sev), str(r["namespace"]), str(r["workload"]),
            f"{r['pods_pending']}{'*' if r.get('pods_not_created') else ''}",
            num(r["gpus_requested"]), str(r["age"]),
            (Styled(str(r.get("code") or "UNKNOWN"), "bold"), f" {r['cause']}")], notes))
    return cols, out


def quota(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Column], list[Row]]:
    cols = [Column("NAMESPACE", Fit.MIDDLE, soft=16, min=9),
            Column("QUOTA", Fit.MIDDLE, drop=2, soft=16, min=8),
            Column("RESOURCE", Fit.MIDDLE, soft=24, min=10), _n("USED"), _n("HARD"),
            _n("USE%", 1), _n("PENDING"), Column("HELD BY", Fit.WRAP, drop=3, min=20)]
    out = []
    for r in rows:
        holders = [f"{h['pod']}={num(h['count'])}{'' if h.get('node') else ' (pending)'}"
                   for h in r["holders"][:4]]
        if len(r["holders"]) > 4:
            holders.append(f"+{len(r['holders']) - 4} more")
        used = "?" if r["used"] is None else num(r["used"]) + (
            "*" if r["used_source"] != "status" else "")
        notes: list[Cell] = [
            f"waiting: {w['workload']} ({w['pods_pending']} pending, {w['pods_not_created']} "
            f"not created) asks {num(w['count'])}" for w in r["waiting"][:3]]
        if len(r["waiting"]) > 3:
            notes.append(f"... and {len(r['waiting']) - 3} more waiting workloads")
        notes += [Styled(str(n), "dim") for n in r["notes"]]
        out.append(Row([
            str(r["namespace"]), str(r["quota"]), str(r["resource"]), used,
            "?" if r["hard"] is None else num(r["hard"]),
            "-" if r["pct"] is None else f"{num(r['pct'])}%", num(r["pending"]),
            ", ".join(holders) or "-"], notes))
    return cols, out


def scheduler_nodes(verdicts: Sequence[Any]) -> tuple[list[Column], list[Row]]:
    """why-pending: each node through the scheduler's filters (handlers.model.NodeVerdict)."""
    cols = [_node(), Column("GPU FREE"), Column("VERDICT", Fit.WRAP, min=20)]
    out = []
    for n in verdicts:
        verdict: Cell = Styled("fits", "ok") if n.fits else n.reasons[0] + (
            f" (+{len(n.reasons) - 1} more)" if len(n.reasons) > 1 else "")
        out.append(Row([n.node, f"{num(n.gpu_free)}/{num(n.gpu_allocatable)}", verdict]))
    return cols, out


def digest_lost(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Column], list[Row]]:
    cols = [Column("POOL", Fit.MIDDLE, soft=24, min=10), _n("INCIDENTS"),
            _n("MOST AT ONCE", 2), _n("LOST NOW"), _n("GPU-HOURS"), Column("LONGEST", drop=1)]
    return cols, [Row([str(r["pool"]), num(r["incidents"]), num(r["peak"]),
                       num(r["lost_now"]), num(r["gpu_hours"]), str(r["longest"])])
                  for r in rows]


def digest_models(models: Sequence[Mapping[str, Any]]) -> tuple[list[Column], list[Row]]:
    cols = [_model(), _n("NODES", 1), _n("HAS"), _n("ALLOC"), _n("USED"), _n("FREE"),
            _n("LOST"), _n("PENDING")]
    return cols, [Row([str(r["product"]), num(r["nodes"]), num(r["physical"]),
                       num(r["allocatable"]), num(r["allocated"]), num(r["free"]),
                       num(r["lost"]), num(r["pending"])]) for r in models]


TABLES: dict[str, Builder] = {
    "doctor": doctor, "node_models": node_models, "nodes": nodes, "pending": pending,
    "quota": quota, "scheduler_nodes": scheduler_nodes, "digest_lost": digest_lost,
    "digest_models": digest_models,
}
