"""GPU health: every GPU the node advertises is allocatable.

The kubelet lowers allocatable when the plugin reports a device unhealthy, or when the
plugin goes away: then the plugin's own fault (an earlier stage's finding) is the cause,
and the missing GPUs are its evidence. A hardware fault in the plugin's Xid lines needs a
drain and a repair, not a plugin restart (``handlers/chain/faults.py``).
"""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.faults import hardware_faults, repair_fix
from handlers.chain.fixtext import Where, restart_plugin, restart_pod
from handlers.chain.outcome import Draft, Note, Outcome
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.codes import code_rank
from handlers.kube.commands import drain, node_shell
from handlers.logpatterns import classify_log
from handlers.model import Fix

CODE = "GPU_UNHEALTHY"
_MAX_LOG_EVIDENCE = 4


@stage("health", after=("registration",), check="GPU health (allocatable = capacity)")
def health(n: NodeFacts, before: Before) -> Outcome:
    low = [(r, c, n.alloc.get(r, 0.0)) for r, c in n.cap.items() if n.alloc.get(r, 0.0) < c]
    if not low:
        return Outcome(passed=True if n.advertised else None)
    lines = [f"allocatable {r}: {a:g} < capacity {c:g}" for r, c, a in low]
    if not n.plugin_ok:
        problems = sorted(before.problems(), key=code_rank)
        if problems:
            return Outcome(amendments=(Note(problems[0], tuple(lines)),))
    st = next((s for s in n.plugins if s.ready), n.plugins[0] if n.plugins else None)
    ev = list(lines)
    if st is not None:
        text = n.ctx.reader.logs(st.namespace, st.name, n.plugin_container(st))
        xid = [ln for c, ln in classify_log(text) if c == CODE]
        ev += [f"pod {st.label} log: {ln}" for ln in xid[-_MAX_LOG_EVIDENCE:]]
    gone = frozenset({"all-unusable"} if all(a == 0 for _, _, a in low) else ())
    faults = hardware_faults(ev)
    if faults:
        return Outcome((Draft(
            CODE, f"GPUs on {n.name} failed in hardware ({', '.join(faults)}); the device "
            "plugin marked them unhealthy.", repair_fix(n.name, faults),
            (n.ref, *([st.ref] if st else [])), tuple(ev), conditions=gone),))
    w = n.where_for(st, n.plugin_container(st) or "") if st else n.where
    return Outcome((n.draft(CODE, ev, st=st, conditions=gone, where=w,
                            actions=[("restart-device-plugin", n.name)]),))


@words(CODE)
def _unhealthy(w: Where) -> Words:
    n = w.node
    return Words(
        f"The device plugin marked GPUs on {n} unhealthy.",
        Fix("Restart the device plugin: it checks device health when it starts. Xid 79 "
            "(fallen off the bus) or 48/63/64/94/95 (ECC) in the node's kernel log: drain the "
            "node and reset or replace the GPU.",
            (*(restart_pod(w) or restart_plugin(w)),
             node_shell(n, "dmesg | grep -i xid; nvidia-smi -q | grep -i -A2 retired"),
             drain(n))))
