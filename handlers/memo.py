"""What warm diagnoses remember, owned by one state of one cluster.

Handlers never change what a view returns, and a watch cache replaces an object when it
changes (never edits it), so what is worked out from an API object (a pod's requests, a
node's NodeInfo) holds for as long as the view hands out that very object. A ``Memos`` keeps
those results for one cluster state: a ``SnapshotView`` has one for ever, a ``LiveView``
its watch cache's (it lives as long as the cache), and a view without one (no watch cache,
a test's fake) gets one per ``Reader``, that is per diagnosis. Nothing but its owner and the
Readers over it refers to a ``Memos``, so two views never share entries or evict each
other's, and a view that is dropped frees its memos by reference counting (no cycle passes
through one).

Handlers reach it through their ``Reader`` (``reader.memos``). Pure helpers with no Reader
at hand (a pod's requests, a node's GPU traits, its NodeInfo), called from everywhere,
reach it through ``current()``: the memos of the Reader made last in this context (each
thread has its own, so the bot's concurrent diagnoses each see their own; see ``use``) for
as long as that Reader lives, which is one diagnosis (it is held weakly, so that nothing
outlives the diagnosis through it). Threading a parameter through every such helper would change the
signature of half the handlers for one lookup each. Outside a diagnosis (a test calling a
helper directly, an action) nothing is remembered.

Each module declares its slots (``Table``, ``Value``, ``LastFor``) as module constants that
hold no state themselves: the state is in each ``Memos``. Only API objects (with
``metadata.uid``) are remembered: templates, fixtures and what-if copies may be edited in
place.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any, Generic, Protocol, TypeVar

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

_Obj = dict[str, Any]  # handlers.view.Obj (which imports this module)


class Memos:
    """What is remembered of one cluster state, slot by slot (see ``Table``, ``Value``,
    ``LastFor``). Thread-safe as dicts are: several diagnoses use it at once."""

    __slots__ = ("__weakref__", "_slots")

    def __init__(self) -> None:
        self._slots: dict[object, Any] = {}

    def entries(self) -> int:
        """Entries kept, over every slot (a table's count each)."""
        return sum(len(v) if isinstance(v, Kept) else 1 for v in self._slots.values())


class HasMemos(Protocol):
    """What ``use`` takes: a Reader."""

    memos: Memos


_CURRENT: ContextVar[weakref.ref[HasMemos] | None] = ContextVar("gpubot_memos", default=None)


def use(diagnosis: HasMemos) -> None:
    """Make ``diagnosis.memos`` current in this context while ``diagnosis`` lives (a Reader
    calls it when it is made). A live current Reader over the same memos stays current: a
    Reader made within its diagnosis (``warm()`` diagnoses pods within its own) would
    otherwise leave it none once it is dropped."""
    ref = _CURRENT.get()
    now = None if ref is None else ref()
    if now is None or now.memos is not diagnosis.memos:
        _CURRENT.set(weakref.ref(diagnosis))


def current() -> Memos | None:
    """The memos of the diagnosis running in this context (see ``use``), if any."""
    ref = _CURRENT.get()
    diagnosis = None if ref is None else ref()
    return None if diagnosis is None else diagnosis.memos


class Kept(dict[K, V]):
    """A table of one ``Memos``: an entry per uid or name, a newer version of an object
    taking its old version's entry. Emptied at ``limit`` entries: more means entries of
    objects that have gone away piled up (a deleted pod's is never replaced)."""

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def keep(self, key: K, value: V) -> None:
        if len(self) >= self.limit:
            self.clear()
        self[key] = value


class Table(Generic[K, V]):
    """A slot holding a ``Kept`` table in each ``Memos``."""

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def of(self, memos: Memos | None = None) -> Kept[K, V] | None:
        """This table in ``memos``, else in ``current()``; None when there is none."""
        if memos is None:  # current(), inlined: thousands of calls a diagnosis
            ref = _CURRENT.get()
            diagnosis = None if ref is None else ref()
            if diagnosis is None:
                return None
            memos = diagnosis.memos
        slots = memos._slots
        try:
            found: Kept[K, V] = slots[self]
        except KeyError:  # two threads may both get here: setdefault keeps one table
            found = slots.setdefault(self, Kept(self.limit))
        return found


class Value(Generic[T]):
    """A slot holding one value in each ``Memos``, replaced as a whole (so that a
    concurrent diagnosis never sees half of it)."""

    __slots__ = ()

    def get(self, memos: Memos) -> T | None:
        found: T | None = memos._slots.get(self)
        return found

    def put(self, memos: Memos, value: T) -> None:
        memos._slots[self] = value


class LastFor(Generic[T]):
    """``compute(objs, memos)``, kept in ``memos`` and handed out again while ``objs`` are
    the same objects; the value is shared between callers, who must not change it.

    Between two warm diagnoses most kinds do not change: the watch cache hands out the same
    node objects (a heartbeat keeps the cached node, see ``bot/live/cache.py``), so whatever
    is worked out over all of them (their traits, the newest driver) is the same too.
    Comparing the objects' ids costs a hundredth of working it out again over 5,000 nodes.
    """

    def __init__(self, compute: Callable[[Sequence[_Obj], Memos | None], T]) -> None:
        self._compute = compute
        # In each Memos: (ids, the objects: alive while kept, so no other object can take
        # their ids, value).
        self._last: Value[tuple[tuple[int, ...], tuple[_Obj, ...], T]] = Value()

    def __call__(self, objs: Sequence[_Obj], memos: Memos | None = None) -> T:
        if memos is None:
            memos = current()
        if memos is None:
            return self._compute(objs, None)
        ids = tuple(map(id, objs))
        last = self._last.get(memos)
        if last is not None and last[0] == ids:
            return last[2]
        value = self._compute(objs, memos)
        if all((o.get("metadata") or {}).get("uid") for o in objs):
            self._last.put(memos, (ids, tuple(objs), value))
        return value

    def kept(self, memos: Memos) -> T | None:
        """The value kept in ``memos``, if any."""
        last = self._last.get(memos)
        return None if last is None else last[2]
