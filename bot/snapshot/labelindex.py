"""Objects by the value of a label, so that a label selector over every pod of a large
snapshot reads the few pods it can match instead of testing all of them."""

from __future__ import annotations

from collections.abc import Sequence

from handlers.kube.selectors import parse_label_selector
from handlers.view import Obj


class LabelIndex:
    """Positions in one list of objects by label key and value; a key is indexed the first
    time a selector asks for it (a diagnosis asks for a handful of keys)."""

    def __init__(self, objs: Sequence[Obj]) -> None:
        self._objs = objs
        self._by_key: dict[str, dict[str, list[int]]] = {}

    def candidates(self, selector: str) -> Sequence[Obj]:
        """The objects that can match ``selector``, in list order: those whose label has a
        value one of its positive requirements (``k=v``, ``k in (...)``) names; every
        object when it has none. The caller still matches the whole selector."""
        for req in parse_label_selector(selector):
            if req.op in ("=", "in"):
                by_value = self._key(req.key)
                positions = sorted(p for v in req.values for p in by_value.get(v, ()))
                return [self._objs[p] for p in positions]
        return self._objs

    def _key(self, key: str) -> dict[str, list[int]]:
        by_value = self._by_key.get(key)
        if by_value is None:
            by_value = self._by_key[key] = {}
            for position, obj in enumerate(self._objs):
                labels = obj["metadata"].get("labels")
                value = labels.get(key) if labels.__class__ is dict else None
                if value is not None:
                    by_value.setdefault(value, []).append(position)
        return by_value
