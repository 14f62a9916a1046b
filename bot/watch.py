"""``gpubot watch``: the sentinel on a terminal, for a user with no Slack.

    gpubot watch --context prod                          # until Ctrl-C
    gpubot watch --lost-after 1m --pending-after 30m -o json
    gpubot watch --snapshot ./dump                       # one look (implies --once)
    gpubot watch --cluster prod                          # a configured cluster: named

On a live cluster it keeps a watch cache of the kinds the detectors read (Node, Pod,
ResourceSlice), listens to its changes and runs the sentinel (``bot/sentinel``) with a
publisher that prints each incident as it opens, changes and resolves (with its duration
and GPU-hours). Incidents are kept in a store: a temporary SQLite file, deleted at exit,
unless ``--store-path`` names one to keep (then a restart continues them, and ``gpubot
digest --store-path`` reads them). It never shares the bot's store: that one's incidents
belong to the bot's Slack threads.

``--once`` (and every ``--snapshot``) looks once and prints what is wrong now. How long it
has lasted is known only where the objects say since when (a pod's creation, its Ready
condition's last change); a Node only says what it is now.

Exit codes: 0 stopped (Ctrl-C) or looked once; 1 the cluster or snapshot cannot be read;
2 usage errors; 3 ``--once --fail-on ...`` saw something that has lasted past its threshold.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, BinaryIO, TextIO

from bot.durations import parse_duration

if TYPE_CHECKING:
    from bot.live.cache import WatchCache
    from bot.sentinel.incidents import Incident
    from bot.sentinel.service import Sentinel, TickResult
    from bot.store import Store
    from handlers.view import ClusterView

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_FOUND = 0, 1, 2, 3
# The detectors' settings, as serve reads them (GPUBOT_*), and their flags.
THRESHOLDS = ("lost_after", "plugin_down_after", "pending_after")

EXAMPLES = """examples:
  gpubot watch                                   # the current kubeconfig context
  gpubot watch --context prod --lost-after 1m --pending-after 30m
  gpubot watch -o json | jq 'select(.event == "resolved")'
  gpubot watch --store-path ~/.local/state/gpubot/watch.db   # keep incidents across runs
  gpubot watch --once -o json                    # one look at the cluster
  gpubot watch --snapshot examples/plugin-crashloop-cuda-mismatch
"""


class UsageError(Exception):
    pass


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``watch``'s own flags (the global ones come from ``bot/cli.py``)."""
    g = p.add_argument_group("watch")
    g.add_argument("--once", action="store_true",
                   help="look once, print what is wrong now and exit (always so with "
                        "--snapshot)")
    g.add_argument("--lost-after", metavar="DURATION", type=_duration,
                   help="a node's GPUs missing from allocatable this long opens an incident "
                        "(default: $GPUBOT_LOST_AFTER, else 5m)")
    g.add_argument("--plugin-down-after", metavar="DURATION", type=_duration,
                   help="a device-plugin, driver or toolkit pod down this long "
                        "(default: $GPUBOT_PLUGIN_DOWN_AFTER, else 5m)")
    g.add_argument("--pending-after", metavar="DURATION", type=_duration,
                   help="a GPU pod Pending this long (default: $GPUBOT_PENDING_AFTER, "
                        "else 15m)")
    g.add_argument("--quiet-for", metavar="DURATION", type=_duration,
                   help="back within this long after resolving: the same incident "
                        "(default: $GPUBOT_QUIET_FOR, else 15m)")
    g.add_argument("--interval", metavar="DURATION", type=_duration,
                   help="seconds between timer evaluations; changes are evaluated as they "
                        "come (default: $GPUBOT_SENTINEL_INTERVAL, else 15s)")
    g.add_argument("--store-path", metavar="FILE",
                   help="keep incidents in this SQLite file (a file of its own, not the "
                        "bot's store); default: a temporary one, deleted at exit")
    p.epilog = EXAMPLES


def settings(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, float]:
    """Every threshold, the interval and quiet_for: flag, else the variable serve reads,
    else the default. Raises UsageError for a variable that is not a duration."""
    from bot.slack.config import ENV, Settings
    from handlers.sentinel.detectors import REGISTRY

    defaults: dict[str, float] = {d.setting: d.default for d in REGISTRY.values()}
    defaults.update(quiet_for=Settings.quiet_for, sentinel_interval=Settings.sentinel_interval)
    flags = {"sentinel_interval": "interval"}
    out: dict[str, float] = {}
    for name, default in defaults.items():
        given = getattr(args, flags.get(name, name), None)
        if given is None and (text := environ.get(ENV.get(name, ""), "")):
            try:
                given = parse_duration(text)
            except ValueError as err:
                raise UsageError(f"{ENV[name]}: {err}") from None
        out[name] = float(given if given is not None else default)
    return out


def main(args: argparse.Namespace, out: TextIO, err: TextIO, environ: Mapping[str, str],
         stdin: BinaryIO | None = None, stop: threading.Event | None = None) -> int:
    from bot.cliview import MACHINE_OUTPUTS, open_view, use_color
    from bot.progress import Progress
    from handlers.view import ViewError

    once = bool(args.once or args.snapshot)
    try:
        cluster = _cluster(args, environ)
        limits = settings(args, environ)
        if args.output == "yaml":
            raise UsageError("watch prints text or JSON lines: -o text or -o json")
        if once and args.store_path:
            raise UsageError("--store-path keeps incidents of a watch that runs: not with "
                             "--once or --snapshot")
        if args.fail_on and not once:
            raise UsageError("--fail-on applies to one look (--once or --snapshot)")
    except UsageError as e:
        err.write(f"gpubot: error: {e}\n")
        return EXIT_USAGE
    as_json = args.output == "json"
    color = use_color(args.color, out, environ)
    progress = Progress.on(err, enabled=args.output not in MACHINE_OUTPUTS)
    try:
        with progress:
            view = open_view(args, err, progress, stdin)
            if once:
                return _once(view, args, out, err, limits, as_json, color)
    except ViewError as e:
        err.write(f"gpubot: {e}\n")
        return EXIT_NOT_FOUND
    try:
        _reachable(view)
    except ViewError as e:
        err.write(f"gpubot: {e}\n")
        return EXIT_NOT_FOUND
    return _watch(view, args, out, err, limits, as_json, color, stop or threading.Event(),
                  cluster)


def _cluster(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """``--cluster NAME``: that configured cluster's source put in ``args`` (as ``gpubot
    serve`` opens it), and its name, which its incidents carry; None without the flag.
    Raises UsageError."""
    name = getattr(args, "cluster", None)
    if not name:
        return None
    from bot import clifleet
    from bot.cliview import CliUsage

    try:
        clifleet.check_flags(args)
        found = clifleet.load_settings(args, environ)
    except CliUsage as e:
        raise UsageError(str(e)) from None
    configs = {c.name: c for c in (found.clusters or ())} if found is not None else {}
    if not configs:
        raise UsageError(f"--cluster needs clusters: {clifleet.HOW_TO_CONFIGURE}")
    if name not in configs:
        raise UsageError(f"no cluster {name!r} (clusters: {', '.join(configs)})")
    config = configs[name]
    for key, value in config.source_settings().items():
        setattr(args, key, None if config.in_cluster else value)
    return str(name)


def _reachable(view: ClusterView) -> None:
    """Raise when the API server cannot be reached or refuses the credentials: a watch
    would otherwise retry in silence."""
    from handlers.view import ViewError

    try:
        view.get("Namespace", "default")
    except ViewError as err:
        if type(err).__name__ in ("ApiUnreachable", "ApiUnauthorized", "KubeconfigError"):
            raise
        # Forbidden still proves the API server answers.


def _namespace_filter(args: argparse.Namespace) -> str | None:
    return str(args.namespace) if getattr(args, "namespace", None) else None


def _once(view: ClusterView, args: argparse.Namespace, out: TextIO, err: TextIO,
          limits: Mapping[str, float], as_json: bool, color: bool) -> int:
    from bot.sentinel.printer import observed, print_observed
    from bot.sentinel.watcher import Watcher

    now = view.now().timestamp()  # a snapshot's own time: its newest timestamp
    watcher = Watcher(view, clock=lambda: now)
    watcher.scan()
    watcher.evaluate()
    ns = _namespace_filter(args)
    groups = [g for g in observed(watcher.seen, limits)
              if ns is None or all(s.obs.namespace in (None, ns) for s in g.members)]
    print_observed(out, groups, now, as_json=as_json, color=color, live=not args.snapshot)
    if not groups and not as_json:
        out.write("Nothing wrong: no GPUs lost, no GPU stack down, no GPU pod pending.\n")
    for problem in watcher.errors[:5]:
        err.write(f"gpubot: not checked: {problem}\n")
    if args.fail_on and any(g.due(now) for g in groups):
        return EXIT_FOUND
    return EXIT_OK


@contextlib.contextmanager
def _incident_store(path: str | None) -> Iterator[Store]:
    from bot.store import open_store

    if path:
        Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        store = open_store("sqlite", path=str(Path(path).expanduser()))
        try:
            yield store
        finally:
            store.close()
        return
    with tempfile.TemporaryDirectory(prefix="gpubot-watch-") as tmp:
        store = open_store("sqlite", path=os.path.join(tmp, "incidents.db"))
        try:
            yield store
        finally:
            store.close()


def _watch(view: ClusterView, args: argparse.Namespace, out: TextIO, err: TextIO,
           limits: dict[str, float], as_json: bool, color: bool, stop: threading.Event,
           cluster: str | None = None) -> int:
    from bot.sentinel.incidents import IncidentBook
    from bot.sentinel.printer import TerminalPublisher
    from bot.sentinel.service import Sentinel
    from bot.sentinel.watcher import Watcher
    from bot.store import StoreError

    ns = _namespace_filter(args)

    def visible(inc: Incident) -> bool:
        return ns is None or not inc.namespaces or ns in inc.namespaces

    watcher = Watcher(view)
    cache: WatchCache | None = None
    try:
        with _incident_store(args.store_path) as store:
            # A configured cluster's incidents carry its name (printed with each).
            book = IncidentBook(store, quiet_for=limits["quiet_for"], cluster=cluster or "")
            if any((i.posted or {}).get("channel") for i in book.all()):
                err.write(f"gpubot: error: --store-path {args.store_path}: the Slack bot's "
                          "store (its incidents have cards): give watch a file of its own\n")
                return EXIT_USAGE
            cache = view.watch(kinds=sorted(watcher.kinds))  # type: ignore[attr-defined]
            publisher = TerminalPublisher(out, as_json=as_json, color=color, visible=visible)
            thresholds = {k: v for k, v in limits.items() if k in THRESHOLDS}
            sentinel = Sentinel(watcher, book, publisher, thresholds, ready=cache.settled,
                                interval=limits["sentinel_interval"],
                                on_tick=_synced_note(err, cache))
            cache.listen(sentinel)  # the first tick once synced scans everything anyway
            where = f"cluster {cluster} · {view.source}" if cluster else view.source
            err.write(f"gpubot: watching {where}: "
                      + ", ".join(f"{k} {_age(v)}" for k, v in sorted(thresholds.items()))
                      + f"; quiet_for {_age(limits['quiet_for'])}"
                      + (f"; incidents kept in {args.store_path}" if args.store_path else "")
                      + ". Ctrl-C to stop.\n")
            with _until_interrupted(stop, sentinel):
                sentinel.run(stop)
    except StoreError as e:
        err.write(f"gpubot: {e}\n")
        return EXIT_NOT_FOUND
    finally:
        if cache is not None:
            cache.stop()
        close = getattr(view, "close", None)
        if callable(close):
            close()
    return EXIT_OK


def _age(seconds: float) -> str:
    from handlers.timefmt import age_text

    return age_text(seconds) if seconds >= 60 else f"{seconds:g}s"


def _synced_note(err: TextIO, cache: WatchCache) -> Callable[[TickResult, float], None]:
    """On the first tick after the cache synced: say what is watched (stderr)."""
    said = False

    def note(result: TickResult, seconds: float) -> None:
        nonlocal said
        if said:
            return
        said = True
        kinds = cache.stats().get("kinds", {})
        counts = ", ".join(f"{v.get('objects', 0)} {k}s" for k, v in sorted(kinds.items())
                           if v.get("synced") and not v.get("missing"))
        err.write(f"gpubot: synced ({counts or 'nothing served'}); evaluated "
                  f"{result.evaluated} objects in {seconds:.2f} s. Watching.\n")

    return note


@contextlib.contextmanager
def _until_interrupted(stop: threading.Event, sentinel: Sentinel) -> Iterator[None]:
    """Ctrl-C and SIGTERM end the watch cleanly (the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        sentinel.wake()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)

