"""Objects by label, so that a label selector over every pod of a large snapshot reads
the few pods it can match instead of testing all of them."""

from __future__ import annotations

from collections.abc import Sequence

from handlers.kube.selectors import parse_label_selector
from handlers.view import Obj


class LabelIndex:
    """Positions in one list of objects by (label key, value), built on the first ask in
    one pass over every label: a pass per key asked for missed the cache at every object
    each time (five keys of 30,000 pods: 0.2 s against 0.07 s)."""

    def __init__(self, objs: Sequence[Obj]) -> None:
        self._objs = objs
        self._positions: dict[tuple[str, str], list[int]] | None = None

    def candidates(self, selector: str) -> Sequence[Obj]:
        """The objects that can match ``selector``, in list order: those with a label
        value one of its positive requirements (``k=v``, ``k in (...)``) names; every
        object when it has none. The caller still matches the whole selector."""
        for req in parse_label_selector(selector):
            if req.op in ("=", "in"):
                index = self._index()
                positions = sorted(p for v in req.values for p in index.get((req.key, v), ()))
                return [self._objs[p] for p in positions]
        return self._objs

    def _index(self) -> dict[tuple[str, str], list[int]]:
        if self._positions is None:
            index: dict[tuple[str, str], list[int]] = {}
            for position, obj in enumerate(self._objs):
                labels = obj["metadata"].get("labels")
                if labels.__class__ is dict:
                    for pair in labels.items():
                        found = index.get(pair)
                        if found is None:
                            index[pair] = [position]
                        else:
                            found.append(position)
            self._positions = index
        return self._positions
