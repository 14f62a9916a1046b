"""Time-slicing config: the sharing config a node asks for (label
``nvidia.com/device-plugin.config``, or the ClusterPolicy's default) exists in the plugin's
ConfigMap, parses, and the plugin applied it (``nvidia.com/gpu.replicas``, capacity = GPUs x
replicas). The ConfigMap itself is read once for the cluster (``handlers/chain/sharing.py``).
"""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.fixtext import Where, logs_cmd, restart_plugin, restart_pod
from handlers.chain.outcome import Draft, Outcome, Retell
from handlers.chain.sharing import REPLICAS_LABEL, TIME_SLICING_DOCS, replicas_of
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.gpu import DEVICE_PLUGIN_CONFIG_LABEL, seen_gpu_count
from handlers.kube.commands import kubectl
from handlers.ledger import physical_count
from handlers.model import Fix, ObjectRef

CODE = "TIMESLICING_CONFIG_INVALID"
CHECK = "time-slicing config"


@stage("sharing", after=("plugin", "registration"), check=CHECK)
def sharing(n: NodeFacts, before: Before) -> Outcome:
    cfg = n.ctx.sharing
    if cfg is None:
        return Outcome(passed=True)
    if cfg.configmap is None:
        return Outcome()  # reported once for the cluster (configmap missing), or not checked
    key, why = cfg.key_for(n.lab)
    if key is None:
        return Outcome(passed=True)
    cm_ref = ObjectRef("ConfigMap", cfg.name, cfg.namespace)
    keys = sorted(list(cfg.entries) + list(cfg.errors))
    look = (kubectl("get", "node", n.name, "-L",
                    f"{DEVICE_PLUGIN_CONFIG_LABEL},{REPLICAS_LABEL}"),
            kubectl("get", "configmap", cfg.name, "-o", "yaml", namespace=cfg.namespace))
    if key not in cfg.entries and key not in cfg.errors:
        if why == "label":
            fix = Fix(f"Label the node with a key configmap {cfg.label} has "
                      f"({', '.join(keys) or 'it has none'}).",
                      ((kubectl("label", "node", n.name,
                                f"{DEVICE_PLUGIN_CONFIG_LABEL}={keys[0]}", "--overwrite"),)
                       if keys else ()) + look, docs=(TIME_SLICING_DOCS,))
        else:
            fix = Fix(f"Add key {key!r} to configmap {cfg.label} or fix the default in "
                      f"{cfg.source}.", look, docs=(TIME_SLICING_DOCS,))
        src = (f"{DEVICE_PLUGIN_CONFIG_LABEL}={key}" if why == "label"
               else f"default config {key!r} ({cfg.source})")
        summary = (f"{n.name} asks for sharing config {key!r}, which configmap "
                   f"{cfg.label} does not have.")
        return _precise(Draft(CODE, summary, fix, (n.ref, cm_ref), (
            src, f"configmap {cfg.label} keys: {', '.join(keys) or 'none'}", cfg.source)))
    if key in cfg.errors:
        summary = f"The sharing config {key!r} that {n.name} uses does not parse."
        fix = Fix(f"Make key {key} valid YAML, then restart the plugin.",
                  (kubectl("edit", "configmap", cfg.name, namespace=cfg.namespace),
                   *restart_plugin(n.where), *look), docs=(TIME_SLICING_DOCS,))
        return _precise(Draft(CODE, summary, fix, (n.ref, cm_ref), (
            f"configmap {cfg.label} key {key}: {cfg.errors[key]}",
            f"{n.name} uses key {key} ({why})")))
    if not n.plugin_ok:
        return Outcome()  # the plugin is down: it applied nothing, and its own finding says why
    plugin = n.plugins[0] if n.plugins else None
    label_replicas = n.lab.get(REPLICAS_LABEL)
    # The plugin shares the GPUs the driver sees: one that fell off the bus is not shared.
    physical = seen_gpu_count(n.node) or physical_count(n.node)
    for r in replicas_of(cfg.entries[key]):
        ev: list[str] = []
        cap = n.cap.get(r.resource)
        if label_replicas != str(r.replicas):
            ev.append(f"{REPLICAS_LABEL}=" + (label_replicas or "<absent>")
                      + f" (config {key!r} sets replicas: {r.replicas})")
        if physical and (cap or 0) != physical * r.replicas:
            ev.append(f"capacity {r.resource}: " + (f"{cap:g}" if cap is not None else "absent")
                      + f" (expected {physical * r.replicas} = {physical} GPUs x "
                      f"{r.replicas})")
        if ev:
            ev.insert(0, f"configmap {cfg.label} key {key} ({why}): {r.strategy} "
                         f"{r.resource.replace('.shared', '')} replicas {r.replicas}")
            fix = Fix("Restart the device plugin: it reads its config when it starts.",
                      (*(restart_pod(n.where_for(plugin)) if plugin else ()), *look),
                      docs=(TIME_SLICING_DOCS,))
            return Outcome((Draft(
                CODE, f"Time-slicing for {n.name} is configured but not applied.", fix,
                (n.ref, cm_ref), tuple(ev), (("restart-device-plugin", n.name),),
                frozenset({"not-applied"})),))
    return Outcome(passed=True)


def _precise(d: Draft) -> Outcome:
    """The config's own words say more than a plugin log line's generic "invalid config"
    finding of the same code, which they replace."""
    return Outcome((d,), (Retell(CODE, d.summary, d.fix),))


@words(CODE)
def _invalid(w: Where) -> Words:
    return Words(f"The GPU sharing config for {w.node} is invalid.",
                 Fix("The plugin's log says what it could not read in its config.",
                     (*logs_cmd(w, previous=False),
                      kubectl("get", "node", w.node, "-L",
                              f"{DEVICE_PLUGIN_CONFIG_LABEL},{REPLICAS_LABEL}")),
                     docs=(TIME_SLICING_DOCS,)))
