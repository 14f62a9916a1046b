"""``/gpu`` arguments: normalise what Slack clients type, parse kubectl-style, route.

    parse("why-pending ml-team/train-0 —namespace ml-team")   # em dash from autocorrect
    -> Command(name="why-pending", target="ml-team/train-0", namespace="ml-team")

A ``CommandError`` says what was wrong and carries an example to show the user.
``ROUTES`` is the command registry (``handlers/registry.py``): each command's parser, words,
scope and handler come from there.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
from dataclasses import dataclass, fields, replace
from typing import Any, NoReturn

from bot.fleet.merge import ALL_CLUSTERS
from bot.slack.mrkdwn import code, escape
from handlers.errors import GpubotError
from handlers.model import Diagnosis
from handlers.registry import COMMANDS, CommandSpec, ParamConflict, Scope
from handlers.view import Reader

__all__ = ["ALIASES", "ROUTES", "Command", "CommandError", "Scope", "normalise", "parse",
           "parse_args", "run", "target_namespace", "tokenize"]

# -- normalisation ---------------------------------------------------------------------------

_QUOTES = str.maketrans({
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u00ab": '"', "\u00bb": '"',
    "\u2033": '"', "\uff02": '"',
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "\uff07": "'",
})
# Hyphen look-alikes that always mean one "-".
_HYPHENS = str.maketrans({c: "-" for c in "\u2010\u2011\u2212\ufe63\uff0d"})
_SPACES = str.maketrans({c: " " for c in "\u00a0\u2002\u2003\u2007\u2009\u200a\u202f\u3000\t"})
_INVISIBLE = str.maketrans({c: None for c in "\u200b\u200c\u200d\u2060\ufeff"})
# En/em dashes (and figure dash, horizontal bar) that autocorrect makes out of "--" or "-".
_DASH_RUN = "\u2012\u2013\u2014\u2015"
_OPTION_DASH = re.compile(rf"(?:(?<=\s)|^)[{_DASH_RUN}-]*[{_DASH_RUN}][{_DASH_RUN}-]*(?=\w)")
_LINK = re.compile(r"<(?:https?|mailto):[^|>]*\|([^>]*)>|<((?:https?|mailto):[^|>]*)>")


def _option_dash(m: re.Match[str], text: str) -> str:
    word = re.match(r"[\w.-]*", text[m.end():])
    letters = word.group(0) if word else ""
    # "–n" / "—n ml" -> "-n"; "—namespace" -> "--namespace"; "—n=ml" -> "-n=ml".
    return "-" if len(letters.split("=")[0]) == 1 else "--"


def normalise(text: str) -> str:
    """What the user meant before their client helped: smart quotes, autocorrected dashes,
    non-breaking and zero-width spaces, Slack's HTML entities and auto-links undone."""
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    text = _LINK.sub(lambda m: m.group(1) if m.group(1) is not None else
                     re.sub(r"^(?:https?://|mailto:)", "", m.group(2)), text)
    text = text.translate(_INVISIBLE).translate(_SPACES).translate(_QUOTES)
    text = text.translate(_HYPHENS)
    text = _OPTION_DASH.sub(lambda m: _option_dash(m, text), text)
    # Any dash left inside a word: an em dash stands for "--", an en dash for "-".
    text = text.replace("\u2014", "--").replace("\u2015", "--")
    text = text.replace("\u2013", "-").replace("\u2012", "-")
    return text.strip()


# -- commands --------------------------------------------------------------------------------

HELP = "help"  # `help`, or `COMMAND --help` (Command("help", target=COMMAND))
ROUTES = COMMANDS
ALIASES = {alias: spec.name for spec in COMMANDS.values() for alias in spec.aliases}


class CommandError(GpubotError):
    """The user's arguments are wrong: ``str()`` says what (mrkdwn, user text escaped),
    ``example`` shows what works (plain text, shown as code)."""

    def __init__(self, message: str, example: str = "") -> None:
        super().__init__(message)
        self.example = example


@dataclass(frozen=True)
class Command:
    """A ``/gpu`` command as typed: what the Re-check button and the audit repeat. Its fields
    are the parameters ``/gpu`` takes (``Param.dest``)."""

    name: str
    target: str | None = None
    namespace: str | None = None
    node: str | None = None
    all_namespaces: bool = False
    # ``-c NAME`` anywhere on the line (bot/fleet): None: the channel's default, else the
    # fleet's one cluster, else every cluster searched for the target.
    cluster: str | None = None
    all_clusters: bool = False  # --all-clusters: nodes, pending

    def argv(self) -> list[str]:
        """The canonical arguments, as parse() takes them back (the Re-check button)."""
        out = [self.name]
        if self.target:
            out.append(self.target)
        if self.node:
            out.append(self.node)
        if self.namespace:
            out += ["-n", self.namespace]
        if self.all_namespaces:
            out.append("-A")
        if self.cluster:
            out += ["-c", self.cluster]
        if self.all_clusters:
            out.append("--all-clusters")
        return out

    def line(self) -> str:
        return " ".join(shlex.quote(a) for a in self.argv())

    @property
    def route(self) -> CommandSpec:
        return ROUTES[self.name]

    def given(self) -> dict[str, Any]:
        """Its parameters by name, as ``CommandSpec.bind`` takes them."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("name", "cluster", "all_clusters")}


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting."""

    def error(self, message: str) -> NoReturn:
        raise CommandError(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise CommandError(message or "bad arguments")


def _parser(spec: CommandSpec) -> _Parser:
    p = _Parser(prog=spec.name, add_help=False, allow_abbrev=False, exit_on_error=False)
    for param in spec.params:
        if param.slack:
            param.add_to(p, described=False)
    p.add_argument("-h", "--help", action="store_true")
    return p


def tokenize(text: str) -> list[str]:
    try:
        return shlex.split(normalise(text))
    except ValueError as err:  # "No closing quotation"
        raise CommandError(f"cannot read the arguments: {escape(str(err).lower())}",
                           "why-pending ml-team/train-0") from None


def parse(text: str) -> Command:
    """``/gpu`` text -> Command. Raises CommandError with an example."""
    return parse_args(tokenize(text))


def parse_args(args: list[str]) -> Command:
    """Tokens (as ``Command.argv()`` gives them) -> Command. Raises CommandError."""
    args, cluster, all_clusters = _cluster_flags(args)
    cmd = _parse_command(args)
    if all_clusters and cmd.name not in ALL_CLUSTERS:
        raise CommandError(f"{cmd.name}: --all-clusters is for "
                           f"{' and '.join(code(n) for n in ALL_CLUSTERS)}",
                           "pending --all-clusters")
    if all_clusters and cluster:
        raise CommandError("give -c NAME or --all-clusters, not both", "nodes --all-clusters")
    return replace(cmd, cluster=cluster, all_clusters=all_clusters) if (
        cluster or all_clusters) else cmd


_CLUSTER_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")


def _cluster_flags(args: list[str]) -> tuple[list[str], str | None, bool]:
    """``-c NAME``/``--cluster NAME``/``--cluster=NAME`` and ``--all-clusters``, taken
    out of the tokens wherever they are (global flags, as the CLI's)."""
    rest: list[str] = []
    cluster: str | None = None
    all_clusters = False
    i = 0
    while i < len(args):
        arg = args[i]
        value: str | None = None
        if arg in ("-c", "--cluster"):
            if i + 1 >= len(args):
                raise CommandError(f"{arg} needs a cluster name", "-c prod nodes")
            value, i = args[i + 1], i + 2
        elif arg.startswith("--cluster="):
            value, i = arg.partition("=")[2], i + 1
        elif arg == "--all-clusters":
            all_clusters, i = True, i + 1
            continue
        else:
            rest.append(arg)
            i += 1
            continue
        if not _CLUSTER_NAME.match(value):
            raise CommandError(f"{code(value)} is not a cluster name", "-c prod nodes")
        if cluster is not None and cluster != value:
            raise CommandError(f"two clusters given ({code(cluster)}, {code(value)})",
                               "-c prod nodes")
        cluster = value
    return rest, cluster, all_clusters


def _parse_command(args: list[str]) -> Command:
    if not args:
        return Command(HELP)
    word = args[0].lower()
    name = ALIASES.get(word, word)
    if name not in ROUTES:
        close = difflib.get_close_matches(name, list(ROUTES), n=1, cutoff=0.5)
        hint = f"; did you mean {code(close[0])}?" if close else ""
        raise CommandError(f"unknown command {code(args[0])}{hint}",
                           ROUTES[close[0]].example if close else HELP)
    spec = ROUTES[name]
    if name == HELP:
        return Command(HELP)
    if any(a in ("-h", "--help") for a in args[1:]):
        return Command(HELP, target=name)
    try:
        ns = _parser(spec).parse_args(args[1:])
    except (CommandError, argparse.ArgumentError) as err:
        raise CommandError(f"{name}: {escape(_tidy(spec, str(err)))} "
                           f"(usage: {code(spec.usage)})", spec.example) from None
    if ns.help:
        return Command(HELP, target=name)
    from handlers.target import UsageError

    try:
        values = spec.settle(vars(ns))
        cmd = Command(name, **{p.dest: values[p.dest] for p in spec.params
                               if p.slack and p.same_as is None})
        spec.bind(cmd.given())  # the target parsed now, so that a bad one is a usage error
    except ParamConflict as err:
        raise CommandError(_conflict(name, err), spec.example) from None
    except UsageError as err:
        raise CommandError(escape(str(err)), spec.example) from None
    return cmd


def _conflict(name: str, err: ParamConflict) -> str:
    if err.values is None:
        return f"{name}: give a {err.other.dest} or {err.param.flags[0]}, not both"
    first, second = err.values
    return f"{name}: two {err.other.dest}s given ({code(first)}, {code(second)})"


def _tidy(spec: CommandSpec, message: str) -> str:
    for param in spec.params:
        if param.missing:
            message = message.replace(
                f"the following arguments are required: {param.dest}", param.missing)
    return message.replace("unrecognized arguments:", "unexpected argument:")


def target_namespace(cmd: Command) -> str | None:
    """The namespace a command reads; None for every namespace (or none at all)."""
    params = cmd.route.bind(cmd.given())
    return params.target.namespace if params.target is not None else params.namespace


def run(reader: Reader, cmd: Command) -> Diagnosis:
    spec = ROUTES[cmd.name]
    if spec.run is None:
        raise CommandError(f"{cmd.name} runs no diagnosis")
    return spec.run(reader, spec.bind(cmd.given()))
