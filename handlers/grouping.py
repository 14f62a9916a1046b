"""One finding for one cause, however many nodes show it.

The discovery chain reports per node; the same fault on three nodes of a pool (a DaemonSet
rollout, a driver image) is one thing to fix. Findings of the same code and severity whose
summaries differ only in the node's name become one finding that names the nodes (and
their pool when a node-pool label shows one); each node's evidence is kept, prefixed with
the node where the line does not name it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from handlers.model import Finding, Fix, ObjectRef
from handlers.words import counted

# Node-pool labels of the managed clouds, Karpenter and common conventions, first wins.
POOL_LABELS = ("cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup",
               "karpenter.sh/nodepool", "kubernetes.azure.com/agentpool", "agentpool",
               "node.kubernetes.io/pool", "nodepool", "pool")
_MAX_NAMED = 6
_MAX_EVIDENCE = 24
_MAX_COMMANDS = 12  # a merged fix's commands: every node's, while they fit


def pool_of(node: Mapping[str, Any] | None) -> str | None:
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    return next((str(labels[k]) for k in POOL_LABELS if labels.get(k)), None)


def _only_node(f: Finding) -> str | None:
    nodes = [o.name for o in f.objects if o.kind == "Node"]
    return nodes[0] if len(nodes) == 1 and nodes[0] in f.summary else None


_Key = tuple[str, str, str, frozenset[str]]


def _key(f: Finding, node: str, context: frozenset[str]) -> _Key:
    return f.code, str(f.severity), f.summary.replace(node, "\0"), context


def nodes_phrase(nodes: list[str], pools: Mapping[str, str | None]) -> str:
    """'3 nodes of pool a100-80 (gpu-1, gpu-2, gpu-3)'."""
    named = ", ".join(nodes[:_MAX_NAMED]) + (f" and {len(nodes) - _MAX_NAMED} more"
                                             if len(nodes) > _MAX_NAMED else "")
    pool = {pools.get(n) for n in nodes}
    of = f" of pool {pool.pop()}" if len(pool) == 1 and None not in pool else ""
    return f"{counted(len(nodes), 'node')}{of} ({named})"


def pools_of(findings: Iterable[Finding], nodes: Mapping[str, Mapping[str, Any]]
             ) -> dict[str, str | None]:
    """The pool of each node a finding is about alone (the ones grouping may merge)."""
    named = {n for f in findings if (n := _only_node(f)) is not None}
    return {n: pool_of(nodes.get(n)) for n in named}


def group_by_node(findings: list[Finding],
                  pools: Mapping[str, str | None]) -> list[Finding]:
    groups: dict[_Key, list[tuple[Finding, str]]] = {}
    order: list[_Key | Finding] = []
    # A node's other codes: the same symptom with other causes is not the same finding.
    context: dict[str, set[str]] = {}
    for f in findings:
        node = _only_node(f)
        if node is not None:
            context.setdefault(node, set()).add(f.code)
    for f in findings:
        node = _only_node(f)
        if node is None:
            order.append(f)
            continue
        k = _key(f, node, frozenset(context[node]))
        if k not in groups:
            groups[k] = []
            order.append(k)
        groups[k].append((f, node))
    out = []
    for item in order:
        if isinstance(item, Finding):
            out.append(item)
            continue
        members = groups[item]
        out.append(members[0][0] if len(members) == 1 else _merge(members, pools))
    return out


_VERBS = {" is ": " are ", " does ": " do ", " has ": " have ", " was ": " were "}


def _plural(tail: str) -> str:
    """'... does not advertise its GPUs' after a plural subject: '... do not advertise
    their GPUs'."""
    for one, many in _VERBS.items():
        if tail.startswith(one):
            rest = tail[len(one):]
            return many + rest.replace(" its ", " their ", 1)
    return tail


def _merge(members: list[tuple[Finding, str]], pools: Mapping[str, str | None]) -> Finding:
    first, node0 = members[0]
    names = [n for _, n in members]
    phrase = nodes_phrase(names, pools)
    head, _, tail = first.summary.partition(node0)
    summary = head + phrase + _plural(tail)
    objects: list[ObjectRef] = []
    evidence: list[str] = []
    actions: list[tuple[str, str]] = []
    shared = set.intersection(*(set(f.evidence) for f, _ in members))
    evidence += [e for e in first.evidence if e in shared]  # said once, for every node
    for f, node in members:
        objects += [o for o in f.objects if o not in objects]
        evidence += [e if node in e else f"{node}: {e}" for e in f.evidence if e not in shared]
        actions += [a for a in f.actions if a not in actions]
    if len(evidence) > _MAX_EVIDENCE:
        evidence = [*evidence[:_MAX_EVIDENCE], f"... and {len(evidence) - _MAX_EVIDENCE} "
                    "more lines"]
    return Finding(first.code, summary, tuple(objects), tuple(evidence), _merge_fixes(members),
                   tuple(actions), first.conditions)


def _merge_fixes(members: list[tuple[Finding, str]]) -> Fix:
    """The first node's fix with every node's own commands (their names differ), up to
    ``_MAX_COMMANDS``; the nodes whose commands did not fit are named in the summary."""
    first = members[0][0].fix
    if not first:
        return first
    commands = list(first.commands)
    left: list[str] = []
    for f, node in members[1:]:
        mine = [c for c in f.fix.commands if c not in commands]
        if len(commands) + len(mine) > _MAX_COMMANDS:
            left.append(node)
        else:
            commands += mine
    summary = first.summary + (f" The same on {', '.join(left)}." if left else "")
    docs = tuple(dict.fromkeys(d for f, _ in members for d in f.fix.docs))
    return replace(first, summary=summary.strip(), commands=tuple(commands), docs=docs)
