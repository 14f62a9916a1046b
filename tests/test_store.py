"""The store contract: every backend passes the same tests (SQLite on a temp file, the
Kubernetes store through the real client against the fake API server over HTTP)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bot.store import AuditLog, Store, StoreError, open_store
from bot.store.kube import KubeStore, object_name
from bot.store.sqlite import SqliteStore
from tests.fake_kube import FakeKube
from tests.fake_kube.fixtures import connect

ROOT = Path(__file__).resolve().parents[1]
NS = "gpubot"
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}

# A factory makes a store; calling it again gives another instance on the same backing
# state (another thread's, process's or replica's view of it; or the bot after a restart).
Factory = Callable[[], Store]


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with FakeKube(objects=[NAMESPACE]) as fk:
        yield fk


@pytest.fixture(params=["sqlite", "kubernetes"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    made: list[Store] = []
    clients: list[Any] = []
    if request.param == "sqlite":
        def factory() -> Store:
            made.append(open_store("sqlite", path=str(tmp_path / "state" / "gpubot.db")))
            return made[-1]
    else:
        fk = request.getfixturevalue("fake")

        def factory() -> Store:
            clients.append(connect(fk, tmp_path, f"kubeconfig-{len(clients)}"))
            made.append(open_store("kubernetes", api_client=clients[-1], namespace=NS,
                                   timeout=5))
            return made[-1]
    yield factory
    for s in made:
        s.close()
    for c in clients:
        c.close()


@pytest.fixture
def store(make: Factory) -> Store:
    return make()


def test_create_is_create_if_absent(store: Store) -> None:
    assert store.get("approvals", "r1") is None
    assert store.create("approvals", "r1", {"state": "pending", "n": 1}) is True
    assert store.create("approvals", "r1", {"state": "other"}) is False
    rec = store.get("approvals", "r1")
    assert rec is not None
    assert (rec.collection, rec.key, rec.data) == ("approvals", "r1", {"state": "pending", "n": 1})
    assert rec.version and rec.created > 0 and rec.updated >= rec.created


def test_update_is_compare_and_swap(store: Store) -> None:
    store.create("approvals", "r1", {"state": "pending"})
    first = store.get("approvals", "r1")
    assert first is not None
    assert store.update("approvals", "r1", {"state": "approved"}, first.version) is True
    second = store.get("approvals", "r1")
    assert second is not None
    assert second.data == {"state": "approved"} and second.version != first.version
    assert second.created == first.created
    # the stale version loses, and leaves the record alone
    assert store.update("approvals", "r1", {"state": "denied"}, first.version) is False
    third = store.get("approvals", "r1")
    assert third is not None and third.data == {"state": "approved"}
    assert third.version == second.version


def test_update_of_a_missing_record_is_false(store: Store) -> None:
    assert store.update("approvals", "nope", {"x": 1}, "1") is False
    assert store.get("approvals", "nope") is None


def test_delete_and_recreate_never_reuse_a_version(store: Store) -> None:
    store.create("alert-threads", "k", {"ts": "1"})
    old = store.get("alert-threads", "k")
    assert old is not None
    assert store.delete("alert-threads", "k", expected_version="stale") is False
    assert store.get("alert-threads", "k") is not None
    assert store.delete("alert-threads", "k", expected_version=old.version) is True
    assert store.delete("alert-threads", "k") is False
    assert store.get("alert-threads", "k") is None
    store.create("alert-threads", "k", {"ts": "2"})
    assert store.update("alert-threads", "k", {"ts": "3"}, old.version) is False
    new = store.get("alert-threads", "k")
    assert new is not None and new.data == {"ts": "2"}


def test_list_newest_first_with_limit_per_collection(store: Store) -> None:
    for i in range(5):
        store.create("audit", f"k{i}", {"i": i})
    store.create("approvals", "other", {"i": 99})
    assert [r.data["i"] for r in store.list("audit", limit=3)] == [4, 3, 2]
    assert [r.key for r in store.list("audit")] == ["k4", "k3", "k2", "k1", "k0"]
    assert [r.key for r in store.list("approvals")] == ["other"]
    assert store.list("alert-threads") == []
    assert store.list("audit", limit=0) == []


def test_free_text_keys_and_unicode_round_trip(store: Store) -> None:
    key = '{}/{severity="critical"}:{alertname="GPUDevicePluginDown", node="gpu-node-7"}'
    data = {"channel": "C1", "ts": "1712.0001", "text": "GPUs back on gpu-node-7 ✓",
            "nested": {"a": [1, 2.5, None, True]}}
    assert store.create("alert-threads", key, data)
    rec = store.get("alert-threads", key)
    assert rec is not None and rec.key == key and rec.data == data
    assert [r.key for r in store.list("alert-threads")] == [key]


def test_bad_names_and_data_are_refused(store: Store) -> None:
    with pytest.raises(ValueError):
        store.create("Bad_Collection", "k", {})
    with pytest.raises(ValueError):
        store.create("audit", "", {})
    with pytest.raises(ValueError):
        store.create("audit", "k", {"when": object()})
    assert store.get("audit", "k") is None


def test_records_survive_a_new_instance(make: Factory) -> None:
    """A restart (or another replica) sees what was written, with the same version."""
    first = make()
    first.create("approvals", "r1", {"state": "pending"})
    rec = first.get("approvals", "r1")
    first.close()
    again = make()
    assert again.get("approvals", "r1") == rec
    assert rec is not None and again.update("approvals", "r1", {"state": "x"}, rec.version)


def test_one_winner_among_concurrent_creates_and_updates(make: Factory) -> None:
    """20 threads on 2 instances race for one key, then for one version: one wins each."""
    stores = [make(), make()]
    barrier = threading.Barrier(20)

    def create(i: int) -> bool:
        barrier.wait()
        return stores[i % 2].create("approvals", "race", {"by": i})

    with ThreadPoolExecutor(20) as pool:
        assert sum(pool.map(create, range(20))) == 1
    rec = stores[0].get("approvals", "race")
    assert rec is not None

    def update(i: int) -> bool:
        barrier.wait()
        return stores[i % 2].update("approvals", "race", {"won": i}, rec.version)

    with ThreadPoolExecutor(20) as pool:
        wins = list(pool.map(update, range(20)))
    assert sum(wins) == 1
    final = stores[1].get("approvals", "race")
    assert final is not None and final.data == {"won": wins.index(True)}


def test_audit_log_appends_and_lists_newest_first(store: Store) -> None:
    log = AuditLog(store, keep=3, prune_every=100)
    keys = [log.append({"n": i}) for i in range(5)]
    assert keys == sorted(keys) and len(set(keys)) == 5
    assert [r.data["n"] for r in log.last(2)] == [4, 3]
    assert log.prune() == 2
    assert [r.data["n"] for r in log.last(10)] == [4, 3, 2]


def test_audit_log_prunes_as_it_goes(store: Store) -> None:
    log = AuditLog(store, keep=2, prune_every=3)
    for i in range(6):
        log.append({"n": i})
    assert [r.data["n"] for r in log.last(10)] == [5, 4]


# -- backend specifics -----------------------------------------------------------------------


_RACE = """
import sys
from bot.store.sqlite import SqliteStore
s = SqliteStore(sys.argv[1])
sys.stdout.write("1" if s.update("approvals", "r", {"by": sys.argv[2]}, sys.argv[3]) else "0")
"""


def test_sqlite_one_winner_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "gpubot.db"
    store = SqliteStore(path)
    store.create("approvals", "r", {"state": "pending"})
    rec = store.get("approvals", "r")
    assert rec is not None
    procs = [subprocess.Popen([sys.executable, "-c", _RACE, str(path), str(i), rec.version],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True) for i in range(6)]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(outs) == ["0"] * 5 + ["1"]
    final = store.get("approvals", "r")
    assert final is not None and final.data == {"by": str(outs.index("1"))}
    store.close()


def test_sqlite_unusable_path_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="file"):
        SqliteStore(tmp_path / "file" / "gpubot.db")
    with pytest.raises(StoreError, match="path"):
        open_store("sqlite")
    with pytest.raises(StoreError, match="unknown store"):
        open_store("redis")


def test_kube_store_writes_configmaps_in_its_namespace(fake: FakeKube, tmp_path: Path) -> None:
    client = connect(fake, tmp_path)
    try:
        store = KubeStore(client, NS)
        store.create("approvals", "r1", {"state": "pending"})
        cm = fake.store.find("ConfigMap", object_name("approvals", "r1"), NS)
        assert cm is not None
        assert cm["metadata"]["labels"]["gpubot.io/store"] == "approvals"
        assert cm["metadata"]["annotations"]["gpubot.io/key"] == "r1"
        rec = store.get("approvals", "r1")
        assert rec is not None and rec.version == cm["metadata"]["resourceVersion"]
        writes = [r for r in fake.requests if r.method != "GET"]
        assert [(r.method, r.status) for r in writes] == [("POST", 201)]
        assert store.create("approvals", "r1", {}) is False
        assert store.update("approvals", "r1", {"state": "x"}, "1") is False
        assert [(r.method, r.status) for r in fake.requests if r.method != "GET"][1:] == [
            ("POST", 409), ("PATCH", 409)]
    finally:
        client.close()


def test_kube_store_rbac_denial_names_the_rule(fake: FakeKube, tmp_path: Path) -> None:
    client = connect(fake, tmp_path)
    try:
        fake.faults.forbid("configmaps", verb="create", namespace=NS)
        with pytest.raises(StoreError) as err:
            KubeStore(client, NS).create("approvals", "r1", {})
        text = str(err.value)
        assert 'resources: ["configmaps"], verbs: ["create"]' in text
        assert NS in text
    finally:
        client.close()


def test_kube_store_missing_namespace_is_a_store_error(fake: FakeKube, tmp_path: Path) -> None:
    client = connect(fake, tmp_path)
    try:
        store = KubeStore(client, "absent")
        assert store.get("approvals", "r1") is None
        with pytest.raises(StoreError, match="absent"):
            store.create("approvals", "r1", {})
    finally:
        client.close()
