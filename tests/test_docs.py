"""The docs keep up with the code: a runbook page per finding code, every setting in the
configuration reference with its variable and default, every overlay in the install guide."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import yaml

from bot.runbook import Runbooks
from bot.slack.config import ENV, SECRET_ENV, Settings
from handlers.codes import CODES

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUNBOOK = DOCS / "runbook"
SPEC = ROOT / "tests" / "data" / "spec" / "finding-codes.md"
HEADINGS = ("## What it means", "## How gpubot sees it", "## Fix by hand", "## Verify")


def test_every_code_has_a_runbook_page_and_no_page_is_stale() -> None:
    pages = {p.stem for p in RUNBOOK.glob("*.md")} - {"README"}
    assert sorted(set(CODES) - pages) == [], "codes without a page"
    assert sorted(pages - set(CODES)) == [], "pages for codes that do not exist"
    for code in CODES:
        text = (RUNBOOK / f"{code}.md").read_text()
        assert text.startswith(f"# {code}: "), code
        assert [h for h in HEADINGS if h not in text] == [], code


def test_the_runbook_index_lists_the_spec_catalogue() -> None:
    """The index is the spec's catalogue; a code added since has its page and its card, and
    adding it edits no shared file."""
    spec = set(re.findall(r"^\| `([A-Z_]+)` \|", SPEC.read_text(), re.MULTILINE))
    index = (RUNBOOK / "README.md").read_text()
    assert sorted(c for c in spec if f"]({c}.md)" not in index) == []


def test_every_code_s_page_is_installed_with_the_package() -> None:
    """bot/runbooks is what a wheel carries (tests/test_wheel.py): the pages of docs/runbook."""
    for code in CODES:
        installed = Runbooks().path(code)
        assert installed.is_file(), code
        assert installed.read_bytes() == (RUNBOOK / installed.name).read_bytes(), code


def _table(text: str) -> dict[str, list[str]]:
    """First column (without backticks) -> the other cells, for every table row."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) > 1:
            out[cells[0].strip("`")] = cells[1:]
    return out


def _shown(value: object) -> str:
    if value is None:
        return "unset"
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def test_the_configuration_reference_lists_every_setting_its_variable_and_default() -> None:
    rows = _table((DOCS / "configuration.md").read_text())
    defaults = Settings()
    settings = [f.name for f in fields(Settings) if f.name not in SECRET_ENV]
    documented = {name for name in rows if name.islower()}
    assert sorted(set(settings) ^ documented) == []
    for name in settings:
        var, default = rows[name][0], rows[name][1]
        assert var == f"`{ENV[name]}`", name
        assert default == _shown(getattr(defaults, name)), name
    assert {v for v in SECRET_ENV.values()} <= set(rows)


def test_the_manifests_set_only_settings_that_exist() -> None:
    known = set(ENV.values()) | set(SECRET_ENV.values())
    names = [line.split("=", 1)[0] for line in
             (ROOT / "deploy/base/settings.env").read_text().splitlines()
             if line and not line.startswith("#")]
    for kust in (ROOT / "deploy").rglob("kustomization.yaml"):
        for gen in yaml.safe_load(kust.read_text()).get("configMapGenerator", []):
            names += [lit.split("=", 1)[0] for lit in gen.get("literals", [])]
    assert sorted(set(names) - known) == []


def test_the_install_guide_covers_every_overlay_and_the_whole_life_cycle() -> None:
    text = (DOCS / "install.md").read_text()
    for overlay in (ROOT / "deploy/overlays").iterdir():
        assert f"`{overlay.name}`" in text, overlay.name
    for step in ("## 1. Create the Slack app", "Secret", "Alertmanager", "## Upgrade",
                 "## Uninstall"):
        assert step in text
    assert re.search(r"deploy/slack/manifest\.yaml", text)
