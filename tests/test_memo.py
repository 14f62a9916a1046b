"""handlers/memo.py: what warm diagnoses remember is owned by one cluster state (a view's
``Memos``), reached through the diagnosis's Reader; two views never share or evict each
other's entries, and nothing is remembered outside a diagnosis."""

from __future__ import annotations

import contextvars
import gc
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bot.live import LiveView, WatchCache, open_live_view
from bot.slack.pool import Deadline
from bot.slack.reads import GuardedView, SharedReads
from bot.snapshot import load_snapshot
from handlers import why_pending
from handlers.gpu import _TRAITS
from handlers.kube.resources import _PODS
from handlers.memo import Kept, LastFor, Memos, Table, current
from handlers.scheduler.nodeinfo import _NODES, NodeInfo
from handlers.target import parse_target
from handlers.view import ClusterView, Obj, Reader
from tests.fake_kube import FakeKube

ROOT = Path(__file__).resolve().parents[1]
CRASHLOOP = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
FRAGMENTED = ROOT / "examples" / "gpu-fragmentation"


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


class _Bare:
    """A ClusterView with no memos of its own (a test's fake): one per Reader."""

    source = "bare"


def test_a_reader_makes_its_memos_current_while_it_lives() -> None:
    def run() -> None:
        assert current() is None  # no diagnosis: nothing is remembered
        view = load_snapshot(CRASHLOOP)
        reader = Reader(view)
        assert reader.memos is view.memos and current() is view.memos
        again = Reader(view)  # within its diagnosis (warm's): the same memos stay current
        del again
        assert current() is view.memos
        bare = Reader(_bare())  # another view's diagnosis
        assert bare.memos is not view.memos and current() is bare.memos
        del bare  # its memos went with it
        assert current() is None
        del reader
        assert current() is None  # the view lives on, but no diagnosis runs

    contextvars.Context().run(run)


def _bare() -> ClusterView:
    view: ClusterView = _Bare()  # type: ignore[assignment]
    return view


def test_each_thread_sees_its_own_diagnosis() -> None:
    views = {"a": load_snapshot(CRASHLOOP), "b": load_snapshot(FRAGMENTED)}
    seen: dict[str, Memos | None] = {}
    made, looked = threading.Barrier(2), threading.Barrier(2)

    def diagnose(name: str) -> None:
        reader = Reader(views[name])
        made.wait(5)  # both Readers made before either looks
        seen[name] = current()
        looked.wait(5)
        del reader

    threads = [threading.Thread(target=diagnose, args=(name,)) for name in views]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {name: view.memos for name, view in views.items()}


def _infos(memos: Memos) -> dict[str, NodeInfo]:
    """The NodeInfos ``memos`` keeps, by node name."""
    return dict(_NODES.of(memos) or {})


def _remembered(memos: Memos) -> list[Mapping[str, Any]]:
    """Every API object ``memos`` holds an entry for."""
    return ([i.node for i in (_NODES.of(memos) or {}).values()]
            + [f.pod for f in (_PODS.of(memos) or {}).values()]
            + [t.node for t in (_TRAITS.of(memos) or {}).values()])


def _owns(view: ClusterView, memos: Memos) -> bool:
    mine = {id(o) for kind in ("Node", "Pod") for o in view.list(kind)}
    return all(id(o) in mine for o in _remembered(memos))


def test_two_snapshot_views_keep_their_own_entries() -> None:
    # Two clusters whose nodes have the same names (the same capture loaded twice), and a
    # third: diagnoses in turn leave each view's entries alone.
    a, twin, other = load_snapshot(CRASHLOOP), load_snapshot(CRASHLOOP), load_snapshot(FRAGMENTED)
    target = parse_target("ml-team/train-0")
    first = why_pending.run(Reader(a), target)
    infos = _infos(a.memos)
    assert infos
    why_pending.run(Reader(twin), target)
    why_pending.run(Reader(other), parse_target("ml-team/llm-sft-5f8d7c6b9-wq2vx"))
    again = why_pending.run(Reader(a), target)
    assert [f.code for f in again.findings] == [f.code for f in first.findings]
    kept = _infos(a.memos)
    assert all(kept.get(name) is info for name, info in infos.items())  # not evicted
    twins = _infos(twin.memos)
    assert twins.keys() == infos.keys() and all(twins[n] is not infos[n] for n in infos)
    for view in (a, twin, other):
        assert view.memos.entries() and _owns(view, view.memos)


def test_two_live_views_keep_their_own_entries(tmp_path: Path) -> None:
    # Two clusters with the same nodes and uids (one capture served twice): in one process,
    # each watch cache's memos keep its own objects, and go when its view is dropped.
    with FakeKube(CRASHLOOP, daemonset_delay=0.1) as one, \
            FakeKube(CRASHLOOP, daemonset_delay=0.1) as two:
        views = [open_live_view(str(fk.write_kubeconfig(tmp_path / f"k{i}")), timeout=10)
                 for i, fk in enumerate((one, two))]
        caches = [v.watch(("Node", "Pod", "Event", "DaemonSet")) for v in views]
        try:
            assert all(c.wait_synced(30) for c in caches)
            target = parse_target("ml-team/train-0")
            why_pending.run(Reader(views[0]), target)
            infos = _infos(caches[0].memos)
            assert infos and views[0].memos is caches[0].memos
            why_pending.run(Reader(views[1]), target)
            why_pending.run(Reader(views[0]), target)
            kept = _infos(caches[0].memos)
            assert all(kept.get(n) is i for n, i in infos.items())  # not evicted
            assert all(c.memos.entries() and _owns(v, c.memos)
                       for v, c in zip(views, caches, strict=True))
        finally:
            _close(views, caches)
        gone = [weakref.ref(c.memos) for c in caches]
        gc.disable()  # freed by reference counting alone
        try:
            del views, caches
            assert [m() for m in gone] == [None, None]
        finally:
            gc.enable()


def _close(views: list[LiveView], caches: list[WatchCache]) -> None:
    for cache in caches:
        cache.stop()
    for view in views:
        view.close()


def test_the_bots_wrapped_views_hand_out_the_wrapped_views_memos() -> None:
    # gpubot serve diagnoses through GuardedView(SharedReads(LiveView)): a wrapper that
    # dropped the memos would start every diagnosis cold.
    view = load_snapshot(CRASHLOOP)
    assert Reader(GuardedView(SharedReads(view), Deadline(60))).memos is view.memos


def test_a_live_view_without_a_cache_keeps_nothing_between_diagnoses(tmp_path: Path) -> None:
    with FakeKube(CRASHLOOP, daemonset_delay=0.1) as fk:
        view = open_live_view(str(fk.write_kubeconfig(tmp_path / "k")), timeout=10)
        try:
            assert view.memos is None  # each diagnosis's objects are new: its own memos
            reader = Reader(view)
            why_pending.run(reader, parse_target("ml-team/train-0"))
            assert reader.memos.entries() and Reader(view).memos is not reader.memos
        finally:
            view.close()
