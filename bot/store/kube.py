"""``KubeStore``: the store as ConfigMaps in the bot's namespace, for several replicas.

One ConfigMap per record, named ``gpubot-<collection>-<sha256(key)[:40]>`` (keys are free
text; names are not), labelled ``gpubot.io/store=<collection>``; the key and the creation
time are annotations, the data is JSON under ``data["record.json"]``. The apiserver gives
the atomicity: a POST of an existing name is 409 AlreadyExists (``create`` False); a merge
patch carrying ``metadata.resourceVersion`` is 409 Conflict when the object changed since
(``update`` False). The record's version is its resourceVersion.

Requests go through ``bot.live``'s ``Transport`` (the kubeconfig's pool, its timeouts,
its error messages: a 403 names the RBAC rule that is missing). RBAC: ``configmaps``
get, list, create, patch, delete in the bot's namespace.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

from bot.live.errors import LiveError, Op
from bot.live.transport import Transport

from .base import Record, StoreError, check_name

LABEL = "gpubot.io/store"
KEY = "gpubot.io/key"
CREATED = "gpubot.io/created"
UPDATED = "gpubot.io/updated"
DATA = "record.json"
MERGE_PATCH = "application/merge-patch+json"
_T = TypeVar("_T")


class KubeStore:
    def __init__(self, api_client: Any, namespace: str, *, timeout: float = 10.0,
                 transport: Transport | None = None) -> None:
        self.namespace = namespace
        self.transport = transport or Transport(api_client, timeout=timeout)
        self._base = f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps"

    # -- Store --------------------------------------------------------------------------------

    def get(self, collection: str, key: str) -> Record | None:
        check_name(collection, key)
        name = object_name(collection, key)
        resp = self._call("get", name, lambda op: self.transport.get(
            op, f"{self._base}/{name}", accept=(404,)))
        if resp.status == 404:
            return None
        return _record(self.transport.decode(self._op("get", name), resp.data), collection)

    def create(self, collection: str, key: str, data: Mapping[str, Any]) -> bool:
        check_name(collection, key)
        name = object_name(collection, key)
        stamp = _stamp(time.time())
        body = {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": self.namespace,
                         "labels": {LABEL: collection, "app.kubernetes.io/managed-by": "gpubot"},
                         "annotations": {KEY: key, CREATED: stamp, UPDATED: stamp}},
            "data": {DATA: _dumps(data)},
        }
        resp = self._call("create", name, lambda op: self.transport.send(
            op, "POST", self._base, body=body, accept=(409,)))
        return resp.status != 409

    def update(self, collection: str, key: str, data: Mapping[str, Any],
               expected_version: str) -> bool:
        check_name(collection, key)
        name = object_name(collection, key)
        patch = {"metadata": {"resourceVersion": expected_version,
                              "annotations": {UPDATED: _stamp(time.time())}},
                 "data": {DATA: _dumps(data)}}
        resp = self._call("patch", name, lambda op: self.transport.send(
            op, "PATCH", f"{self._base}/{name}", body=patch, content_type=MERGE_PATCH,
            accept=(404, 409)))
        return resp.status not in (404, 409)

    def list(self, collection: str, limit: int = 50) -> list[Record]:
        check_name(collection)
        query = {"labelSelector": f"{LABEL}={collection}"}
        found = self._call("list", None, lambda op: self.transport.list_all(
            op, self._base, query))
        items = found[0] if found else []
        records = [_record(obj, collection) for obj in items]
        records.sort(key=lambda r: (r.created, r.key), reverse=True)
        return records[:max(0, limit)]

    def delete(self, collection: str, key: str, expected_version: str | None = None) -> bool:
        check_name(collection, key)
        name = object_name(collection, key)
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if expected_version is not None:
            body["preconditions"] = {"resourceVersion": expected_version}
        resp = self._call("delete", name, lambda op: self.transport.send(
            op, "DELETE", f"{self._base}/{name}", body=body, accept=(404, 409)))
        return resp.status not in (404, 409)

    def close(self) -> None:
        pass  # the ApiClient belongs to whoever made it

    # -- plumbing ---------------------------------------------------------------------------

    def _op(self, verb: str, name: str | None) -> Op:
        return Op(verb, "ConfigMap", "", "configmaps", self.namespace, True, name=name)

    def _call(self, verb: str, name: str | None, fn: Callable[[Op], _T]) -> _T:
        try:
            return fn(self._op(verb, name))
        except LiveError as err:
            raise StoreError(f"store (ConfigMaps in namespace {self.namespace}): {err}") from err

    def __repr__(self) -> str:
        return f"KubeStore(namespace={self.namespace!r}, server={self.transport.server!r})"


def object_name(collection: str, key: str) -> str:
    return f"gpubot-{collection}-{hashlib.sha256(key.encode()).hexdigest()[:40]}"


def _stamp(t: float) -> str:
    return f"{t:.6f}"


def _dumps(data: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(data), separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"store: record data must be JSON: {err}") from err


def _record(obj: Mapping[str, Any], collection: str) -> Record:
    meta = obj.get("metadata") or {}
    notes = meta.get("annotations") or {}
    try:
        data = json.loads((obj.get("data") or {}).get(DATA) or "{}")
        created = float(notes.get(CREATED) or 0)
        updated = float(notes.get(UPDATED) or created)
    except ValueError as err:
        raise StoreError(f"store: ConfigMap {meta.get('name')} is not a gpubot record: "
                         f"{err}") from err
    return Record(collection, str(notes.get(KEY, "")), data if isinstance(data, dict) else {},
                  str(meta.get("resourceVersion", "")), created, updated)
