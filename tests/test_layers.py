"""Handlers never import Slack, web, jinja2 or bot code: they stay usable offline."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("slack_bolt", "slack_sdk", "jinja2", "httpx", "kubernetes", "aiohttp", "bot")


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_handlers_import_no_front_end_code() -> None:
    bad = {str(p.relative_to(ROOT)): sorted(imports(p) & set(FORBIDDEN))
           for p in (ROOT / "handlers").rglob("*.py")}
    assert {k: v for k, v in bad.items() if v} == {}
