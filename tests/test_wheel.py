"""The wheel is what an image installs: build it, install it into a fresh venv, run it there.

How the fresh venv gets the dependencies without a network: it is created without pip and
with no access to any other site-packages; the wheel is installed into it with --no-deps;
then a ``.pth`` file names the project venv's site-packages as one more path. A plain
path line in a ``.pth`` file does not run the ``.pth`` files of that directory, so the
editable install of gpubot there (which puts this checkout on sys.path) stays inert: the
only ``bot`` and ``handlers`` the fresh interpreter can import are the wheel's, and a
template or data file the wheel lacks fails the command. The checks below prove that.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
# What a build needs; tests, examples and benchmarks stay out of the copy.
_SKIP = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                               ".pytest_cache", ".mypy_cache", ".ruff_cache", "tests", "bench",
                               "examples")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src") / "gpubot"
    # symlinks=True: the build must follow bot/templates itself, as it does in a checkout.
    shutil.copytree(ROOT, src, symlinks=True, ignore=_SKIP)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(out), str(src)],
        check=True, capture_output=True, timeout=300)
    (built,) = out.glob("gpubot-*.whl")
    return built


def test_the_wheel_carries_every_template_and_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {p.relative_to(ROOT).as_posix() for p in (ROOT / "templates").rglob("*")
                 if p.is_file()}
    assert templates, "no templates in the checkout"
    assert {f"bot/{t}" for t in templates} <= names
    # Every other file in the packages is data the code reads: a new kind of data file
    # needs its glob in pyproject.toml's package-data, or this fails.
    data = {p.relative_to(ROOT).as_posix() for pkg in ("bot", "handlers")
            for p in (ROOT / pkg).rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
            and not p.relative_to(ROOT).as_posix().startswith("bot/templates/")}
    assert data <= names, f"not in the wheel: {sorted(data - names)}"
    assert not any(n.startswith(("tests/", "templates/", "examples/")) for n in names)
    # the runbook pages a finding points to when no runbook_base_url is set
    pages = {f"bot/runbooks/{p.name}" for p in (ROOT / "docs" / "runbook").glob("*.md")}
    assert pages and pages <= names, f"not in the wheel: {sorted(pages - names)}"


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", str(wheel)], check=True, capture_output=True, timeout=120)
    (site / "zz_project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env_dir


def _run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "GPUBOT_TEMPLATES", "VIRTUAL_ENV")}
    return subprocess.run([str(env_dir / "bin" / args[0]), *args[1:]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_installed_wheel_diagnoses_an_example(fresh_venv: Path, tmp_path: Path) -> None:
    where = _run(fresh_venv, "python", "-c",
                 "import bot, handlers, bot.resources as r; "
                 "print(bot.__file__); print(handlers.__file__); print(r.TEMPLATE_DIR)",
                 cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    for line in where.stdout.split():
        assert Path(line).is_relative_to(fresh_venv), f"{line} is not the wheel's"
        assert not Path(line).resolve().is_relative_to(ROOT)

    text = _run(fresh_venv, "gpubot", "why-pending", "ml-team/train-0",
                "--snapshot", str(EXAMPLE), cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "DEVICE_PLUGIN_CRASHLOOP" in text.stdout or "device plugin" in text.stdout.lower()
    out = _run(fresh_venv, "gpubot", "why-pending", "ml-team/train-0",
               "--snapshot", str(EXAMPLE), "-o", "json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    findings = json.loads(out.stdout)["findings"]
    assert "DEVICE_PLUGIN_CRASHLOOP" in [f["code"] for f in findings]
    # no runbook URL set: each runbook is the page installed with the wheel
    for f in findings:
        page = Path(f["runbook"])
        assert page.is_relative_to(fresh_venv) and page.is_file(), f["runbook"]
        assert page.read_text().startswith(f"# {f['code']}: ")


def test_the_installed_wheel_renders_slack_cards(fresh_venv: Path, tmp_path: Path) -> None:
    script = (
        "from bot.slack.blocks import Renderer\n"
        "from bot.snapshot import load_snapshot\n"
        "from handlers import nodes\n"
        "from handlers.view import Reader\n"
        f"view = load_snapshot({str(EXAMPLE)!r})\n"
        "r = Renderer().render(nodes.run(Reader(view)), argv=['nodes'], source=view.source)\n"
        "print(len(r.card.blocks))\n"
    )
    run = _run(fresh_venv, "python", "-c", script, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) > 0


# -- the base install: the wheel without extras --------------------------------------------
BASE_LIMIT_MB = 200


def _requirements(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist that apply without extras."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    reqs = [Requirement(ln.split(":", 1)[1].strip()) for ln in lines
            if ln.startswith("Requires-Dist:")]
    return [str(r) for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def _closure(requirements: list[str]) -> list[metadata.Distribution]:
    """The installed distributions those requirements pull in, transitively: what pip would
    install, at the versions this checkout's venv holds (requirements.lock's)."""
    from packaging.requirements import Requirement

    found: dict[str, metadata.Distribution] = {}
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        key = req.name.lower().replace("_", "-")
        if key in found:
            continue
        dist = found[key] = metadata.distribution(req.name)
        for sub in map(Requirement, dist.requires or []):
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                todo.append(sub)
    return list(found.values())


def _size(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def base_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv as `pip install gpubot` makes one (pip included), offline: the wheel, then
    every file of each distribution its requirements pull in, copied as pip's RECORD lists
    them (compiled files too), from this checkout's venv. `pip check` then proves the set
    complete and consistent."""
    env_dir = tmp_path_factory.mktemp("base") / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True, capture_output=True, timeout=120)
    for dist in _closure(_requirements(wheel)):
        for f in dist.files or []:
            src = Path(dist.locate_file(f))
            dest = Path(os.path.normpath(site / f))
            if src.is_file() and dest.is_relative_to(env_dir):
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)
    return env_dir


def test_the_base_install_is_under_200_mb_and_complete(
        base_venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check = _run(base_venv, "python", "-m", "pip", "check", cwd=base_venv)
    assert check.returncode == 0, check.stdout + check.stderr
    packages = _run(base_venv, "python", "-c", "import matplotlib", cwd=base_venv)
    assert packages.returncode != 0, "the base install has matplotlib"
    mb = _size(base_venv) / 1e6
    with capsys.disabled():
        print(f"\nbase install (gpubot wheel without extras, pip included): {mb:.0f} MB")
    assert mb < BASE_LIMIT_MB


def test_the_base_install_diagnoses_and_says_how_to_get_the_chart(
        base_venv: Path, tmp_path: Path) -> None:
    out = _run(base_venv, "gpubot", "nodes", "--snapshot", str(EXAMPLE), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "GPU nodes" in out.stdout
    png = tmp_path / "nodes.png"
    chart = _run(base_venv, "gpubot", "nodes", "--snapshot", str(EXAMPLE), "--png", str(png),
                 cwd=tmp_path)
    assert chart.returncode == 2 and not png.exists()
    assert "pip install 'gpubot[chart]'" in chart.stderr
    helped = _run(base_venv, "gpubot", "nodes", "--help", cwd=tmp_path)
    assert "gpubot[chart]" in helped.stdout
    # The Slack side loads without it too: the renderer, the app's modules.
    script = ("import bot.slack.app, bot.slack.diagnoses, bot.chart, sys\n"
              "assert 'matplotlib' not in sys.modules\n"
              "print(bot.chart.missing())\n")
    run = _run(base_venv, "python", "-c", script, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "gpubot[chart]" in run.stdout
