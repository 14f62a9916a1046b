"""What an installed gpubot needs is declared: every third-party import is a dependency,
install hints name extras that exist, and the lock file pins every dependency with hashes."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SOURCES = [*ROOT.joinpath("bot").rglob("*.py"), *ROOT.joinpath("handlers").rglob("*.py")]


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


# Extras, and the only modules that may import what they bring (lazily: the base install
# lacks it, and says how to get it).
EXTRA_USERS = {"chart": {ROOT / "bot" / "chart.py"}}


def _imports() -> dict[str, set[Path]]:
    """Top-level modules imported anywhere in bot/ and handlers/ (also by importlib), and
    the files importing each."""
    found: dict[str, set[Path]] = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
                  and node.args and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)):
                names = [node.args[0].value]
            for n in names:
                found.setdefault(n.split(".")[0], set()).add(path)
    return found


def test_every_imported_package_is_a_declared_dependency() -> None:
    declared = {_name(r) for r in PROJECT["dependencies"]}
    extras = {e: {_name(r) for r in PROJECT["optional-dependencies"][e]} for e in EXTRA_USERS}
    dists = packages_distributions()
    missing = []
    for module, paths in sorted(_imports().items()):
        if module in sys.stdlib_module_names or module in ("bot", "handlers", "_typeshed"):
            continue
        owners = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if owners & declared:
            continue
        allowed = {p for e, users in EXTRA_USERS.items() if owners & extras[e] for p in users}
        if not allowed or not paths <= allowed:
            where = sorted(str(p.relative_to(ROOT)) for p in paths - allowed)
            missing.append(f"{module} ({', '.join(where)}; from {sorted(owners)})")
    assert not missing, f"imported but not in [project] dependencies: {missing}"


def test_the_chart_is_an_extra_of_its_own() -> None:
    """matplotlib and what it pulls in stay out of the base install (issue 25)."""
    assert "matplotlib" not in {_name(r) for r in PROJECT["dependencies"]}
    assert {_name(r) for r in PROJECT["optional-dependencies"]["chart"]} == {"matplotlib"}


def test_install_hints_name_extras_that_exist() -> None:
    extras = set(PROJECT.get("optional-dependencies", {}))
    hint = re.compile(r"gpubot\[([\w,-]+)\]")
    for path in [*SOURCES, ROOT / "README.md"]:
        for m in hint.finditer(path.read_text()):
            assert set(m.group(1).split(",")) <= extras, f"{path}: {m.group(0)}"


def test_the_lock_pins_every_dependency_with_hashes() -> None:
    lock = (ROOT / "requirements.lock").read_text()
    pinned = {m.group(1).lower() for m in re.finditer(r"^([A-Za-z0-9_.-]+)==\S+ \\$", lock, re.M)}
    declared = {_name(r) for r in [*PROJECT["dependencies"],
                                   *PROJECT["optional-dependencies"]["chart"]]}
    assert declared <= pinned, f"not in requirements.lock: {declared - pinned}"
    # Every pinned requirement carries its hashes (pip install --require-hashes).
    blocks = re.split(r"^(?=[A-Za-z0-9_.-]+==)", lock, flags=re.M)[1:]
    assert blocks and all("--hash=sha256:" in b for b in blocks)
    # The lock is the bot's runtime, not the test tools.
    assert not {"pytest", "mypy", "ruff", "jsonschema"} & pinned
