"""A failed pod's container-hook "no driver" lines on a node without GPUs: the hook ran
where it should not (``handlers.chain.hook_context``), a runtime fault, not the driver."""

from __future__ import annotations

from handlers.chain import hook_context
from handlers.gpu import requests_gpu
from handlers.kube.workload import of_controller
from handlers.model import Finding, ObjectRef
from handlers.pending.context import PendingContext
from handlers.view import Obj

_MAX_EVIDENCE = 2


def misplaced(ctx: PendingContext, node: Obj | None,
              found: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[Finding]]:
    """``found`` without the hook's driver lines, and the runtime finding they prove, when
    the pod asks no GPU and its node has none; else ``found`` unchanged."""
    hook = [ln for c, ln in found if hook_context.hook_driver_line(c, ln)]
    if not hook or node is None or requests_gpu(ctx.pod) or \
            not hook_context.without_gpus(node):
        return found, []
    name = str((node.get("metadata") or {}).get("name") or "")
    kept = [(c, ln) for c, ln in found if not hook_context.hook_driver_line(c, ln)]
    env = [f"container {c.get('name')}: env NVIDIA_VISIBLE_DEVICES={e.get('value')}"
           for c in (ctx.pod.get("spec") or {}).get("containers") or []
           for e in c.get("env") or [] if e.get("name") == "NVIDIA_VISIBLE_DEVICES"]
    return kept, [Finding(
        hook_context.CODE, hook_context.summary(name),
        (ObjectRef("Pod", ctx.pod_name, ctx.namespace), ObjectRef("Node", name)),
        (*hook[:_MAX_EVIDENCE], hook_context.node_evidence(node), "the pod requests no GPU",
         *env),
        hook_context.fix(name, hook_context.opt_out(
            of_controller(ctx.controller, ctx.pod, ctx.reader.get), ctx.pod)),
    )]
