"""The few API calls the actions make, straight to the API server (never a cache: a
verification must see the cluster as it is now).

Reads and writes go through ``bot.live``'s ``Transport`` (the kubeconfig's pool and
timeouts); failures are ``bot.live`` errors, and a 403 is an ``ApiForbidden`` whose message
names the RBAC rule that is missing.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

from bot.live.errors import LiveError, Op
from bot.live.kinds import KINDS
from bot.live.transport import Transport
from handlers.gpu import is_device_plugin_pod
from handlers.view import Obj

log = logging.getLogger("gpubot.actions")

_POD, _NODE, _EVENT = KINDS["Pod"], KINDS["Node"], KINDS["Event"]
MERGE_PATCH = "application/merge-patch+json"
COMPONENT = "gpubot"


class Cluster:
    def __init__(self, api_client: Any, *, timeout: float = 10.0,
                 plugin_namespace: str | None = None, plugin_selector: str | None = None,
                 transport: Transport | None = None) -> None:
        self.transport = transport or Transport(api_client, timeout=timeout)
        self.plugin_namespace = plugin_namespace or None
        self.plugin_selector = plugin_selector or None

    # -- reads ------------------------------------------------------------------------------

    def node(self, name: str) -> Obj | None:
        op = Op("get", "Node", "", "nodes", None, False, name=name)
        resp = self.transport.get(op, _NODE.path(None, name), accept=(404,))
        return None if resp.status == 404 else self.transport.decode(op, resp.data)

    def pod(self, namespace: str, name: str) -> Obj | None:
        op = Op("get", "Pod", "", "pods", namespace, True, name=name)
        resp = self.transport.get(op, _POD.path(namespace, name), accept=(404,))
        return None if resp.status == 404 else self.transport.decode(op, resp.data)

    def pods(self, namespace: str | None = None, *, node: str | None = None,
             selector: str | None = None) -> list[Obj]:
        query: dict[str, str] = {}
        if node:
            query["fieldSelector"] = f"spec.nodeName={node}"
        if selector:
            query["labelSelector"] = selector
        op = Op("list", "Pod", "", "pods", namespace, True)
        found = self.transport.list_all(op, _POD.path(namespace), query)
        return found[0] if found else []

    def plugin_pods(self, node: str | None = None) -> list[Obj]:
        """The device-plugin pods (on ``node``), not being deleted. Found as the diagnosis
        finds them (``handlers.gpu.is_device_plugin_pod``) unless the config names a label
        selector for a layout it does not know."""
        pods = self.pods(self.plugin_namespace, node=node, selector=self.plugin_selector)
        return [p for p in pods
                if (self.plugin_selector or is_device_plugin_pod(p))
                and not (p.get("metadata") or {}).get("deletionTimestamp")]

    # -- writes -----------------------------------------------------------------------------

    def delete_pod(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> None:
        """DELETE with a UID precondition (409 if the pod was replaced meanwhile)."""
        op = Op("delete", "Pod", "", "pods", namespace, True, name=name)
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1",
                                "preconditions": {"uid": uid}}
        query = {"dryRun": "All"} if dry_run else None
        self.transport.send(op, "DELETE", _POD.path(namespace, name), query=query, body=body)

    def set_unschedulable(self, node: str, value: bool, *, dry_run: bool) -> Obj:
        op = Op("patch", "Node", "", "nodes", None, False, name=node)
        query = {"dryRun": "All"} if dry_run else None
        resp = self.transport.send(op, "PATCH", _NODE.path(None, node), query=query,
                                   body={"spec": {"unschedulable": value or None}},
                                   content_type=MERGE_PATCH)
        return self.transport.decode(op, resp.data)

    def event(self, obj: Obj, reason: str, message: str, *, warning: bool = False) -> bool:
        """A core/v1 Event on ``obj`` (best effort: False, logged, when it cannot be
        written; the audit record in the store does not depend on it)."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name', 'gpubot')}.{time.time_ns():x}",
                         "namespace": namespace},
            "involvedObject": {"apiVersion": obj.get("apiVersion", "v1"),
                               "kind": obj.get("kind", ""), "name": meta.get("name", ""),
                               "namespace": meta.get("namespace") or "",
                               "uid": meta.get("uid", "")},
            "reason": reason, "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT, "action": reason,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        op = Op("create", "Event", "", "events", namespace, True)
        try:
            self.transport.send(op, "POST", _EVENT.path(namespace), body=body)
        except LiveError as err:
            log.warning("cannot write the audit event on %s %s: %s", obj.get("kind"),
                        meta.get("name"), err)
            return False
        return True
