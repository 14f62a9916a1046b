"""The log knowledge base: known lines of the GPU stack, kept as data (``logs.yaml``).

A ``Catalogue`` holds entries in priority order and answers which codes a line proves:
the first matching entry that is not an envelope decides the cause (a benign entry decides
there is none), then each matching envelope (kubelet admission, sandbox creation) adds its
own code after the cause. Users extend the built-in entries with a file of their own
(``log_patterns_file``), loaded and validated once at start by ``use_user_file``; their
entries come first, so they can also override a built-in one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from handlers.codes import CODES
from handlers.knowledge import load_yaml

BUILTIN = Path(__file__).with_name("logs.yaml")


class LogPatternError(ValueError):
    """A log-pattern file or one of its entries is invalid; the message names which."""


@dataclass(frozen=True)
class Entry:
    id: str
    codes: tuple[str, ...]  # empty for a benign line
    pattern: re.Pattern[str]
    component: str
    meaning: str
    source: str
    examples: tuple[tuple[str, tuple[str, ...]], ...]  # (line, the codes it proves)
    wraps: bool = False

    @property
    def benign(self) -> bool:
        return not self.codes


def _text(raw: dict[str, Any], key: str, where: str, required: bool = True) -> str:
    value = raw.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise LogPatternError(f"{where}: '{key}' must be a non-empty string")
    return value


def _codes(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        raise LogPatternError(f"{where}: 'codes' must be a list of finding codes")
    unknown = [c for c in value if c not in CODES]
    if unknown:
        raise LogPatternError(f"{where}: unknown finding code(s) {', '.join(unknown)}")
    return tuple(value)


def parse_entry(raw: object, where: str) -> Entry:
    """One entry of a pattern file; ``where`` names it in errors ("logs.yaml entry 3")."""
    if not isinstance(raw, dict):
        raise LogPatternError(f"{where}: an entry must be a mapping")
    entry_id = _text(raw, "id", where)
    where = f"{where} ({entry_id})"
    known = {"id", "codes", "benign", "wraps", "pattern", "ignore_case", "component",
             "meaning", "source", "examples"}
    extra = sorted(set(raw) - known)
    if extra:
        raise LogPatternError(f"{where}: unknown key(s) {', '.join(extra)}")
    benign = raw.get("benign", False) is True
    if benign and raw.get("codes"):
        raise LogPatternError(f"{where}: a benign entry proves no codes")
    if not benign and not raw.get("codes"):
        raise LogPatternError(f"{where}: give 'codes', or 'benign: true'")
    codes = () if benign else _codes(raw.get("codes"), where)
    wraps = raw.get("wraps", False) is True
    if wraps and benign:
        raise LogPatternError(f"{where}: an envelope ('wraps') cannot be benign")
    flags = re.IGNORECASE if raw.get("ignore_case", False) is True else 0
    try:
        pattern = re.compile(_text(raw, "pattern", where), flags)
    except re.error as err:
        raise LogPatternError(f"{where}: bad pattern: {err}") from err
    examples: list[tuple[str, tuple[str, ...]]] = []
    for i, ex in enumerate(raw.get("examples") or []):
        if isinstance(ex, str):
            examples.append((ex, codes))
        elif isinstance(ex, dict) and isinstance(ex.get("line"), str):
            examples.append((ex["line"], _codes(ex.get("codes"), f"{where} example {i}")))
        else:
            raise LogPatternError(f"{where}: example {i} must be a line or {{line, codes}}")
        if not pattern.search(examples[-1][0]):
            raise LogPatternError(f"{where}: example {i} does not match the pattern")
    return Entry(entry_id, codes, pattern, _text(raw, "component", where),
                 _text(raw, "meaning", where), _text(raw, "source", where), tuple(examples),
                 wraps)


def load_file(path: Path) -> list[Entry]:
    """The entries of a pattern file, validated; raises LogPatternError naming a bad one."""
    try:
        doc = load_yaml(path)
    except (OSError, yaml.YAMLError) as err:
        raise LogPatternError(f"{path}: cannot read: {err}") from err
    raw = doc.get("entries") if isinstance(doc, dict) else doc
    if not isinstance(raw, list):
        raise LogPatternError(f"{path}: expected a list of entries (or 'entries: [...]')")
    out = [parse_entry(e, f"{path.name} entry {i}") for i, e in enumerate(raw)]
    ids = [e.id for e in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise LogPatternError(f"{path}: duplicate id(s) {', '.join(dup)}")
    return out


class Catalogue:
    def __init__(self, entries: list[Entry]) -> None:
        self.entries = tuple(entries)
        # One pass over the whole text first: most lines and most logs match nothing.
        self._any = re.compile("|".join(
            f"(?{'i' if e.pattern.flags & re.IGNORECASE else ''}:{e.pattern.pattern})"
            for e in entries) or r"(?!)")
        self.codes = frozenset(c for e in entries for c in e.codes)
        # line -> its entries: a DaemonSet's events repeat from one diagnosis to the next
        self._matched: dict[str, list[Entry]] = {}

    def might_match(self, text: str) -> bool:
        return self._any.search(text) is not None

    def codes_of(self, line: str) -> tuple[str, ...]:
        """The codes ``line`` proves, nested cause first; () for unknown or benign lines."""
        if not self._any.search(line):
            return ()
        cause: Entry | None = None
        envelopes: list[str] = []
        for e in self.entries:
            if (e.wraps or cause is None) and e.pattern.search(line):
                if e.wraps:
                    envelopes += e.codes
                else:
                    cause = e
        if cause is not None and cause.benign:
            return ()
        found = (cause.codes if cause else ()) + tuple(envelopes)
        return tuple(dict.fromkeys(found))

    def matching(self, line: str) -> list[Entry]:
        """Every entry whose pattern matches ``line``; the list is shared: do not change it."""
        found = self._matched.get(line)
        if found is None:
            found = [e for e in self.entries if e.pattern.search(line)]
            if len(line) <= _MATCHED_LINE_MAX:
                if len(self._matched) >= _MATCHED_KEPT:
                    self._matched.clear()
                self._matched[line] = found
        return found


_MATCHED_KEPT = 4096  # lines remembered per catalogue, of at most
_MATCHED_LINE_MAX = 1024  # characters


@cache
def builtin() -> Catalogue:
    return Catalogue(load_file(BUILTIN))


_active: Catalogue | None = None


def active() -> Catalogue:
    """The catalogue in use: the user's entries (if loaded) before the built-in ones."""
    return _active or builtin()


def use_user_file(path: str | Path | None) -> Catalogue:
    """Load a user pattern file (``log_patterns_file``) in front of the built-in entries.

    Called once at start by the CLI and the bot; ``None`` goes back to the built-in set.
    Raises LogPatternError, naming the bad entry, for a file that does not validate.
    """
    global _active
    if path is None:
        _active = None
        return builtin()
    user = load_file(Path(path))
    clash = {e.id for e in user} & {e.id for e in builtin().entries}
    # A user entry with a built-in id replaces that entry.
    _active = Catalogue(user + [e for e in builtin().entries if e.id not in clash])
    return _active
