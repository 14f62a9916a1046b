"""A live progress line on a terminal while a snapshot is read or a cluster listed, erased
when done; nothing off a terminal or with -o json/yaml."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot import cli
from bot.live import open_live_view
from bot.progress import Progress
from bot.snapshot import load_snapshot
from tests.fake_kube import FakeKube

ROOT = Path(__file__).resolve().parents[1]
CRASH = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
ERASE = "\r\x1b[K"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_is_rewritten_in_place_and_erased_when_done() -> None:
    tty = _Tty()
    with Progress(tty, delay=0, interval=0) as p:
        p.files(1, 100)
        p.files(2, 5 * 1024 * 1024)
    out = tty.getvalue()
    assert out == (f"{ERASE}gpubot: reading snapshot: 1 files, 100 B"
                   f"{ERASE}gpubot: reading snapshot: 2 files, 5.0 MB{ERASE}")
    assert "\n" not in out


def test_nothing_before_the_delay_nor_off_a_terminal() -> None:
    now = [0.0]
    tty = _Tty()
    p = Progress(tty, delay=1.0, interval=0, clock=lambda: now[0])
    p.pages("Pod", 1, 500)
    p.done()
    assert tty.getvalue() == ""  # quick work: not a byte
    now[0] = 2.0
    p.pages("Pod", 2, 1000)
    assert "listing Pod: page 2, 1,000 objects" in tty.getvalue()
    for p in (Progress.on(io.StringIO(), delay=0), Progress.on(_Tty(), enabled=False, delay=0)):
        p.files(1, 1)
        p.done()
        assert p.stream.getvalue() == ""  # type: ignore[attr-defined]


def test_the_loader_reports_files_and_bytes() -> None:
    seen: list[tuple[int, int]] = []
    load_snapshot(CRASH, progress=lambda files, nbytes: seen.append((files, nbytes)))
    # A dump's ReplicaSet and Deployment lists wait for a diagnosis that asks for them.
    files = [p for p in CRASH.rglob("*") if p.is_file() and p.name not in (
        "logs.txt", "replicasets.json", "deployments.json")]
    assert seen[-1] == (len(files), sum(p.stat().st_size for p in files))
    assert [f for f, _ in seen] == list(range(1, len(seen) + 1))


def test_a_live_list_reports_pages_and_objects(tmp_path: Path) -> None:
    calls: list[tuple[str, int, int]] = []
    with FakeKube(CRASH) as fk:
        live = open_live_view(str(fk.write_kubeconfig(tmp_path / "kc")), timeout=5)
        live.page_size = 2
        live.transport.on_page = lambda kind, pages, n: calls.append((kind, pages, n))
        pods = live.list("Pod")
        live.close()
    pod_calls = [c for c in calls if c[0] == "Pod"]
    assert len(pod_calls) == (len(pods) + 1) // 2 >= 2
    assert pod_calls[-1] == ("Pod", len(pod_calls), len(pods))


@pytest.mark.parametrize(("output", "shown"), [("text", True), ("wide", True),
                                               ("json", False), ("yaml", False)])
def test_the_cli_shows_progress_only_for_people(monkeypatch: pytest.MonkeyPatch, output: str,
                                                shown: bool) -> None:
    monkeypatch.setattr(cli, "PROGRESS_DELAY", 0.0)
    out, err = io.StringIO(), _Tty()
    code = cli.main(["nodes", "--snapshot", str(CRASH), "-o", output], out=out, err=err,
                    environ={})
    assert code == 0
    if shown:
        assert "gpubot: reading snapshot:" in err.getvalue()
        assert err.getvalue().endswith(ERASE)
    else:
        assert err.getvalue() == ""
    assert "\r" not in out.getvalue()
