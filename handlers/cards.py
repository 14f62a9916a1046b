"""One card per finding code: what the code means, what causes it, how grave it is, what can
be done about it, where it is documented and the public cases it was built from.

Cards are data, one file each (``handlers/knowledge/cards/<CODE>.yaml``, format below), so
that a new diagnosis adds files and edits none; the severity conditions that every code
shares live in ``handlers/knowledge/severity.yaml``. Both are loaded and checked once, at
first use: a card naming an unknown code, section, condition or severity fails loudly.

    code: GPU_NOT_ADVERTISED
    section: discovery-chain        # discovery-chain | pod-spec | scheduling | quota | runtime
    order: 160                      # place among codes of equal severity (lower: first)
    title: Node does not advertise its GPUs
    checks: [registration]          # chain checks this code fails (doctor's "passed" list)
    caused_by: [DEVICE_PLUGIN_CRASHLOOP, ...]   # codes that can explain it ("X because Y")
    causes: [INSUFFICIENT_GPU]      # codes it can explain: the same edges, from this side
    evidence_only: false            # a log line proving it is evidence for another finding
    severity:
      default: critical
      when: {partial: warning}      # conditions a check states from the evidence; first wins
    actions: {restart-device-plugin: Restart device plugin on {target}}
    gate: raise-quota               # held before the scheduler: the fits_if change lifting it
    excludes_nodes: false           # a scheduler filter took nodes away (node exclusions)
    runbook: GPU_NOT_ADVERTISED.md  # docs/runbook/<page>
    alerts: [GPUNotAdvertised]      # alerts of deploy/prometheus whose diagnosis finds it
    sources: [https://github.com/NVIDIA/k8s-device-plugin/issues/...]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from handlers.knowledge import load_yaml
from handlers.severity import Severity

KNOWLEDGE = Path(__file__).parent / "knowledge"
CARD_DIR = KNOWLEDGE / "cards"
SEVERITY_FILE = KNOWLEDGE / "severity.yaml"


class Section(StrEnum):
    CHAIN = "discovery-chain"
    POD_SPEC = "pod-spec"
    SCHEDULING = "scheduling"
    QUOTA = "quota"
    RUNTIME = "runtime"


# Order of importance among codes of equal severity: the discovery chain first (a root
# cause there explains every symptom after it), then spec, quota, scheduling.
SECTION_ORDER = (Section.CHAIN, Section.POD_SPEC, Section.QUOTA, Section.SCHEDULING,
                 Section.RUNTIME)
# Approval-gated actions a finding may offer (bot/actions carries them out).
ACTIONS = ("restart-device-plugin", "cordon-node", "uncordon-node")
# fits_if's kinds of change, in order of cost (handlers/pending/fitsif.py).
CHANGES = ("uncordon", "tolerate-taint", "change-selector", "fix-gpu-stack", "raise-quota",
           "change-request", "other", "free-gpus", "add-nodes")
_KEYS = {"code", "section", "order", "title", "checks", "caused_by", "causes",
         "evidence_only", "severity", "actions", "gate", "excludes_nodes", "runbook", "alerts",
         "sources"}
_REQUIRED = {"code", "section", "order", "title", "severity", "runbook", "sources"}


class CardError(ValueError):
    """A card or the severity rules do not hold together; says which file and why."""


@dataclass(frozen=True)
class Rule:
    """A shared severity condition: ``cap`` lowers to at most, ``floor`` raises to at least,
    ``raise_from`` raises only from that one severity (``to``)."""

    name: str
    means: str
    cap: Severity | None = None
    floor: Severity | None = None
    raise_from: Severity | None = None
    to: Severity | None = None

    def apply(self, s: Severity) -> Severity:
        if self.cap is not None and s.rank < self.cap.rank:
            return self.cap
        if self.floor is not None and s.rank > self.floor.rank:
            return self.floor
        if self.raise_from is not None and self.to is not None and s == self.raise_from:
            return self.to
        return s


@dataclass(frozen=True)
class Card:
    code: str
    section: Section
    order: int
    title: str
    default: Severity
    when: tuple[tuple[str, Severity], ...] = ()
    checks: tuple[str, ...] = ()
    caused_by: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()
    evidence_only: bool = False
    actions: Mapping[str, str] | None = None
    gate: str | None = None
    excludes_nodes: bool = False
    runbook: str = ""
    alerts: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    @property
    def rank(self) -> tuple[int, int]:
        return SECTION_ORDER.index(self.section), self.order

    def severity(self, conditions: Iterable[str] = ()) -> Severity:
        """The card's own rule (first matching condition, else the default), then the shared
        rules of severity.yaml in their order."""
        given = set(conditions)
        if not given:
            return self.default
        s = next((sev for name, sev in self.when if name in given), self.default)
        for rule in rules().values():
            if rule.name in given:
                s = rule.apply(s)
        return s


@dataclass(frozen=True)
class Catalogue:
    cards: Mapping[str, Card]
    # effect -> the codes that can cause it: every card's caused_by and causes, joined.
    causes_of: Mapping[str, tuple[str, ...]]


def _sev(value: Any, where: str) -> Severity:
    try:
        return Severity(str(value))
    except ValueError:
        raise CardError(f"{where}: severity {value!r} is not one of "
                        f"{', '.join(s.value for s in Severity)}") from None


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CardError(f"{where}: expected a list of strings")
    if len(set(value)) != len(value):
        twice = sorted({v for v in value if value.count(v) > 1})
        raise CardError(f"{where}: listed twice: {twice}")
    return tuple(value)


def _rule(name: str, data: Any) -> Rule:
    where = f"{SEVERITY_FILE.name}: {name}"
    if not isinstance(data, dict) or not data.get("means"):
        raise CardError(f"{where}: needs `means`")
    kinds = [k for k in ("cap", "floor", "raise_from") if k in data]
    if len(kinds) != 1 or ("raise_from" in data) != ("to" in data):
        raise CardError(f"{where}: give one of cap, floor, or raise_from with to")
    return Rule(name, str(data["means"]),
                **{k: _sev(data[k], where) for k in ("cap", "floor", "raise_from", "to")
                   if k in data})


@cache
def rules() -> Mapping[str, Rule]:
    """The shared severity conditions, in the order they apply."""
    data = load_yaml(SEVERITY_FILE) or {}
    return {name: _rule(name, d) for name, d in (data.get("conditions") or {}).items()}


def _card(path: Path, data: Any) -> Card:
    where = f"cards/{path.name}"
    if not isinstance(data, dict):
        raise CardError(f"{where}: not a mapping")
    unknown = set(data) - _KEYS
    missing = _REQUIRED - set(data)
    if unknown or missing:
        raise CardError(f"{where}: unknown keys {sorted(unknown)}, missing {sorted(missing)}")
    code = str(data["code"])
    if path.stem != code:
        raise CardError(f"{where}: holds code {code}; name the file {code}.yaml")
    try:
        section = Section(str(data["section"]))
    except ValueError:
        raise CardError(f"{where}: unknown section {data['section']!r}") from None
    sev = data["severity"] or {}
    when = sev.get("when") or {}
    if not isinstance(when, dict):
        raise CardError(f"{where}: severity.when maps conditions to severities")
    actions = data.get("actions") or {}
    bad = sorted(set(actions) - set(ACTIONS))
    if bad:
        raise CardError(f"{where}: unknown actions {bad} (known: {', '.join(ACTIONS)})")
    if data.get("gate") is not None and data["gate"] not in CHANGES:
        raise CardError(f"{where}: gate {data['gate']!r} is not a fits_if change")
    return Card(
        code=code, section=section, order=int(data["order"]), title=str(data["title"]),
        default=_sev(sev.get("default"), f"{where}: severity.default"),
        when=tuple((str(k), _sev(v, f"{where}: severity.when.{k}")) for k, v in when.items()),
        checks=_strings(data.get("checks"), f"{where}: checks"),
        caused_by=_strings(data.get("caused_by"), f"{where}: caused_by"),
        causes=_strings(data.get("causes"), f"{where}: causes"),
        evidence_only=bool(data.get("evidence_only", False)),
        actions={str(k): str(v) for k, v in actions.items()},
        gate=data.get("gate"), excludes_nodes=bool(data.get("excludes_nodes", False)),
        runbook=str(data["runbook"]), alerts=_strings(data.get("alerts"), f"{where}: alerts"),
        sources=_strings(data.get("sources"), f"{where}: sources"),
    )


@cache
def catalogue() -> Catalogue:
    """The installed cards, loaded and checked once."""
    return load(CARD_DIR)


def load(card_dir: Path) -> Catalogue:
    """Every card of ``card_dir``, checked against each other and the shared conditions."""
    cards: dict[str, Card] = {}
    for path in sorted(card_dir.glob("*.yaml")):
        c = _card(path, load_yaml(path))
        cards[c.code] = c
    shared = rules()
    causes_of: dict[str, list[str]] = {}
    for c in cards.values():
        for other in (*c.caused_by, *c.causes):
            if other not in cards:
                raise CardError(f"cards/{c.code}.yaml: names unknown code {other}")
        for cause in c.caused_by:
            causes_of.setdefault(c.code, []).append(cause)
        for effect in c.causes:
            causes_of.setdefault(effect, []).append(c.code)
        for name, _ in c.when:
            if name in shared:
                raise CardError(f"cards/{c.code}.yaml: condition {name} is shared "
                                f"({SEVERITY_FILE.name}); a card's own need other names")
    order = sorted(cards.values(), key=lambda c: c.rank)
    return Catalogue({c.code: c for c in order},
                     {k: tuple(dict.fromkeys(v)) for k, v in causes_of.items()})


def card(code: str) -> Card:
    try:
        return catalogue().cards[code]
    except KeyError:
        raise KeyError(f"unknown finding code {code!r}") from None


def codes() -> Mapping[str, Card]:
    return catalogue().cards


def known_conditions(code: str) -> frozenset[str]:
    """Every condition a finding of ``code`` may carry: its card's and the shared ones."""
    return frozenset(n for n, _ in card(code).when) | frozenset(rules())
