"""What the CLI's commands share: exit codes, the view the flags name, colour, ``--fail-on``
and the chart file. ``bot/cli.py`` (the diagnoses), ``bot/watch.py`` and
``bot/digest/cli.py`` import it; it imports none of them."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, BinaryIO, TextIO, TypeVar

from handlers.errors import GpubotError

if TYPE_CHECKING:
    from bot.progress import Progress
    from handlers.model import Diagnosis
    from handlers.view import ClusterView

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_FINDINGS = 0, 1, 2, 3
MACHINE_OUTPUTS = ("json", "yaml")
_V = TypeVar("_V")
PROGRESS_DELAY = 0.3  # seconds of work before a progress line appears


class CliUsage(GpubotError):
    """A usage error found after parsing (exit 2)."""


# `gpubot` (bot.cli.entry) leaves through os._exit, never freeing what it read; but the
# views main() opened would be freed object by object as main() returns (a fifth of a
# second for a 30,000-pod snapshot). entry() has them held here until the exit instead.
_HELD: list[object] | None = None


def hold_until_exit() -> None:
    """Keep every view opened from now on until the process exits (os._exit only)."""
    global _HELD
    _HELD = []


def held(view: _V) -> _V:
    if _HELD is not None:
        _HELD.append(view)
    return view


def open_view(args: argparse.Namespace, err: TextIO, progress: Progress,
              stdin: BinaryIO | None = None) -> ClusterView:
    """The cluster view the arguments name. Raises ViewError when it cannot be opened."""
    if args.snapshot and (args.kubeconfig or args.context):
        raise CliUsage("--snapshot reads files; --kubeconfig/--context read a live cluster: "
                       "give one or the other")
    if not args.snapshot:
        from bot.live import open_live_view

        live = open_live_view(args.kubeconfig, args.context, timeout=args.timeout)
        live.transport.on_page = progress.pages
        if err.isatty() and args.output not in MACHINE_OUTPUTS:
            err.write(f"gpubot: reading {live.source} ...\n")
        return live
    from bot.snapshot import load_snapshot

    return held(load_snapshot(args.snapshot, stdin=stdin, progress=progress.files))


def use_color(choice: str, out: TextIO, environ: Mapping[str, str]) -> bool:
    """--color always/never, else on a terminal unless NO_COLOR is set (no-color.org)."""
    if choice != "auto":
        return choice == "always"
    return not environ.get("NO_COLOR") and out.isatty()


def failed_on(diag: Diagnosis, threshold: str | None) -> bool:
    """A finding at ``threshold`` severity or worse (``--fail-on``)."""
    if not threshold:
        return False
    from handlers.model import Severity

    worst = Severity(threshold).rank
    return any(f.severity.rank <= worst for f in diag.findings)


def write_chart(diag: Diagnosis, path: str, err: TextIO) -> bool:
    from pathlib import Path

    from bot.chart import render_png
    from handlers.chart import chart_data

    try:
        Path(path).write_bytes(render_png(chart_data(diag)))
    except OSError as e:
        err.write(f"gpubot: cannot write the chart to {path}: {e.strerror or e}\n")
        return False
    return True
