"""Tables that fit the terminal: the real ``gpubot`` in a pseudo-terminal of 80 and 120
columns, on a snapshot with long node, namespace, workload and GPU model names.

Each table's lines (header, rows, the lines under rows) fit the width; the columns that
matter stay; the least useful are hidden first, and a line says so; names are cut in the
middle and keep both ends; ``-o wide`` and a pipe get every column whole.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.table import Column, Fit, Row, cell_len, render

ROOT = Path(__file__).resolve().parents[1]
GPUBOT = Path(sys.executable).with_name("gpubot")
ELLIPSIS = "…"
NODES = [f"gpu-node-pool-a100-highmem-us-east-1a-{i:04d}" for i in (41, 42, 7)]
MODEL = "NVIDIA-A100-SXM4-40GB-Confidential-Compute-Edition"
NAMESPACE = "computer-vision-research-production"
WORKLOAD = "stable-diffusion-finetune-large-batch-experiment"
RENAMES = {
    "ip-10-30-1-1.ec2.internal": NODES[0], "ip-10-30-1-2.ec2.internal": NODES[1],
    "ip-10-30-1-3.ec2.internal": NODES[2], "NVIDIA-A100-SXM4-40GB": MODEL,
    "sd-finetune": WORKLOAD,
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/quota-exceeded (a quota used up, a workload pending on it, three A100
    nodes) with names as long as real clusters give them."""
    dst = tmp_path_factory.mktemp("long") / "snap"
    shutil.copytree(ROOT / "examples" / "quota-exceeded", dst)
    for path in sorted(dst.rglob("*"), key=lambda p: -len(p.parts)):
        if path.is_file():
            text = path.read_text()
            for old, new in RENAMES.items():
                text = text.replace(old, new)
            path.write_text(re.sub(r"\bvision\b", NAMESPACE, text))
        if path.name == "vision":
            path.rename(path.with_name(NAMESPACE))
    return dst


def in_pty(*argv: str, columns: int) -> str:
    """gpubot's standard output, run on a pseudo-terminal ``columns`` wide (TIOCSWINSZ),
    without colour (NO_COLOR) so that widths can be measured as printed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["NO_COLOR"] = "1"
    proc = subprocess.Popen([str(GPUBOT), *argv], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.PIPE, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other end is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 3), err.decode()
    return b"".join(chunks).decode().replace("\r\n", "\n")


def tables(out: str, *headers: str) -> Iterator[list[str]]:
    """Each table's lines: from a line starting with one of ``headers`` to a blank line."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        words = line.split()
        if words and words[0] in headers and line == line.upper():  # headers are capitals
            block = []
            for ln in lines[i:]:
                if not ln.strip():
                    break
                block.append(ln)
            yield block


def header(block: list[str]) -> list[str]:
    return re.split(r"\s{2,}", block[0].strip())


def first_cells(block: list[str]) -> list[str]:
    """The first cell of each row (rows start at the table's left edge)."""
    indent = len(block[0]) - len(block[0].lstrip())
    return [ln[indent:].split("  ")[0] for ln in block[1:]
            if ln[indent:indent + 1].strip() and "hidden to fit" not in ln]


def assert_fits(block: list[str], width: int) -> None:
    too_long = [ln for ln in block if len(ANSI.sub("", ln)) > width]
    assert not too_long, f"wider than {width}: {too_long}"


def assert_cut_in_the_middle(cells: list[str], names: list[str]) -> None:
    """Every cell is its name, or the name cut once in the middle: both ends kept, and the
    rows still tell the names apart."""
    for cell in cells:
        if ELLIPSIS not in cell:
            assert cell in names
            continue
        head, tail = cell.split(ELLIPSIS)
        (name,) = [n for n in names if n.startswith(head) and n.endswith(tail)]
        assert len(head) >= 3 and len(tail) >= 3, cell
        assert name[-4:] in tail, f"{cell}: lost the end of {name}"
    assert len(set(cells)) == len(cells)


@pytest.mark.parametrize("width", [80, 120])
def test_doctor_fits_keeps_node_gpus_verdict_and_cuts_names_in_the_middle(
        snapshot: Path, width: int) -> None:
    (block,) = tables(in_pty("doctor", "--snapshot", str(snapshot), columns=width), "NODE")
    assert_fits(block, width)
    cols = header(block)
    assert cols[0] == "NODE" and {"GPUS", "PLUGIN", "VERDICT"} <= set(cols)
    assert "RUNTIME" not in cols  # the least useful column goes first
    assert "hidden to fit" in block[-1] and "-o wide" in block[-1]
    cells = first_cells(block)
    assert len(cells) == 3
    assert_cut_in_the_middle(cells, NODES)
    if width == 80:
        assert all(ELLIPSIS in c for c in cells)


def test_doctor_at_120_shows_more_columns_than_at_80(snapshot: Path) -> None:
    narrow, wide = (header(next(tables(in_pty("doctor", "--snapshot", str(snapshot),
                                               columns=w), "NODE")))
                    for w in (80, 120))
    assert set(narrow) < set(wide)


@pytest.mark.parametrize("width", [80, 120])
def test_wide_output_shows_every_column_whole(snapshot: Path, width: int) -> None:
    out = in_pty("doctor", "--snapshot", str(snapshot), "-o", "wide", columns=width)
    (block,) = tables(out, "NODE")
    assert header(block) == ["NODE", "PRODUCT", "GPUS", "LABELS", "DRIVER", "TOOLKIT",
                             "PLUGIN", "RUNTIME", "MIG", "SHARING", "VERDICT"]
    assert sorted(first_cells(block)) == sorted(NODES)
    assert ELLIPSIS not in "\n".join(block) and "hidden" not in out
    nodes = in_pty("nodes", "--snapshot", str(snapshot), "-o", "wide", columns=width)
    per_node = next(tables(nodes, "NODE"))
    assert {"READY", "SCHEDULABLE", "TAINTS", "COUNT FROM"} <= set(header(per_node))
    assert all(MODEL in ln for ln in per_node[1:])


@pytest.mark.parametrize("width", [80, 120])
def test_nodes_tables_fit(snapshot: Path, width: int) -> None:
    out = in_pty("nodes", "--snapshot", str(snapshot), columns=width)
    (models,) = tables(out, "MODEL")
    (per_node,) = tables(out, "NODE")
    for block in (models, per_node):
        assert_fits(block, width)
    assert {"MODEL", "HAS", "ALLOC", "USED", "FREE", "LOST", "PENDING"} <= set(header(models))
    assert_cut_in_the_middle(first_cells(models), [MODEL])
    assert {"NODE", "HAS", "ALLOC", "FREE", "LOST"} <= set(header(per_node))
    assert_cut_in_the_middle(first_cells(per_node), NODES)


@pytest.mark.parametrize("width", [80, 120])
def test_pending_fits_and_puts_the_cause_under_the_row(snapshot: Path, width: int) -> None:
    (block,) = tables(in_pty("pending", "--snapshot", str(snapshot), columns=width),
                      "SEVERITY", "NAMESPACE")
    assert_fits(block, width)
    cols = header(block)
    assert {"NAMESPACE", "WORKLOAD", "PODS", "GPUS", "ROOT CAUSE"} <= set(cols)
    row = block[1]
    assert row.rstrip().endswith("QUOTA_EXCEEDED")
    workload = f"deployment/{WORKLOAD}"
    cut = re.search(r"deployment/\S*", row)
    assert cut is not None
    assert_cut_in_the_middle([cut.group(0)], [workload])
    under = " ".join(ln.strip() for ln in block[2:])
    assert "ResourceQuota gpu-quota in" in under and "Fits if:" in under


@pytest.mark.parametrize("width", [80, 120])
def test_quota_fits(snapshot: Path, width: int) -> None:
    (block,) = tables(in_pty("quota", "--snapshot", str(snapshot), columns=width),
                      "NAMESPACE")
    assert_fits(block, width)
    assert {"NAMESPACE", "RESOURCE", "USED", "HARD", "PENDING"} <= set(header(block))
    (cell,) = first_cells(block)
    assert_cut_in_the_middle([cell], [NAMESPACE])
    assert "requests.nvidia.com/gpu" in block[1]
    assert any(ln.strip().startswith("waiting:") for ln in block)


def test_a_pipe_gets_whole_rows(snapshot: Path) -> None:
    """Not a terminal and no COLUMNS: no limit, so grep sees every column of a row."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([str(GPUBOT), "doctor", "--snapshot", str(snapshot)], env=env,
                         capture_output=True, text=True, timeout=60).stdout
    (block,) = tables(out, "NODE")
    assert len(header(block)) == 11 and ELLIPSIS not in out
    assert sorted(first_cells(block)) == sorted(NODES)
    env["COLUMNS"] = "80"  # asked for: a width even through a pipe
    out = subprocess.run([str(GPUBOT), "doctor", "--snapshot", str(snapshot)], env=env,
                         capture_output=True, text=True, timeout=60).stdout
    assert_fits(next(tables(out, "NODE")), 80)


def test_colour_does_not_count_in_the_width(snapshot: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    env["COLUMNS"] = "120"
    out = subprocess.run([str(GPUBOT), "pending", "--color", "always", "--snapshot",
                          str(snapshot)], env=env, capture_output=True, text=True,
                         timeout=60).stdout
    block = next(tables(ANSI.sub("", out), "SEVERITY"))
    assert_fits(block, 120)
    row = next(ln for ln in out.splitlines() if "QUOTA_EXCEEDED" in ln)
    assert row.startswith("\x1b[1;31mCRITICAL\x1b[0m")  # painted, yet aligned as plain
    assert len(ANSI.sub("", row)) > 100  # the names whole: 120 columns hold them


def test_wide_characters_count_two_cells() -> None:
    cols = [Column("NODE", Fit.MIDDLE, soft=12, min=8), Column("GPUS", right=True),
            Column("NOTE", Fit.WRAP, min=10)]
    rows = [Row(["ノード-東京-0001-abcdef", "8", "空き容量はありません " * 3])]
    lines = render(cols, rows, width=30).splitlines()
    assert all(cell_len(ln) <= 30 for ln in lines)
    assert lines[1].startswith("ノ") and ELLIPSIS in lines[1]
