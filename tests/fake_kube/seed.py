"""Objects and logs of a snapshot (any format ``bot.snapshot.load_snapshot`` reads)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from handlers.view import ViewError

from .resources import Registry
from .store import Obj

LogSource = Callable[[str, str, str], str | None]


def snapshot_objects(path: str | Path,
                     registry: Registry | None = None,
                     ) -> tuple[list[Obj], LogSource, datetime]:
    """Every object of a kind the fake serves, a function giving container logs, and the
    snapshot's moment (its newest timestamp)."""
    from bot.snapshot import load_snapshot

    view = load_snapshot(path)
    objs: list[Obj] = []
    for rt in (registry or Registry()).storages():
        if rt.kind not in view.kinds:
            continue
        try:
            found = view.list(rt.kind)
        except ViewError:
            continue
        for obj in found:
            if "kind" not in obj:
                obj = {"kind": rt.kind, **obj}
            objs.append(obj)

    def logs(namespace: str, pod: str, container: str) -> str | None:
        return view.logs(namespace, pod, container)

    return objs, logs, view.now()
