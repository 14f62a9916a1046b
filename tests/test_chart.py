"""The supply-and-demand chart of `nodes`: its numbers (a golden per example), the PNG read
back, `gpubot nodes --png`, and its upload into the `/gpu nodes` thread."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
from PIL import Image

from bot.chart import WIDTH_IN, missing, render_png
from bot.cli import main
from bot.snapshot import load_snapshot
from handlers import nodes
from handlers.chart import SERIES, chart_data
from handlers.view import Reader
from tests.fake_slack.harness import BotHarness

ROOT = Path(__file__).parents[1]
GOLDEN = ROOT / "tests" / "golden" / "chart"
UPDATE = os.environ.get("GPUBOT_UPDATE_GOLDEN") == "1"
CASES = ["examples/unhealthy-gpus-xid", "examples/plugin-crashloop-cuda-mismatch",
         "examples/gpu-fragmentation",
         "tests/scenarios/pending_several_namespaces", "tests/scenarios/plugin-rollout-bad-tag"]


def _data(path: str) -> dict[str, object]:
    return chart_data(nodes.run(Reader(load_snapshot(ROOT / path))))


@pytest.mark.parametrize("path", CASES, ids=[Path(c).name for c in CASES])
def test_chart_data_golden(path: str) -> None:
    got = json.dumps(_data(path), indent=1) + "\n"
    golden = GOLDEN / f"{Path(path).name}.json"
    if UPDATE or not golden.exists():
        golden.write_text(got)
        if not UPDATE:
            pytest.fail(f"wrote missing golden {golden.name}: check it and commit it")
    assert got == golden.read_text(), f"{golden.name}: GPUBOT_UPDATE_GOLDEN=1 to accept"


def test_lost_gpus_show_as_their_own_bar() -> None:
    data = _data("examples/unhealthy-gpus-xid")
    h100 = next(g for g in data["groups"] if "H100" in g["label"])  # type: ignore[index]
    values = dict(zip([k for k, _ in SERIES], h100["values"], strict=True))
    assert values == {"allocatable": 6.0, "allocated": 0.0, "free": 6.0, "lost": 2.0,
                      "pending": 0.0}
    # A node advertising none of its 8 A100s (its plugin crash-loops): 8 lost, in the title.
    crash = _data("examples/plugin-crashloop-cuda-mismatch")
    a100 = next(g for g in crash["groups"] if "A100" in g["label"])  # type: ignore[index]
    assert dict(zip([k for k, _ in SERIES], a100["values"], strict=True))["lost"] == 8
    assert str(crash["title"]).endswith("(8 GPUs lost)")
    # The rollout left three nodes advertising none of their 4 GPUs each.
    rollout = _data("tests/scenarios/plugin-rollout-bad-tag")
    a10g = next(g for g in rollout["groups"] if "A10G" in g["label"])  # type: ignore[index]
    assert a10g["values"][0] == 0 and a10g["values"][3] == 12


def test_the_png_reads_back_as_a_phone_sized_picture() -> None:
    png = render_png(_data("tests/scenarios/pending_several_namespaces"))
    img = Image.open(io.BytesIO(png))
    assert img.format == "PNG"
    assert img.width == int(WIDTH_IN * 150)
    assert 600 < img.height < 3000
    colors = img.convert("RGB").getcolors(maxcolors=1 << 16) or []
    assert len(colors) > 10  # bars, text and legend drawn, not a blank page


def test_cli_nodes_png_writes_the_chart(tmp_path: Path) -> None:
    out = tmp_path / "nodes.png"
    buf = io.StringIO()
    assert main(["nodes", "--snapshot", str(ROOT / "examples/gpu-fragmentation"),
                 "--png", str(out)], out=buf, err=io.StringIO()) == 0
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "GPU nodes" in buf.getvalue()
    bad = tmp_path / "no-such-dir" / "x.png"
    err = io.StringIO()
    assert main(["nodes", "--snapshot", str(ROOT / "examples/gpu-fragmentation"),
                 "--png", str(bad)], out=io.StringIO(), err=err) == 1
    assert "cannot write the chart" in err.getvalue()


def test_slack_nodes_posts_the_chart_in_its_thread() -> None:
    with BotHarness("examples/gpu-fragmentation") as h:
        h.command("nodes")
        h.slack.wait_for("files.completeUploadExternal")
        urls = h.slack.calls("files.getUploadURLExternal")
        assert [u.params["filename"] for u in urls] == ["gpubot-nodes.png"]
        done = h.slack.calls("files.completeUploadExternal")[0]
        card_ts = h.slack.calls("chat.postMessage")[0]
        assert done.params["thread_ts"] == "1700000000.000001", card_ts.params
        png = next(iter(h.slack.uploads.values()))
        assert png.startswith(b"\x89PNG") and Image.open(io.BytesIO(png)).width > 0


def _without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the base install, where the chart extra is not installed."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert missing() is not None


def test_cli_png_without_the_chart_extra_says_how_to_get_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _without_matplotlib(monkeypatch)
    out, err = io.StringIO(), io.StringIO()
    png = tmp_path / "nodes.png"
    assert main(["nodes", "--snapshot", str(ROOT / "examples/gpu-fragmentation"),
                 "--png", str(png)], out=out, err=err) == 2
    assert "pip install 'gpubot[chart]'" in err.getvalue() and not png.exists()
    # The table needs no extra.
    assert main(["nodes", "--snapshot", str(ROOT / "examples/gpu-fragmentation")],
                out=out, err=io.StringIO()) == 0
    assert "GPU nodes" in out.getvalue()


def test_slack_nodes_without_the_chart_extra_posts_the_table_and_the_hint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _without_matplotlib(monkeypatch)
    with BotHarness("examples/gpu-fragmentation") as h:
        h.command("nodes")
        (hint,) = h.slack.wait_for(
            "chat.postMessage", where=lambda c: "gpubot[chart]" in str(c.params.get("text")))
        assert hint.params["thread_ts"] == "1700000000.000001"
        assert not h.slack.calls("files.getUploadURLExternal")
