"""A live API server that misbehaves (tests/fake_kube faults.misbehaving): each ends in
one clear message or a "not checked"/"not read" line, never a traceback or a hang."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import main
from bot.live import LiveView, RetryPolicy, open_live_view
from bot.live.errors import LiveError
from tests.fake_kube import FakeKube
from tests.fake_kube.faults import Raw, misbehaving

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
FAST = RetryPolicy(attempts=2, backoff=0.01, max_backoff=0.05, max_retry_after=1.0)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeKube]:
    with FakeKube(SNAPSHOT) as fk:
        yield fk


@pytest.fixture
def fk(server: FakeKube) -> Iterator[FakeKube]:
    server.faults.clear()
    yield server
    server.faults.clear()


@pytest.fixture
def kubeconfig(fk: FakeKube, tmp_path: Path) -> Path:
    return fk.write_kubeconfig(tmp_path / "kubeconfig", context="fake")


@pytest.fixture
def view(kubeconfig: Path) -> Iterator[LiveView]:
    v = open_live_view(str(kubeconfig), timeout=2.0, retry=FAST)
    yield v
    v.close()


@pytest.mark.parametrize(("how", "says"), [
    ("gzip-lie", "labelled 'gzip' that is not"),
    ("huge-length", "a body of 10240 MB"),
    ("length-lie", "dropped the connection"),
    ("items-not-list", "items that are not a list"),
    ("same-token", "continue token repeats"),
])
def test_a_misbehaving_list_ends_in_one_message(view: LiveView, fk: FakeKube, how: str,
                                                says: str) -> None:
    fk.faults.answer("nodes", misbehaving(how))
    started = time.monotonic()
    with pytest.raises(LiveError) as info:
        view.list("Node")
    assert time.monotonic() - started < 3
    assert says in str(info.value), str(info.value)
    assert "nodes" in str(info.value)


def test_endless_pagination_stops_at_the_page_limit(view: LiveView, fk: FakeKube) -> None:
    fk.faults.answer("nodes", misbehaving("endless-tokens"))
    view.transport.max_pages = 20
    with pytest.raises(LiveError, match="still set after 20 pages"):
        view.list("Node")


def test_a_trickled_body_is_cut_at_the_timeout(view: LiveView, fk: FakeKube) -> None:
    fk.faults.answer("nodes", misbehaving("trickle"))  # ~15 s at 0.2 s a byte
    started = time.monotonic()
    with pytest.raises(LiveError, match="came too slowly"):
        view.list("Node")
    assert time.monotonic() - started < 2.0 + 1  # the timeout is for the whole request


def test_items_of_the_wrong_type_are_skipped_and_listed_as_not_read(
        view: LiveView, fk: FakeKube) -> None:
    fk.faults.answer("pods", misbehaving("items-wrong-type"))
    pods = view.list("Pod")
    assert [p["metadata"]["name"] for p in pods] == ["fine"]
    text = [str(p) for p in view.problems]
    assert any("Pod default/bad-spec: spec.containers: not a list" in t for t in text), text
    assert all(p.namespace in (None, "default") for p in view.problems)


def test_a_fixed_object_leaves_the_not_read_list(view: LiveView, fk: FakeKube) -> None:
    fk.faults.answer("pods", misbehaving("items-wrong-type"), times=1)
    view.list("Pod", "default")
    assert view.problems
    fixed = Raw(200, b'{"kind":"PodList","apiVersion":"v1","items":[{"metadata":'
                b'{"name":"bad-spec","namespace":"default"},"spec":{"containers":[]}}]}')
    fk.faults.answer("pods", fixed, times=1)
    view.list("Pod", "default")
    assert not [p for p in view.problems if "bad-spec" in str(p)]


def test_a_long_retry_after_does_not_stretch_the_command(kubeconfig: Path,
                                                         fk: FakeKube) -> None:
    fk.faults.throttle(None, retry_after=3600)
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    code = main(["doctor", "--kubeconfig", str(kubeconfig), "--timeout", "2"], out=out, err=err)
    assert time.monotonic() - started < 10
    assert code in (0, 1)
    assert "Traceback" not in out.getvalue() + err.getvalue()
    assert "rate-limiting" in out.getvalue() + err.getvalue()


@pytest.mark.parametrize("how", ["gzip-lie", "items-wrong-type", "same-token", "trickle"])
def test_the_cli_never_shows_a_traceback(kubeconfig: Path, fk: FakeKube, how: str) -> None:
    fk.faults.answer("nodes", misbehaving(how))
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    code = main(["nodes", "--kubeconfig", str(kubeconfig), "--timeout", "1"], out=out, err=err)
    assert time.monotonic() - started < 15
    assert code in (0, 1)
    text = out.getvalue() + err.getvalue()
    assert "Traceback" not in text
    assert "nodes" in text
