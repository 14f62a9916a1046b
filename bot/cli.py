"""gpubot command line: the same diagnoses as Slack, on a snapshot or a cluster.

Exit codes: 0 a diagnosis was produced (whatever it found), 1 the target or the snapshot
cannot be found or read, 2 usage errors, 3 ``--fail-on`` found a finding that bad.
Flags follow kubectl's conventions: global flags anywhere on the line, the context's
namespace as the default one, durations such as ``5s``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import gc
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn, TextIO

from bot.cliview import (
    EXIT_FINDINGS,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    MACHINE_OUTPUTS,
    PROGRESS_DELAY,
    hold_until_exit,
)
from bot.durations import parse_duration
from bot.progress import Progress
from bot.version import version
from handlers.errors import GpubotError, TargetNotFound
from handlers.registry import COMMANDS, CommandSpec, ParamConflict
from handlers.view import ViewError

if TYPE_CHECKING:
    from bot.metrics.prometheus import PrometheusMetrics

OUTPUTS = ("text", "wide", "json", "yaml")
FAIL_ON = ("critical", "warning")

EXAMPLES = """examples:
  gpubot why-pending ml-team/train-0 --snapshot examples/plugin-crashloop-cuda-mismatch
  gpubot why-pending deployment/llm-serve -n inference --snapshot ./dump
  gpubot doctor gpu-node-7 --snapshot ./dump -o json
  gpubot nodes -o wide --snapshot ./dump.yaml.gz
  gpubot -n ml-team pending -l app=train --context prod --timeout 30s
  gpubot quota -A --fail-on warning -o yaml
  gpubot why-pending ml-team/train-0 --config gpubot.yaml     every cluster it lists; -c NAME: one
  kubectl get pods,nodes -A -o yaml | gpubot pending --snapshot -
  source <(gpubot completion bash)

make a snapshot of a cluster (gpubot snapshot --help):
  gpubot snapshot -o ./snap.tgz                    add --anonymize for a support bundle
"""


class _Parser(argparse.ArgumentParser):
    """argparse, with a hint of what to type after every usage error. A usage error in a
    subcommand's arguments shows that subcommand's usage, wherever argparse noticed it."""

    commands: dict[str, argparse.ArgumentParser]

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"gpubot: error: {message}\nRun `{self.prog} --help` for examples.\n")
        sys.exit(EXIT_USAGE)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """An unknown choice (a subcommand, -o's value) names the closest one, as /gpu does,
        rather than every choice."""
        if action.choices is None or value in action.choices:
            return
        choices = [str(c) for c in action.choices]
        close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.6)
        hint = (f"did you mean {close[0]}?" if close
                else f"choose from {', '.join(choices)}")
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}; {hint}")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            sub = getattr(self, "commands", {}).get(getattr(ns, "command", ""), self)
            sub.error(f"unrecognized arguments: {' '.join(extra)}")
        return ns


class _Version(argparse.Action):
    """--version, reading the installed version only when asked (importlib.metadata
    takes a noticeable part of a command's start)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        sys.stdout.write(f"gpubot {version()}\n")
        parser.exit()


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_global_flags(p: argparse.ArgumentParser, *, here: bool) -> None:
    """Flags every command takes, before or after its name (kubectl's global flags). Added
    to the top parser with their defaults (``here``) and to each subcommand with none, so
    that a flag given before the subcommand is not reset by the subcommand's parser.
    A new global flag is one ``add(...)`` line."""
    g = p.add_argument_group("global flags (anywhere on the line)")

    def add(*names: str, default: Any = None, **kw: Any) -> None:
        g.add_argument(*names, default=default if here else argparse.SUPPRESS, **kw)

    add("--snapshot", metavar="PATH",
        help="read a snapshot instead of a cluster: kubectl -o yaml/json files, a "
             "cluster-info dump (directory or stream), a directory mixing them, .gz files; "
             "- reads standard input")
    add("--kubeconfig", metavar="FILE",
        help="kubeconfig of a live cluster (default: $KUBECONFIG or ~/.kube/config; in a "
             "pod: its service account)")
    add("--context", metavar="NAME", help="kubeconfig context (default: its current-context)")
    add("-n", "--namespace", metavar="NS",
        help="namespace of TARGET (default: the context's namespace, else default); "
             "pending and quota: only this namespace (default: all)")
    add("-c", "--cluster", metavar="NAME",
        help="with clusters configured (--config, GPUBOT_CONFIG or GPUBOT_CLUSTERS): read "
             "this one (default: TARGET looked for in every cluster; nodes: every cluster)")
    add("--all-clusters", action="store_true", default=False,
        help="nodes, pending: every configured cluster, and the total")
    add("--config", metavar="FILE",
        help="YAML settings file, for its clusters list (default: $GPUBOT_CONFIG)")
    add("--timeout", metavar="DURATION", type=_duration, default=10.0,
        help="timeout of each API request: 5s, 1m, 1m30s (default 10s)")
    add("--prometheus", metavar="URL",
        help="Prometheus for Xid errors, idle GPUs and allocation in why-pending, doctor and "
             "nodes (default: $GPUBOT_PROMETHEUS_URL; token: $GPUBOT_PROMETHEUS_TOKEN)")
    add("-o", "--output", choices=OUTPUTS, default="text",
        help="text for people (default), wide: text with more columns, json or yaml for tools")
    add("--color", choices=("auto", "always", "never"), default="auto",
        help="colour in text output (auto: on a terminal, unless NO_COLOR is set)")
    add("--fail-on", choices=FAIL_ON, metavar="SEVERITY",
        help="exit 3 when a finding of this severity or worse is found: critical, warning "
             "(default: exit 0 whatever is found)")
    add("--log-patterns", metavar="FILE",
        help="your own known log lines, in the format of handlers/knowledge/logs.yaml "
             "(default: $GPUBOT_LOG_PATTERNS_FILE)")
    add("--runbook-base-url", metavar="URL",
        help="findings' runbooks are <URL><CODE>.md (default: $GPUBOT_RUNBOOK_BASE_URL; "
             "neither: the page installed with gpubot; per code: $GPUBOT_RUNBOOK_OVERRIDES)")


def build_parser() -> _Parser:
    parser = _Parser(prog="gpubot", description="Why is my GPU workload stuck?",
                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print gpubot's version and exit")
    add_global_flags(parser, here=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    parser.commands = {}

    def command(name: str, help: str, *, flags: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, epilog=EXAMPLES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        if flags:
            add_global_flags(p, here=False)
        parser.commands[name] = p
        return p

    for spec in COMMANDS.values():
        if spec.run is None:  # help is Slack's: the CLI has --help
            continue
        p = command(spec.name, spec.cli_summary or spec.summary)
        for param in spec.params:
            if param.cli:
                param.add_to(p, described=True)
    from bot.digest.cli import add_arguments as add_digest_arguments
    from bot.watch import add_arguments as add_watch_arguments

    add_watch_arguments(command("watch", "the sentinel on a terminal: print lost GPUs, a "
                                         "GPU stack down and GPU work pending as they happen"))
    add_digest_arguments(command("digest", "the daily digest: GPUs lost per pool, the "
                                           "longest-pending work, idle and stranded GPUs"))
    p = command("completion", "shell completion script: gpubot completion bash|zsh|fish",
                flags=False)
    p.add_argument("shell", choices=("bash", "zsh", "fish"))
    p = command("snapshot", "write what gpubot reads of a cluster as a snapshot "
                "(-o DIR|FILE.tgz), anonymized if asked", flags=False)
    from bot.collect import command as snapshot_command

    p.description, p.epilog = snapshot_command.DESCRIPTION, snapshot_command.EXAMPLES
    snapshot_command.add_arguments(p, _duration)
    p = command("serve", "run the Slack bot (Socket Mode or HTTP) on a snapshot or a cluster",
                flags=False)
    from bot.serve import DESCRIPTION as SERVE_DESCRIPTION
    from bot.serve import EXAMPLES as SERVE_EXAMPLES
    from bot.serve import add_arguments as add_serve_arguments

    p.description, p.epilog = SERVE_DESCRIPTION, SERVE_EXAMPLES
    add_serve_arguments(p)
    # serve's own --snapshot/--kubeconfig/--context/--config: given before `serve`, they
    # must stay.
    for action in p._actions:
        if action.dest in ("snapshot", "kubeconfig", "context", "config"):
            action.default = argparse.SUPPRESS
    return parser


class _Usage(GpubotError):
    pass


def _metrics(spec: CommandSpec, args: argparse.Namespace, environ: Mapping[str, str]
             ) -> PrometheusMetrics | None:
    return _prometheus(spec, args.prometheus or environ.get("GPUBOT_PROMETHEUS_URL"), environ)


def _prometheus(spec: CommandSpec, url: str | None, environ: Mapping[str, str]
                ) -> PrometheusMetrics | None:
    """The Prometheus at ``url`` when ``spec`` reads metrics (a cluster's, in a fleet)."""
    if not spec.metrics or not url:
        return None  # and httpx is not imported at all
    from bot.metrics.prometheus import prometheus_from_env
    from handlers.runtime.source import MetricsError

    try:
        return prometheus_from_env(url, environ)
    except MetricsError as e:
        raise _Usage(str(e)) from None


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None, stdin: BinaryIO | None = None,
         environ: Mapping[str, str] | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    environ = os.environ if environ is None else environ
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        args = build_parser().parse_args(argv)
    if args.command == "serve":
        from bot.serve import serve

        return serve(args, whole_process=True)
    if args.command == "snapshot":
        from bot.collect.command import run as snapshot

        return snapshot(args, err)
    if args.command == "completion":
        from bot.completion import script

        out.write(script(args.shell, build_parser()))
        return EXIT_OK
    from handlers.knowledge.logs import LogPatternError, use_user_file
    from handlers.kube.selectors import SelectorError
    from handlers.target import UsageError

    try:
        use_user_file(args.log_patterns or environ.get("GPUBOT_LOG_PATTERNS_FILE") or None)
    except LogPatternError as e:
        err.write(f"gpubot: error: --log-patterns: {e}\n")
        return EXIT_USAGE
    from bot.runbook import RunbookError, from_env

    try:
        runbooks = from_env(environ, args.runbook_base_url)
    except RunbookError as e:
        err.write(f"gpubot: error: {e}\n")
        return EXIT_USAGE
    if args.command in ("watch", "digest"):  # no CommandSpec: they read more than a view
        # watch --cluster NAME: one configured cluster, its incidents named (bot/watch.py).
        if args.all_clusters or (args.cluster and args.command == "digest"):
            err.write(f"gpubot: error: {args.command} reads one cluster: --snapshot, "
                      "--kubeconfig or --context"
                      f"{', or --cluster NAME' if args.command == 'watch' else ''}"
                      f", not --{'all-clusters' if args.all_clusters else 'cluster'}\n")
            return EXIT_USAGE
        from bot.digest.cli import main as digest_main
        from bot.watch import main as watch_main

        return (watch_main if args.command == "watch" else digest_main)(
            args, out, err, environ, stdin)
    spec = COMMANDS[args.command]
    if getattr(args, "png", None):
        from bot.chart import missing

        # Said before the diagnosis runs, not after it.
        if (why := missing()) is not None:
            err.write(f"gpubot: error: --png: {why}\n")
            return EXIT_USAGE
    from bot import clifleet
    from bot.cliview import CliUsage, failed_on, use_color, write_chart
    from bot.fleet import ClusterUnavailable, UnknownCluster
    from bot.fleet.search import AmbiguousTarget

    progress = Progress.on(err, enabled=args.output not in MACHINE_OUTPUTS, delay=PROGRESS_DELAY)
    try:
        with progress:
            clifleet.check_flags(args)
            settings = clifleet.load_settings(args, environ)
            fleet = clifleet.open_cli_fleet(args, settings, err, progress, stdin)
            try:
                clifleet.open_metrics(fleet, settings, lambda url: _prometheus(spec, url, environ),
                                      lambda: _metrics(spec, args, environ))
                # The context's namespace is TARGET's default, as in kubectl; pending and
                # quota are overviews and read every namespace unless -n. Which cluster:
                # bot/fleet/run.py, as /gpu's.
                answer = clifleet.run(fleet, spec, args)
            finally:
                clifleet.close(fleet)
    except (_Usage, CliUsage, ParamConflict, UsageError, SelectorError, UnknownCluster,
            AmbiguousTarget) as e:
        err.write(f"gpubot: error: {e}\n")
        return EXIT_USAGE
    except TargetNotFound as e:
        err.write(f"gpubot: {e}\n")
        return EXIT_NOT_FOUND
    except (ViewError, ClusterUnavailable) as e:
        err.write(f"gpubot: {e}\n")
        return EXIT_NOT_FOUND
    diag, source = answer.diagnosis, clifleet.source_of(fleet, answer)
    # Which cluster(s) answered, for tools: only when the config names clusters.
    where = ({} if not fleet.named else {"cluster": answer.cluster}
             if answer.cluster is not None else {"clusters": list(answer.clusters)})
    if getattr(args, "png", None) and not write_chart(diag, args.png, err):
        return EXIT_NOT_FOUND
    # jinja2 is a noticeable part of a start: --version, completion and serve need none.
    from bot.render import render_json, render_text, render_yaml

    if args.output == "json":
        out.write(render_json(diag, source=source, runbooks=runbooks, where=where) + "\n")
    elif args.output == "yaml":
        out.write(render_yaml(diag, source=source, runbooks=runbooks, where=where))
    else:
        from bot.table import terminal_width

        out.write(render_text(diag, color=use_color(args.color, out, environ), source=source,
                              wide=args.output == "wide", width=terminal_width(out, environ),
                              runbooks=runbooks))
    return EXIT_FINDINGS if failed_on(diag, args.fail_on) else EXIT_OK


def entry() -> None:
    """Console-script entry. A one-shot command makes few cycles and exits without
    tearing down its heap, so the cycle collector (which rescans every object read, ~40%
    of a cold diagnosis of a large cluster) is off, and exit skips freeing objects."""
    gc.disable()
    hold_until_exit()
    if sys.argv[1:2] == ["__complete"]:  # a TAB in a shell (bot/complete.py): never in --help
        from bot.complete import main as complete

        code = complete(sys.argv[2:], sys.stdout, os.environ, build_parser)
    else:
        code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `gpubot ... | head`
        pass
    os._exit(code)


if __name__ == "__main__":
    entry()
