"""The Dockerfile: multi-stage, base pinned by digest, non-root, the wheel with locked and
hash-checked runtime dependencies only; .dockerignore keeps secrets and dev files out."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
DEV_ONLY = ("pytest", "ruff", "mypy", "hypothesis", "types-")


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    args: dict[str, str] = {}
    out: list[list[tuple[str, str]]] = []
    for word, rest in instructions():
        if word == "ARG" and not out and "=" in rest:
            name, _, value = rest.partition("=")
            args[name] = value
        elif word == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], rest.split()[0])
            out.append([("FROM", image)])
        elif out:
            out[-1].append((word, rest))
    return out


def lock_file() -> Path:
    copies = [rest.split()[0] for st in stages() for w, rest in st if w == "COPY"]
    (name,) = [c for c in copies if c.endswith(".lock") or c.startswith("requirements")]
    return ROOT / name


def test_multi_stage_and_every_base_pinned_by_digest() -> None:
    st = stages()
    assert len(st) >= 2
    for s in st:
        assert DIGEST.search(s[0][1]), s[0][1]


def test_final_stage_runs_as_a_numeric_non_root_user() -> None:
    users = [rest for w, rest in stages()[-1] if w == "USER"]
    assert users, "no USER in the final stage"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0


def test_installs_the_wheel_and_locked_hash_checked_runtime_dependencies_only() -> None:
    runs = " ".join(rest for s in stages() for w, rest in s if w == "RUN")
    assert "--require-hashes" in runs and lock_file().name in runs
    assert re.search(r"pip install [^&]*\S+\.whl", runs)
    assert ".[dev]" not in runs and "-e ." not in runs
    lock = lock_file().read_text()
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==\S+", lock, re.MULTILINE)
    assert pins and lock.count("--hash=sha256:") >= len(pins)
    names = {p.lower().replace("_", "-") for p in pins}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # The image is gpubot[chart]: /gpu nodes posts its chart.
    deps = [*project["dependencies"], *project["optional-dependencies"]["chart"]]
    wanted = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower().replace("_", "-")
              for d in deps}
    assert wanted <= names, sorted(wanted - names)
    assert not [n for n in names if n.startswith(DEV_ONLY)]


def test_the_final_stage_copies_only_the_built_venv() -> None:
    copies = [rest for w, rest in stages()[-1] if w == "COPY"]
    assert copies and all(c.startswith("--from=") for c in copies)


def test_dockerignore_keeps_vcs_venvs_secrets_and_tests_out() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", ".env", "tests", "bench"} <= ignored
    assert "README.md" not in ignored and "templates" not in ignored  # the wheel needs them
