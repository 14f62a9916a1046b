"""``/gpu`` arguments: normalise what Slack clients type, parse kubectl-style, route.

    parse("why-pending ml-team/train-0 —namespace ml-team")   # em dash from autocorrect
    -> Command(name="why-pending", target="ml-team/train-0", namespace="ml-team")

A ``CommandError`` says what was wrong and carries an example to show the user.
``ROUTES`` maps each subcommand to its handler.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NoReturn

from bot.slack.mrkdwn import code, escape
from handlers.errors import GpubotError
from handlers.model import Diagnosis
from handlers.view import Reader

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


class Scope(StrEnum):
    NAMESPACE = "namespace"  # reads one namespace (access control applies)
    NAMESPACES = "namespaces"  # one namespace, or all of them when none is given
    CLUSTER = "cluster"  # node-level state (doctor, nodes)
    NONE = "none"  # help


class CommandError(GpubotError):
    """The user's arguments are wrong: ``str()`` says what (mrkdwn, user text escaped),
    ``example`` shows what works (plain text, shown as code)."""

    def __init__(self, message: str, example: str = "") -> None:
        super().__init__(message)
        self.example = example


@dataclass(frozen=True)
class Command:
    name: str
    target: str | None = None
    namespace: str | None = None
    node: str | None = None
    all_namespaces: bool = False

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
        return out

    def line(self) -> str:
        return " ".join(shlex.quote(a) for a in self.argv())

    @property
    def route(self) -> Route:
        return ROUTES[self.name]


Runner = Callable[[Reader, Command], Diagnosis]


@dataclass(frozen=True)
class Route:
    name: str
    usage: str
    summary: str
    example: str
    scope: Scope
    module: str | None  # handlers.<module>, imported on first use
    run: Runner | None


def _handler(module: str) -> Any:
    return importlib.import_module(f"handlers.{module}")


def _run_why_pending(reader: Reader, c: Command) -> Diagnosis:
    return _handler("why_pending").run(reader, c.target or "", c.namespace)  # type: ignore[no-any-return]


def _run_doctor(reader: Reader, c: Command) -> Diagnosis:
    return _handler("doctor").run(reader, c.node)  # type: ignore[no-any-return]


def _run_nodes(reader: Reader, c: Command) -> Diagnosis:
    return _handler("nodes").run(reader)  # type: ignore[no-any-return]


def _run_pending(reader: Reader, c: Command) -> Diagnosis:
    return _handler("pending_all").run(reader, c.namespace)  # type: ignore[no-any-return]


def _run_quota(reader: Reader, c: Command) -> Diagnosis:
    return _handler("quota").run(reader, c.namespace)  # type: ignore[no-any-return]


ROUTES: dict[str, Route] = {r.name: r for r in (
    Route("why-pending", "why-pending TARGET [-n NS]",
          "root cause of a pending GPU pod or workload, with proof and fix",
          "why-pending ml-team/train-0  ·  why-pending deployment/llm-serve -n inference",
          Scope.NAMESPACE, "why_pending", _run_why_pending),
    Route("doctor", "doctor [NODE]", "GPU discovery chain per node: driver, plugin, runtime",
          "doctor  ·  doctor gpu-node-7", Scope.CLUSTER, "doctor", _run_doctor),
    Route("nodes", "nodes", "GPU ledger per node and per GPU model",
          "nodes", Scope.CLUSTER, "nodes", _run_nodes),
    Route("pending", "pending [-n NS]", "every pending GPU workload with its one-line root cause",
          "pending  ·  pending -n ml-team", Scope.NAMESPACES, "pending_all", _run_pending),
    Route("quota", "quota [NS]", "GPU quota used/hard per namespace and resource, and its pods",
          "quota  ·  quota ml-team", Scope.NAMESPACES, "quota", _run_quota),
    Route("help", "help", "this list", "help", Scope.NONE, None, None),
)}

ALIASES = {"why": "why-pending", "whypending": "why-pending", "why_pending": "why-pending",
           "node": "nodes", "quotas": "quota", "-h": "help", "--help": "help", "?": "help"}


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting."""

    def error(self, message: str) -> NoReturn:
        raise CommandError(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise CommandError(message or "bad arguments")


def _parser(name: str) -> _Parser:
    p = _Parser(prog=name, add_help=False, allow_abbrev=False, exit_on_error=False)
    if name == "why-pending":
        p.add_argument("target")
        p.add_argument("-n", "--namespace")
    elif name == "doctor":
        p.add_argument("node", nargs="?")
    elif name == "pending":
        p.add_argument("-n", "--namespace")
        p.add_argument("-A", "--all-namespaces", action="store_true")
    elif name == "quota":
        p.add_argument("namespace", nargs="?")
        p.add_argument("-n", "--namespace", dest="ns_option")
        p.add_argument("-A", "--all-namespaces", action="store_true")
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
    if not args:
        return Command("help")
    word = args[0].lower()
    name = ALIASES.get(word, word)
    if name not in ROUTES:
        close = difflib.get_close_matches(name, list(ROUTES), n=1, cutoff=0.5)
        hint = f"; did you mean {code(close[0])}?" if close else ""
        raise CommandError(f"unknown command {code(args[0])}{hint}",
                           ROUTES[close[0]].example if close else "help")
    route = ROUTES[name]
    if name == "help":
        return Command("help")
    if any(a in ("-h", "--help") for a in args[1:]):
        return Command("help", target=name)
    try:
        ns = _parser(name).parse_args(args[1:])
    except (CommandError, argparse.ArgumentError) as err:
        raise CommandError(f"{name}: {escape(_tidy(str(err)))} (usage: {code(route.usage)})",
                           route.example) from None
    if ns.help:
        return Command("help", target=name)
    if name == "why-pending":
        cmd = Command(name, target=ns.target, namespace=ns.namespace)
        _check_target(cmd, route)
        return cmd
    if name == "doctor":
        return Command(name, node=ns.node)
    if name == "nodes":
        return Command(name)
    if name == "quota":
        if ns.namespace and ns.ns_option and ns.namespace != ns.ns_option:
            raise CommandError(f"quota: two namespaces given ({code(ns.namespace)}, "
                               f"{code(ns.ns_option)})", route.example)
        namespace = ns.namespace or ns.ns_option
    else:
        namespace = ns.namespace
    if namespace and ns.all_namespaces:
        raise CommandError(f"{name}: give a namespace or -A, not both", route.example)
    return Command(name, namespace=namespace, all_namespaces=bool(ns.all_namespaces))


def _check_target(cmd: Command, route: Route) -> None:
    from handlers.why_pending import UsageError, parse_target

    try:
        parse_target(cmd.target or "", cmd.namespace)
    except UsageError as err:
        raise CommandError(escape(str(err)), route.example) from None


def _tidy(message: str) -> str:
    return (message.replace("the following arguments are required: target",
                            "name the pod or workload")
            .replace("unrecognized arguments:", "unexpected argument:"))


def target_namespace(cmd: Command) -> str | None:
    """The namespace a command reads; None for every namespace (or none at all)."""
    if cmd.name == "why-pending":
        from handlers.why_pending import parse_target

        return parse_target(cmd.target or "", cmd.namespace).namespace
    return cmd.namespace


def run(reader: Reader, cmd: Command) -> Diagnosis:
    route = ROUTES[cmd.name]
    if route.run is None:
        raise CommandError(f"{cmd.name} runs no diagnosis")
    return route.run(reader, cmd)
