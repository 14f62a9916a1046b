"""``gpubot __complete LINE [WORDBREAKS]``: the values a TAB completes, for the scripts of
``gpubot completion`` (``bot/completion.py``).

    gpubot __complete 'gpubot doctor --snapshot examples/gpu-fragmentation gpu-' ''

LINE is the command line up to the cursor; its last word is the one completed. Values come
from what the line names: ``--context`` the contexts of the kubeconfig (the file is read, the
cluster is not asked), ``-n``/``--namespace`` and ``quota NS`` namespaces, why-pending's
TARGET pending pods (``NS/POD``, or ``POD`` with ``-n``), ``doctor NODE`` nodes, ``--cluster``
the configured clusters. Namespaces, pods and nodes are read from the snapshot
(``--snapshot``) or the cluster (``--kubeconfig``, ``--context``) on the line.

A TAB must never hang a shell nor print into it: the whole run is cut at ``DEADLINE`` seconds
and anything that goes wrong (no kubeconfig, a cluster that does not answer, a snapshot that
does not load) prints nothing. WORDBREAKS is bash's ``COMP_WORDBREAKS``: bash replaces only
the part of the word after the last of them (``--context=arn:aws:eks:...`` is several bash
words), so a value is printed from there on.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from bot.fleet.config import ClusterConfig
    from handlers.view import ClusterView

DEADLINE = 2.0  # seconds for a whole completion, cluster included
# What a value completes to: by the argparse dest of an option or a positional.
OPTION_VALUES = {"context": "contexts", "namespace": "namespaces", "cluster": "clusters"}
POSITIONAL_VALUES = {"target": "pods", "node": "nodes", "ns_arg": "namespaces"}
# Values that need the cluster or the snapshot (contexts and clusters are read from files).
_FROM_CLUSTER = {"namespaces", "pods", "nodes"}
_QUOTES = "\"'"


@dataclass
class Line:
    """A command line, as far as completion reads it."""

    command: str | None = None
    given: dict[str, str] = field(default_factory=dict)  # dest -> its value on the line
    positionals: list[str] = field(default_factory=list)  # after the command
    what: str | None = None  # the values the last word wants ("pods", ...), if any
    typed: str = ""  # the value as typed so far
    before: str = ""  # what precedes the value in its word: "--context=", "-n"


def dynamic_options(parser: argparse.ArgumentParser) -> list[str]:
    """The option strings whose value ``__complete`` completes, over every command."""
    found: set[str] = set()
    for p in [parser, *_commands(parser).values()]:
        for action in p._actions:
            if action.option_strings and action.dest in OPTION_VALUES and action.nargs != 0:
                found.update(action.option_strings)
    return sorted(found)


def dynamic_commands(parser: argparse.ArgumentParser) -> list[str]:
    """The commands with a positional that ``__complete`` completes."""
    return sorted(name for name, p in _commands(parser).items()
                  if any(not a.option_strings and a.dest in POSITIONAL_VALUES
                         for a in p._actions))


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def split_line(line: str) -> list[str]:
    """The words of LINE as the shell will pass them; the last is the word being typed
    ("" after a space). An open quote is closed, as the user has not finished typing."""
    for closing in ("", '"', "'"):
        try:
            words = shlex.split(line + closing)
        except ValueError:
            continue
        if not closing and line[-1:].isspace() and not line.endswith("\\" + line[-1]):
            words.append("")
        return words or [""]
    return [""]


def read_line(parser: argparse.ArgumentParser, words: Sequence[str]) -> Line:
    """What the words (the program's name first) give and what their last one wants."""
    commands = _commands(parser)
    line = Line()
    current = parser
    pending: argparse.Action | None = None
    for word in words[1:-1]:
        if pending is not None:
            line.given[pending.dest] = word
            pending = None
        elif word.startswith("-") and word != "-":
            action, value = _option(current, word)
            if action is not None and action.nargs != 0:
                if value is None:
                    pending = action
                else:
                    line.given[action.dest] = value
        elif line.command is None and word in commands:
            line.command, current = word, commands[word]
        elif line.command is not None:
            line.positionals.append(word)
    last = words[-1] if len(words) > 1 else ""
    if pending is not None:
        line.what, line.typed = OPTION_VALUES.get(pending.dest), last
    elif last.startswith("-") and last != "-":
        action, value = _option(current, last)
        if action is not None and value is not None and action.nargs != 0:
            line.what, line.typed = OPTION_VALUES.get(action.dest), value
            line.before = last[:len(last) - len(value)]
    elif line.command is not None:
        places = [a for a in current._actions if not a.option_strings]
        if len(line.positionals) < len(places):
            line.what = POSITIONAL_VALUES.get(places[len(line.positionals)].dest)
            line.typed = last
    return line


def _option(parser: argparse.ArgumentParser, word: str
            ) -> tuple[argparse.Action | None, str | None]:
    """The option a word names and the value it carries: ``--context=prod``, ``-nml``."""
    table = parser._option_string_actions
    if word in table:
        return table[word], None
    if word.startswith("--") and "=" in word:
        name, value = word.split("=", 1)
        return table.get(name), value
    if not word.startswith("--") and word[:2] in table:
        return table[word[:2]], word[2:]
    return None, None


# -- the values ------------------------------------------------------------------------------


def values(line: Line, environ: Mapping[str, str], timeout: float) -> list[str]:
    """Every value of ``line.what`` (not yet filtered by what was typed). Raises whatever
    reading them raises: the caller prints nothing then."""
    if line.what == "contexts":
        return contexts(line.given.get("kubeconfig"), environ)
    if line.what == "clusters":
        return [c.name for c in _clusters(line, environ)]
    if line.what not in _FROM_CLUSTER:
        return []
    view = _open_view(line, environ, timeout)
    if line.what == "nodes":
        return [_name(n) for n in view.list("Node")]
    if line.what == "namespaces":
        return _namespaces(view)
    namespace = line.given.get("namespace")
    if namespace:
        return [_name(p) for p in _pending(view, namespace)]
    # NS/POD: a namespace typed so far narrows what is read.
    ns_typed = line.typed.split("/", 1)[0] if "/" in line.typed else None
    return [f"{p['metadata'].get('namespace')}/{_name(p)}" for p in _pending(view, ns_typed)]


def contexts(kubeconfig: str | None, environ: Mapping[str, str]) -> list[str]:
    """The contexts of the kubeconfig gpubot would read (``--kubeconfig``, else
    ``$KUBECONFIG``'s files, else ``~/.kube/config``), in their order."""
    import yaml

    paths = kubeconfig or environ.get("KUBECONFIG") or "~/.kube/config"
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    names: list[str] = []
    for path in paths.split(os.pathsep):
        if not path:
            continue
        try:
            with open(os.path.expanduser(path), "rb") as f:
                doc = yaml.load(f, Loader=loader)
        except (OSError, yaml.YAMLError):
            continue
        listed = doc.get("contexts") if isinstance(doc, dict) else None
        for ctx in listed if isinstance(listed, list) else []:
            name = ctx.get("name") if isinstance(ctx, dict) else None
            if isinstance(name, str) and name not in names:
                names.append(name)
    return names


def _clusters(line: Line, environ: Mapping[str, str]) -> list[ClusterConfig]:
    """The configured clusters: ``$GPUBOT_CLUSTERS``, else the ``clusters`` of the config
    file (``--config`` on the line, else ``$GPUBOT_CONFIG``), as ``bot/clifleet.py`` reads
    them."""
    from bot.fleet.config import parse_clusters

    text = environ.get("GPUBOT_CLUSTERS")
    if not text:
        path = line.given.get("config") or environ.get("GPUBOT_CONFIG")
        if not path:
            return []
        import yaml

        with open(os.path.expanduser(path), "rb") as f:
            doc = yaml.safe_load(f)
        text = doc.get("clusters") if isinstance(doc, dict) else None
    return list(parse_clusters(text) or ())


def _open_view(line: Line, environ: Mapping[str, str], timeout: float) -> ClusterView:
    source = {k: line.given.get(k) for k in ("snapshot", "kubeconfig", "context")}
    if line.given.get("cluster") or not any(source.values()):
        # The cluster --cluster names; none named, the first configured (the CLI's default).
        clusters = _clusters(line, environ)
        chosen = [c for c in clusters if c.name == line.given.get("cluster")] or clusters[:1]
        if chosen:
            source = chosen[0].source_settings()
    snapshot = source.get("snapshot")
    if snapshot:
        if snapshot == "-":
            raise ValueError("a snapshot on standard input is not read for a completion")
        from bot.snapshot import load_snapshot

        return load_snapshot(os.path.expanduser(snapshot))
    from bot.live import RetryPolicy, open_live_view

    kubeconfig = source.get("kubeconfig")
    return open_live_view(os.path.expanduser(kubeconfig) if kubeconfig else None,
                          source.get("context"), timeout=timeout, max_workers=1,
                          retry=RetryPolicy(attempts=1))


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def _namespaces(view: ClusterView) -> list[str]:
    names = [_name(n) for n in view.list("Namespace")]
    # A snapshot of pods alone has no Namespace objects: its pods' namespaces then.
    return names or sorted({str(p["metadata"].get("namespace", "")) for p in view.list("Pod")})


def _pending(view: ClusterView, namespace: str | None) -> list[Mapping[str, Any]]:
    pods = view.list("Pod", namespace, field_selector="status.phase=Pending")
    return [p for p in pods if p.get("status", {}).get("phase") == "Pending"]


# -- the words printed -----------------------------------------------------------------------


def replies(line: Line, found: Sequence[str], wordbreaks: str) -> list[str]:
    """The values that continue what was typed, each as the shell replaces its word: from
    after the typed word's last wordbreak (bash), whole otherwise."""
    typed = line.before + line.typed
    breaks = set(wordbreaks) - set(" \t\n" + _QUOTES)
    cut = max((i + 1 for i, ch in enumerate(typed) if ch in breaks), default=0)
    out: list[str] = []
    for value in found:
        word = line.before + value
        if value and word.startswith(typed) and word[cut:] not in out:
            out.append(word[cut:])
    return sorted(out)


def complete(parser: argparse.ArgumentParser, line_text: str, wordbreaks: str,
             environ: Mapping[str, str], timeout: float = DEADLINE) -> list[str]:
    """The replies to a TAB at the end of ``line_text``."""
    line = read_line(parser, split_line(line_text))
    if line.what is None:
        return []
    return replies(line, values(line, environ, timeout), wordbreaks)


def main(argv: Sequence[str], out: TextIO, environ: Mapping[str, str],
         build_parser: Callable[[], argparse.ArgumentParser]) -> int:
    """``gpubot __complete LINE [WORDBREAKS]``: exits 0 and prints nothing on any failure,
    and within ``DEADLINE`` seconds whatever the cluster does."""
    started = time.monotonic()
    _quiet_and_bounded(DEADLINE)
    if not argv:
        return 0
    try:
        # Each request gets what is left; the alarm ends the rest (a kubeconfig's exec
        # plugin, a snapshot too big to read in time).
        left = DEADLINE - (time.monotonic() - started) - 0.3
        found = complete(build_parser(), argv[0], argv[1] if len(argv) > 1 else "",
                         environ, timeout=max(left, 0.2))
    except Exception:  # a completion prints nothing rather than a traceback
        return 0
    if found:
        out.write("\n".join(found) + "\n")
    return 0


def _quiet_and_bounded(deadline: float) -> None:
    """Nothing reaches the terminal but the replies, and the process ends at ``deadline``
    seconds without printing (the shell then completes nothing)."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, lambda *_: os._exit(0))
        signal.setitimer(signal.ITIMER_REAL, deadline)
