"""``gpubot snapshot [-n NS | -A] [--anonymize] -o DIR|FILE.tgz``: the CLI's side of it."""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bot.progress import Progress

if TYPE_CHECKING:
    from bot.snapshot.manifest import Manifest, Refusal
    from handlers.view import ClusterView

    from .anonymize import Anonymizer
    from .collector import Capture

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

DESCRIPTION = """\
Write what gpubot reads of a cluster (every kind its commands read, and the logs of the GPU
stack's pods, GPU pods and pods not running as they should) as a snapshot that any gpubot
command reads with --snapshot. Kinds the cluster refuses are listed in the snapshot as not
captured, so a diagnosis from it says "not checked" rather than "none".
"""
EXAMPLES = """examples:
  gpubot snapshot -o ./snap                        every namespace, the current context
  gpubot snapshot -n ml-team --anonymize -o ml-team.tgz --mapping ml-team-names.json
  gpubot why-pending ml-team/train-0 --snapshot ml-team.tgz
  gpubot snapshot --snapshot ./dump --anonymize -o shareable.tgz   anonymize a snapshot
"""


def add_arguments(p: argparse.ArgumentParser, duration: Any) -> None:
    p.add_argument("-o", "--output", dest="out", metavar="DIR|FILE.tgz", required=True,
                   help="a new (or empty) directory, or a .tgz / .tar.gz file to create")
    p.add_argument("-n", "--namespace", metavar="NS", default=argparse.SUPPRESS,
                   help="NS's objects, and from other namespaces only what their diagnoses "
                        "need: nodes, pods holding them, the GPU stack (default: every "
                        "namespace)")
    p.add_argument("-A", "--all-namespaces", action="store_true",
                   help="every namespace (the default)")
    p.add_argument("--anonymize", action="store_true",
                   help="replace namespace, pod, node and user names consistently; drop env "
                        "values, Secret references and annotations (README: Snapshots)")
    p.add_argument("--mapping", metavar="FILE",
                   help="with --anonymize: also write each original name and its pseudonym "
                        "to FILE (JSON), to read answers about the snapshot; keep it, it is "
                        "not part of the snapshot")
    p.add_argument("--snapshot", metavar="PATH", default=argparse.SUPPRESS,
                   help="read a snapshot instead of a cluster (to anonymize one)")
    p.add_argument("--kubeconfig", metavar="FILE", default=argparse.SUPPRESS,
                   help="kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config; "
                        "in a pod: its service account)")
    p.add_argument("--context", metavar="NAME", default=argparse.SUPPRESS,
                   help="kubeconfig context (default: its current-context)")
    p.add_argument("--timeout", metavar="DURATION", type=duration, default=argparse.SUPPRESS,
                   help="timeout of each API request: 5s, 1m (default 10s)")


def run(args: argparse.Namespace, err: TextIO) -> int:
    # Imported here: building the CLI's parser (every `gpubot --version`, `completion` and
    # completion TAB) would otherwise read the whole discovery chain (~130 ms).
    from bot.snapshot.manifest import Manifest
    from bot.version import version
    from handlers.view import ViewError

    from . import writer
    from .anonymize import Anonymizer
    from .collector import collect

    namespace = getattr(args, "namespace", None)
    source = getattr(args, "snapshot", None)
    kubeconfig, context = getattr(args, "kubeconfig", None), getattr(args, "context", None)
    out = Path(args.out)
    problem = None
    if namespace and args.all_namespaces:
        problem = "give -n NS or -A, not both"
    elif args.mapping and not args.anonymize:
        problem = "--mapping goes with --anonymize"
    elif source and (kubeconfig or context):
        problem = ("--snapshot reads files; --kubeconfig/--context read a live cluster: give "
                   "one or the other")
    elif args.mapping and _inside(Path(args.mapping), out):
        problem = f"--mapping {args.mapping}: keep it out of the snapshot ({out})"
    if problem is None:
        try:
            writer.check_output(out)
        except writer.OutputError as e:
            problem = str(e)
    if problem is not None:
        err.write(f"gpubot: error: {problem}\n")
        return EXIT_USAGE
    progress = Progress.on(err)
    try:
        with progress:
            view = _open(source, kubeconfig, context, getattr(args, "timeout", 10.0), progress)
            cap = collect(view, namespace, say=progress.show)
    except ViewError as e:
        err.write(f"gpubot: {e}\n")
        return EXIT_FAILED
    objects, logs = cap.objects, cap.logs
    anon = Anonymizer(objects) if args.anonymize else None
    if anon is not None:
        objects = {k: [anon.object(k, o) for o in os] for k, os in objects.items()}
        logs = anon.logs(logs)
    manifest = Manifest(
        captured_at=cap.captured_at,
        namespaces=((anon.value(namespace) if anon else namespace),) if namespace else None,
        anonymized=anon is not None,
        not_captured=[_anonymized(r, anon, getattr(view, "server", None))
                      for r in cap.refused],
        objects={k: len(v) for k, v in objects.items()}, logs=len(logs), version=version(),
        source=None if anon else view.source)
    try:
        writer.write(out, writer.files(objects, logs, manifest))
        if anon is not None and args.mapping:
            Path(args.mapping).write_text(json.dumps(anon.names, indent=1, sort_keys=True))
    except OSError as e:
        err.write(f"gpubot: cannot write the snapshot to {out}: {e.strerror or e}\n")
        return EXIT_FAILED
    _summary(err, out, view.source, cap, manifest, anon)
    return EXIT_OK


def _open(source: str | None, kubeconfig: str | None, context: str | None, timeout: float,
          progress: Progress) -> ClusterView:
    if source:
        from bot.snapshot import load_snapshot

        # Whole objects, as from a live cluster: a snapshot is read by later releases too.
        return load_snapshot(source, progress=progress.files, whole=True)
    from bot.live import open_live_view

    live = open_live_view(kubeconfig, context, timeout=timeout)
    live.lean = False  # whole objects: a snapshot is read by later releases too
    live.transport.on_page = progress.pages
    return live


def _anonymized(r: Refusal, anon: Anonymizer | None, server: str | None) -> Refusal:
    """A refusal as the anonymized snapshot tells it: names replaced, the server unnamed."""
    if anon is None:
        return r
    reason = r.reason.replace(server, "the API server") if server else r.reason
    return replace(r, reason=anon.text(reason),
                   namespace=anon.value(r.namespace) if r.namespace else None)


def _inside(path: Path, directory: Path) -> bool:
    try:
        return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(directory))
    except ValueError:
        return False


def _summary(err: TextIO, out: Path, source: str, cap: Capture, manifest: Manifest,
             anon: Anonymizer | None) -> None:
    from bot.snapshot.manifest import FILE_NAME

    scope = f"namespace {cap.namespace}" if cap.namespace else "every namespace"
    total = sum(manifest.objects.values())
    err.write(f"gpubot: wrote {out} from {source} ({scope}): {total:,} objects of "
              f"{len(manifest.objects)} kinds, {manifest.logs:,} container logs\n")
    if manifest.not_captured:
        # One line: the kinds and the short reason; the whole message (with the RBAC rule
        # that would allow the read) is in the manifest.
        why: dict[str, list[str]] = {}
        for r in manifest.not_captured:
            why.setdefault(_short(r), []).append(f"{r.kind}{r.where()}")
        missing = "; ".join(f"{', '.join(what)} ({reason})" for reason, what in why.items())
        err.write(f"gpubot: not captured: {missing}. Why, and the RBAC rules that allow "
                  f"them: {FILE_NAME} in the snapshot\n")
    if cap.log_failures:
        err.write(f"gpubot: {cap.log_failures} container logs could not be read\n")
    if anon is not None:
        n = anon.renamed
        err.write(f"gpubot: anonymized: {_count(n['namespaces'], 'namespace')}, "
                  f"{_count(n['nodes'], 'node')}, {_count(n['objects'], 'object')} and "
                  f"{_count(n['users'], 'user')} renamed; env values, "
                  "Secret references and annotations dropped. Container logs are the "
                  "workloads' own text: read them before sharing.\n")


def _short(r: Refusal) -> str:
    """The gist of a refusal: ``forbidden``, ``not in the snapshot (...)``."""
    text = r.reason.removeprefix(f"{r.kind}: ")
    return re.split(r"[:;(]", text, maxsplit=1)[0].strip()[:80]


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
