"""Nothing a diagnosis works out outlives its Reader, and the Reader is freed as soon as the
diagnosis ends: the bot runs thousands of diagnoses on one watch cache. A memo that kept its
Reader (and so every list the diagnosis read) grew the bot's memory by tens of kilobytes a
diagnosis; a cycle through the Reader kept it (and the pods it read, long replaced in the
cache) until a full collection, which the bot runs rarely (bot.live.cache.settle_gc).
Memos that outlive a diagnosis are kept by the view, keyed by the cluster's objects, and go
with the view (docs/design.md, "Warm diagnoses")."""

from __future__ import annotations

import gc
import weakref

import pytest

from bot.snapshot import load_snapshot
from handlers import doctor, why_pending
from handlers.memo import current
from handlers.scheduler.nodeinfo import _NODES
from handlers.target import parse_target
from handlers.view import Reader
from tests.scenarios import Scenario, load_scenarios

SCENARIOS = load_scenarios()


@pytest.mark.parametrize("s", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_diagnosis_keeps_nothing_of_its_reader(s: Scenario) -> None:
    view = load_snapshot(s.snapshot)
    reader = Reader(view)
    gc.disable()  # freed by reference counting alone: no cycle through the Reader
    try:
        if s.command == "why-pending" and s.target:
            why_pending.run(reader, parse_target(s.target, s.namespace))
        else:
            doctor.run(reader, s.node)
        gone = weakref.ref(reader)
        del reader
        assert gone() is None, [type(r).__name__ for r in gc.get_referrers(gone())]
        assert current() is None  # the diagnosis is over: its memos are not current
        # Dropping the view frees what diagnoses remembered of it, by reference counting.
        memos = weakref.ref(view.memos)
        infos = [weakref.ref(i) for i in (_NODES.of(view.memos) or {}).values()]
        del view
        assert memos() is None, [type(r).__name__ for r in gc.get_referrers(memos())]
        assert all(i() is None for i in infos)
    finally:
        gc.enable()
