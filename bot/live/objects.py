"""What is done to every object read from the API before anyone sees it."""

from __future__ import annotations

from bot.snapshot.events import normalise_event
from handlers.view import Obj

from .kinds import KindInfo


def prepare(info: KindInfo, items: list[Obj], api_version: str = "") -> list[Obj]:
    """In place, and returned: ``kind`` and ``apiVersion`` set (list items lack them),
    ``metadata.managedFields`` dropped (``kubectl get -o json`` hides them too), a Node's
    ``status.images`` dropped (unread, a third of its size), Events
    filled in to the core/v1 shape (``bot.snapshot.events.normalise_event``)."""
    version = api_version or info.api_version
    for item in items:
        item["kind"] = info.kind
        item["apiVersion"] = version
        meta = item.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        if info.kind == "Node" and isinstance(item.get("status"), dict):
            # The node's image list is a third of its JSON and no diagnosis reads it.
            item["status"].pop("images", None)
        if info.kind == "Event":
            normalise_event(item)
    return items
