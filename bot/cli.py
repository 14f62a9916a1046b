"""gpubot command line: the same diagnoses as Slack, on a snapshot or a cluster.

Exit codes: 0 a diagnosis was produced (whatever it found), 1 the target or the snapshot
cannot be found or read, 2 usage errors.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from bot.render import render_json, render_text
from handlers.errors import GpubotError, TargetNotFound
from handlers.model import Diagnosis
from handlers.view import ClusterView, Reader, ViewError

if TYPE_CHECKING:
    from bot.metrics.prometheus import PrometheusMetrics

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2

EXAMPLES = """examples:
  gpubot why-pending ml-team/train-0 --snapshot examples/plugin-crashloop-cuda-mismatch
  gpubot why-pending deployment/llm-serve -n inference --snapshot ./dump
  gpubot doctor gpu-node-7 --snapshot ./dump -o json
  gpubot nodes --snapshot ./dump

make a snapshot of a cluster:
  kubectl cluster-info dump --all-namespaces --output-directory ./dump
  kubectl get resourcequotas,limitranges,priorityclasses,runtimeclasses,configmaps -A \\
      -o yaml > ./dump/extra.yaml
"""


class _Parser(argparse.ArgumentParser):
    """argparse, with a hint of what to type after every usage error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"gpubot: error: {message}\nRun `{self.prog} --help` for examples.\n")
        sys.exit(EXIT_USAGE)


def _add_source(p: argparse.ArgumentParser) -> None:
    src = p.add_argument_group("what to read (default: the current kubectl context)")
    src.add_argument("--snapshot", metavar="PATH",
                     help="a snapshot: kubectl -o yaml/json files, a cluster-info dump "
                          "(directory or single stream), or a directory mixing them")
    src.add_argument("--kubeconfig", metavar="FILE",
                     help="kubeconfig of a live cluster (default: $KUBECONFIG or "
                          "~/.kube/config; in a pod: its service account)")
    src.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    src.add_argument("--timeout", metavar="SECONDS", type=float, default=10.0,
                     help="timeout of each API request (default 10)")
    src.add_argument("--prometheus", metavar="URL",
                     help="Prometheus for Xid errors, idle GPUs and allocation (default: "
                          "$GPUBOT_PROMETHEUS_URL; token: $GPUBOT_PROMETHEUS_TOKEN)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text",
                   help="text for people (default), json for tools")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour in text output (auto: only on a terminal)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpubot", description="Why is my GPU workload stuck?",
                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    p = sub.add_parser("why-pending", help="root cause of a pending GPU pod or workload",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="TARGET",
                   help="POD, NS/POD, or KIND/NAME (deployment, statefulset, job, replicaset)")
    p.add_argument("-n", "--namespace", help="namespace of TARGET (default: default)")
    _add_source(p)
    p = sub.add_parser("doctor", help="GPU discovery chain per node: driver, plugin, runtime")
    p.add_argument("node", metavar="NODE", nargs="?", help="one node (default: every GPU node)")
    _add_source(p)
    p = sub.add_parser("nodes", help="GPU ledger per node and per GPU model")
    _add_source(p)
    p = sub.add_parser("pending", help="every pending GPU workload with its root cause")
    p.add_argument("-n", "--namespace", help="one namespace (default: all)")
    p.add_argument("--limit", type=int, default=50, metavar="N",
                   help="diagnose at most N workloads (default 50)")
    _add_source(p)
    p = sub.add_parser("quota", help="GPU quota used/hard per namespace, with the holders")
    p.add_argument("namespace", metavar="NS", nargs="?", help="one namespace (default: all)")
    _add_source(p)
    p = sub.add_parser("serve", help="run the Slack bot (Socket Mode or HTTP) on a snapshot "
                                     "or a cluster")
    from bot.serve import add_arguments as add_serve_arguments

    add_serve_arguments(p)
    return parser


def open_view(args: argparse.Namespace, err: TextIO) -> ClusterView:
    """The cluster view the arguments name. Raises ViewError when it cannot be opened."""
    if args.snapshot and (args.kubeconfig or args.context):
        raise _Usage("--snapshot reads files; --kubeconfig/--context read a live cluster: "
                     "give one or the other")
    if not args.snapshot:
        from bot.live import open_live_view

        live = open_live_view(args.kubeconfig, args.context, timeout=args.timeout)
        if err.isatty():  # a large cluster takes seconds: say what is happening
            err.write(f"gpubot: reading {live.source} ...\n")
        return live
    from bot.snapshot import load_snapshot

    start = time.monotonic()
    view = load_snapshot(args.snapshot)
    if err.isatty() and time.monotonic() - start > 1.0:
        err.write(f"gpubot: read {len(view.files)} files in {time.monotonic() - start:.1f}s\n")
    return view


class _Usage(GpubotError):
    pass


def _metrics(args: argparse.Namespace) -> PrometheusMetrics | None:
    from bot.metrics import METRIC_COMMANDS
    from bot.metrics.prometheus import prometheus_from_env
    from handlers.runtime.source import MetricsError

    if args.command not in METRIC_COMMANDS:
        return None
    try:
        return prometheus_from_env(args.prometheus or os.environ.get("GPUBOT_PROMETHEUS_URL"),
                                   os.environ)
    except MetricsError as e:
        raise _Usage(str(e)) from None


def _diagnose(args: argparse.Namespace, reader: Reader) -> Diagnosis:
    from handlers import doctor, nodes, pending_all, quota, why_pending

    runners: dict[str, Callable[[], Diagnosis]] = {
        "why-pending": lambda: why_pending.run(reader, args.target, args.namespace),
        "doctor": lambda: doctor.run(reader, args.node),
        "nodes": lambda: nodes.run(reader),
        "pending": lambda: pending_all.run(reader, args.namespace, limit=args.limit),
        "quota": lambda: quota.run(reader, args.namespace),
    }
    return runners[args.command]()


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        args = build_parser().parse_args(argv)
    if args.command == "serve":
        from bot.serve import serve

        return serve(args)
    from handlers.why_pending import UsageError

    try:
        view = open_view(args, err)
        metrics = _metrics(args)
        try:
            diag = _diagnose(args, Reader(view, metrics=metrics))
        finally:
            if metrics is not None:
                metrics.close()
    except (_Usage, UsageError) as e:
        err.write(f"gpubot: error: {e}\n")
        return EXIT_USAGE
    except TargetNotFound as e:
        err.write(f"gpubot: {e}\n")
        return EXIT_NOT_FOUND
    except ViewError as e:
        err.write(f"gpubot: {e}\n")
        return EXIT_NOT_FOUND
    source = view.source
    for problem in getattr(view, "problems", []):
        diag.unchecked.append(f"not read: {problem}")
    if args.output == "json":
        out.write(render_json(diag, source=source) + "\n")
    else:
        color = args.color == "always" or (args.color == "auto" and out.isatty())
        out.write(render_text(diag, color=color, source=source))
    return EXIT_OK


def entry() -> None:
    """Console-script entry. A one-shot command makes few cycles and exits without
    tearing down its heap, so the cycle collector (which rescans every object read, ~40%
    of a cold diagnosis of a large cluster) is off, and exit skips freeing objects."""
    gc.disable()
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `gpubot ... | head`
        pass
    os._exit(code)


if __name__ == "__main__":
    entry()
