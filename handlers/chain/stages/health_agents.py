"""Node health agents: the GPU checks the managed clouds run on the node itself and write as
Node conditions (``handlers/knowledge/node_conditions.yaml``, with their sources):

- AKS node-problem-detector: ``GPUMissing`` (nvidia-smi sees fewer GPUs than the VM size
  has) and ``NVLinkDown`` (``NVLinkStatusInactive`` in Microsoft's docs), True = problem;
- EKS node monitoring agent: ``AcceleratedHardwareReady=False`` with the newest fatal issue
  as its reason and every issue's message joined by "; " (device count mismatch, NVLink
  and NVSwitch fabric errors, double-bit ECC, DCGM health and diagnostics).

They see what the API alone cannot: a GPU gone from nvidia-smi while the plugin advertises
the rest, a dead NVLink, failing ECC. Each is a hardware fault to drain and repair, never a
plugin restart. Xids in such conditions are the xid stage's.
"""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.fixtext import Where
from handlers.chain.outcome import Draft, Outcome
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.knowledge.node_conditions import Hit, known_types, matches
from handlers.kube.commands import drain, kubectl, node_shell
from handlers.model import Fix
from handlers.words import counted

CHECK = "node health agents (GPU conditions)"


@stage("health-agents", after=("hardware",), check=CHECK)
def health_agents(n: NodeFacts, before: Before) -> Outcome:
    conditions = (n.node.get("status") or {}).get("conditions") or []
    if not any(str(c.get("type")) in known_types() for c in conditions):
        return Outcome()  # no agent writes these on this node: nothing to say either way
    by_code: dict[str, list[Hit]] = {}
    for hit in matches(conditions):
        by_code.setdefault(hit.entry.code, []).append(hit)
    out = [_draft(n, code, hits) for code, hits in by_code.items()]
    return Outcome(tuple(out), passed=not out)


def _line(n: NodeFacts, hit: Hit) -> str:
    c = hit.condition
    return (f"node {n.name} condition {c.get('type')}={c.get('status')} "
            f"({c.get('reason', '')}): {c.get('message', '')}".rstrip(": "))


def _draft(n: NodeFacts, code: str, hits: list[Hit]) -> Draft:
    lines = list(dict.fromkeys(_line(n, h) for h in hits))
    lines += list(dict.fromkeys(f"written by {h.entry.agent} ({h.entry.source})" for h in hits))
    conditions: set[str] = set()
    counts = next((c for h in hits if (c := h.entry.gpu_counts(h.condition))), None)
    if counts is not None:
        lines.append(f"GPUs the node has: {counts[0]}, the driver sees: {counts[1]}")
        if counts[1] == 0:
            conditions.add("none-left")
    if any(h.entry.fabric for h in hits):
        conditions.add("fabric")
    said = n.draft(code, lines, conditions=frozenset(conditions),
                   actions=[("cordon-node", n.name)])
    if counts is not None:
        said = Draft(said.code, f"{n.name} has {counted(counts[0], 'GPU')}, but its health "
                     f"agent sees only {counts[1]}: a GPU is gone from the driver.", said.fix,
                     said.objects, said.evidence, said.actions, said.conditions)
    return said


def _repair(node: str, look: str) -> Fix:
    return Fix(
        "Drain the node and look at its GPUs. Then reboot the node; if the fault stays, "
        "replace it (AKS: delete the VMSS instance; EKS: node auto repair replaces it, or "
        "terminate the instance) and open a hardware case with nvidia-bug-report.sh's "
        "output. Restarting the device plugin does not bring hardware back.",
        (kubectl("cordon", node), drain(node), node_shell(node, look)))


@words("GPU_MISSING")
def _missing(w: Where) -> Words:
    return Words(f"The node health agent on {w.node} sees fewer GPUs than the node has.",
                 _repair(w.node, "nvidia-smi -L; lspci -nn | grep -i 10de; dmesg | grep -i "
                         "-e xid -e nvrm | tail -20"))


@words("GPU_NVLINK_DOWN")
def _nvlink(w: Where) -> Words:
    return Words(f"NVLink or the NVSwitch fabric is down on {w.node}: multi-GPU work there "
                 "fails or crawls.",
                 _repair(w.node, "nvidia-smi nvlink --status; nvidia-smi -q -d FABRIC; "
                         "systemctl status nvidia-fabricmanager"))


@words("GPU_HEALTH_CHECK_FAILED")
def _health(w: Where) -> Words:
    return Words(f"The node health agent on {w.node} reports failing GPU hardware (ECC, DCGM "
                 "health or diagnostics).",
                 _repair(w.node, "nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT; "
                         "dcgmi health -c; dcgmi diag -r 2"))
