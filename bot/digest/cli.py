"""``gpubot digest``: the daily digest on a terminal, on a snapshot or a cluster.

    gpubot digest --snapshot examples/gpu-fragmentation
    gpubot digest --store-path ~/.local/state/gpubot/watch.db --png digest.png

GPUs lost per pool come from the sentinel's incidents, in the SQLite store ``--store-path``
names (``gpubot watch --store-path``, or the bot's own SQLite store: read only); without
one, the digest says they were not read. Exit codes as the other commands'.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, BinaryIO, TextIO

if TYPE_CHECKING:
    from bot.metrics.prometheus import PrometheusMetrics

EXAMPLES = """examples:
  gpubot digest --snapshot examples/gpu-fragmentation
  gpubot digest --context prod --store-path ~/.local/state/gpubot/watch.db
  gpubot digest --store-path /var/lib/gpubot/state.db --hours 12 -o json
  gpubot digest --snapshot ./dump --png digest.png
"""


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than zero: {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("digest")
    g.add_argument("--store-path", metavar="FILE",
                   help="the SQLite store whose incidents give the GPUs lost per pool "
                        "(gpubot watch --store-path, or the bot's store); default: none")
    g.add_argument("--hours", metavar="N", type=_positive, default=24.0,
                   help="the window, in hours (default 24)")
    g.add_argument("--top", metavar="N", type=int, default=5,
                   help="the longest-pending workloads shown, each diagnosed (default 5)")
    g.add_argument("--png", metavar="FILE",
                   help="also write the supply-and-demand chart per GPU model as a PNG "
                        "(needs the chart extra: pip install 'gpubot[chart]')")
    p.epilog = EXAMPLES


def _metrics(args: argparse.Namespace, environ: Mapping[str, str]
             ) -> PrometheusMetrics | None:
    url = args.prometheus or environ.get("GPUBOT_PROMETHEUS_URL")
    if not url:
        return None
    from bot.metrics.prometheus import prometheus_from_env

    return prometheus_from_env(url, environ)


def main(args: argparse.Namespace, out: TextIO, err: TextIO, environ: Mapping[str, str],
         stdin: BinaryIO | None = None) -> int:
    from bot.cliview import (
        EXIT_FINDINGS,
        EXIT_NOT_FOUND,
        EXIT_OK,
        EXIT_USAGE,
        MACHINE_OUTPUTS,
        PROGRESS_DELAY,
        failed_on,
        open_view,
        use_color,
        write_chart,
    )
    from bot.digest.build import build
    from bot.progress import Progress
    from bot.sentinel.incidents import IncidentBook
    from bot.store import StoreError, open_store
    from handlers.runtime.source import MetricsError
    from handlers.view import ViewError

    if args.png:
        from bot.chart import missing

        if (why := missing()) is not None:
            err.write(f"gpubot: error: --png: {why}\n")
            return EXIT_USAGE
    path = os.path.expanduser(args.store_path) if args.store_path else None
    if path is not None and not os.path.isfile(path):
        err.write(f"gpubot: no incident store at {path}\n")
        return EXIT_NOT_FOUND
    namespaces = frozenset({args.namespace}) if args.namespace else None
    progress = Progress.on(err, enabled=args.output not in MACHINE_OUTPUTS, delay=PROGRESS_DELAY)
    store = None
    metrics = None
    try:
        with progress:
            view = open_view(args, err, progress, stdin)
            metrics = _metrics(args, environ)
            store = open_store("sqlite", path=path) if path is not None else None
            diag = build(view, IncidentBook(store) if store is not None else None,
                         metrics=metrics, hours=args.hours, top=args.top,
                         namespaces=namespaces)
    except MetricsError as e:
        err.write(f"gpubot: error: {e}\n")
        return EXIT_USAGE
    except (ViewError, StoreError) as e:
        err.write(f"gpubot: {e}\n")
        return EXIT_NOT_FOUND
    finally:
        if metrics is not None:
            metrics.close()
        if store is not None:
            store.close()
    for problem in getattr(view, "problems", []):
        diag.unchecked.append(f"not read: {problem}")
    if args.png and not write_chart(diag, args.png, err):
        return EXIT_NOT_FOUND
    from bot.render import render_json, render_text, render_yaml
    from bot.runbook import from_env

    runbooks = from_env(environ, args.runbook_base_url)  # checked by bot.cli.main
    if args.output == "json":
        out.write(render_json(diag, source=view.source, runbooks=runbooks) + "\n")
    elif args.output == "yaml":
        out.write(render_yaml(diag, source=view.source, runbooks=runbooks))
    else:
        from bot.table import terminal_width

        out.write(render_text(diag, color=use_color(args.color, out, environ),
                              source=view.source, wide=args.output == "wide",
                              width=terminal_width(out, environ), runbooks=runbooks))
    return EXIT_FINDINGS if failed_on(diag, args.fail_on) else EXIT_OK
