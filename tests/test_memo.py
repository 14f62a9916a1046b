"""handlers/memo.py: a value over a list of API objects is worked out again only when the list
holds other objects."""

from __future__ import annotations

from collections.abc import Sequence

from handlers.memo import LastFor
from handlers.view import Obj


def _node(name: str, uid: bool = True) -> Obj:
    return {"metadata": {"name": name, **({"uid": f"uid-{name}"} if uid else {})}}


def test_the_same_objects_give_the_kept_value_and_a_replaced_one_a_new_value() -> None:
    calls: list[int] = []

    def names(nodes: Sequence[Obj]) -> tuple[str, ...]:
        calls.append(len(nodes))
        return tuple(n["metadata"]["name"] for n in nodes)

    memo = LastFor(names)
    a, b = _node("a"), _node("b")
    first = memo([a, b])
    assert memo([a, b]) is first and calls == [2]  # another list of the same objects
    b2 = _node("b")  # b's newer version: equal, but another object
    assert memo([a, b2]) == ("a", "b") and calls == [2, 2]
    assert memo([a]) == ("a",) and calls == [2, 2, 1]


def test_objects_without_a_uid_are_never_kept() -> None:
    calls: list[int] = []

    def count(nodes: Sequence[Obj]) -> int:
        calls.append(1)
        return len(nodes)

    memo = LastFor(count)
    edited = [_node("a", uid=False)]
    memo(edited)
    edited[0]["metadata"]["name"] = "b"  # a fixture or what-if copy, changed in place
    memo(edited)
    assert len(calls) == 2
