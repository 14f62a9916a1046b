"""handlers/memo.py: what warm diagnoses remember is kept per cluster state (a ``Memos``); a
value over a list of API objects is worked out again only when the list holds other
objects."""

from __future__ import annotations

from collections.abc import Sequence

from handlers.memo import Kept, LastFor, Memos, Table
from handlers.view import Obj


def _node(name: str, uid: bool = True) -> Obj:
    return {"metadata": {"name": name, **({"uid": f"uid-{name}"} if uid else {})}}


def _names(calls: list[int]) -> LastFor[tuple[str, ...]]:
    def names(nodes: Sequence[Obj], memos: Memos | None) -> tuple[str, ...]:
        calls.append(len(nodes))
        return tuple(n["metadata"]["name"] for n in nodes)

    return LastFor(names)


def test_the_same_objects_give_the_kept_value_and_a_replaced_one_a_new_value() -> None:
    calls: list[int] = []
    memo, memos = _names(calls), Memos()
    a, b = _node("a"), _node("b")
    first = memo([a, b], memos)
    assert memo([a, b], memos) is first and calls == [2]  # another list of the same objects
    b2 = _node("b")  # b's newer version: equal, but another object
    assert memo([a, b2], memos) == ("a", "b") and calls == [2, 2]
    assert memo([a], memos) == ("a",) and calls == [2, 2, 1]
    assert memo.kept(memos) == ("a",)


def test_objects_without_a_uid_are_never_kept() -> None:
    calls: list[int] = []
    memo, memos = _names(calls), Memos()
    edited = [_node("a", uid=False)]
    memo(edited, memos)
    edited[0]["metadata"]["name"] = "b"  # a fixture or what-if copy, changed in place
    assert memo(edited, memos) == ("b",)
    assert len(calls) == 2 and memo.kept(memos) is None and memos.entries() == 0


def test_each_memos_keeps_its_own_value() -> None:
    calls: list[int] = []
    memo, one, other = _names(calls), Memos(), Memos()
    nodes = [_node("a")]
    kept = memo(nodes, one)
    memo([_node("b")], other)  # another cluster's nodes: evicts nothing of ``one``'s
    assert memo(nodes, one) is kept and calls == [1, 1]


def test_a_table_starts_again_at_its_limit() -> None:
    table: Table[str, int] = Table(2)
    memos = Memos()
    kept = table.of(memos)
    assert isinstance(kept, Kept) and table.of(memos) is kept
    kept.keep("a", 1)
    kept.keep("b", 2)
    kept.keep("c", 3)
    assert kept == {"c": 3} and memos.entries() == 1
