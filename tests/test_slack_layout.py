"""bot/slack's modules import one another without a circle: every import counts, those under
``if TYPE_CHECKING:`` and inside functions too (a circle hidden there is still one)."""

from __future__ import annotations

import ast
from pathlib import Path

SLACK = Path(__file__).resolve().parents[1] / "bot" / "slack"
PACKAGE = "bot.slack"


def _targets(node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
    """The bot/slack modules an import statement names."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:  # ``from . import x``, ``from .x import y``: within the package
            base = f"{PACKAGE}.{base}".rstrip(".")
        names = [base, *(f"{base}.{a.name}" for a in node.names)]
    found = set()
    for name in names:
        if name.startswith(f"{PACKAGE}."):
            first = name[len(PACKAGE) + 1:].split(".")[0]
            if first in modules:
                found.add(first)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = {p.stem for p in SLACK.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name in modules:
        tree = ast.parse((SLACK / f"{name}.py").read_text())
        graph[name] = set().union(*(_targets(n, modules) for n in ast.walk(tree)
                                    if isinstance(n, ast.Import | ast.ImportFrom))) - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append([*path[path.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_bot_slack_has_no_import_circle() -> None:
    graph = import_graph()
    assert graph["mentions"] >= {"guards", "poster"}  # the graph is read at all
    assert circles(graph) == []


def test_the_circle_finder_finds_one() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]
