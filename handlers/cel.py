"""The few CEL forms DRA device selectors use in practice, evaluated against one device.

DeviceClasses and claims select devices with CEL over ``device.driver``,
``device.attributes["<domain>"].<name>`` and ``device.capacity["<domain>"].<name>``
(Kubernetes docs, "Dynamic Resource Allocation"; NVIDIA/k8s-dra-driver-gpu's classes):

    device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'
    device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB"
    device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0
    device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("550.0.0")) >= 0

``evaluate`` returns True or False for conjunctions (``&&``) of such comparisons, and None
for anything else: a selector it cannot read is reported as not checked, never guessed.
"""

from __future__ import annotations

import re
from typing import Any

from handlers.dra import Device
from handlers.kube.quantity import parse_quantity

_STR = r"""(?:"([^"]*)"|'([^']*)')"""
_ATTR = re.compile(r"^device\.(attributes|capacity)\[" + _STR + r"\]\.(\w+)")
_CMP_TO = re.compile(r"^\.compareTo\((quantity|semver)\(" + _STR + r"\)\)\s*(==|!=|>=|<=|>|<)\s*"
                     r"(-?\d+)$")
_OP = re.compile(r"^\s*(==|!=|>=|<=|>|<)\s*(.+)$")
_METHOD = re.compile(r"^\.(startsWith|endsWith|contains|matches)\(" + _STR + r"\)$")


def _split_and(expr: str) -> list[str] | None:
    """Top-level ``&&`` parts; None when the expression has ``||`` or ``?`` outside quotes."""
    parts, depth, quote, cur = [], 0, "", ""
    i = 0
    while i < len(expr):
        ch = expr[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and expr.startswith("&&", i):
            parts.append(cur)
            cur = ""
            i += 2
            continue
        elif depth == 0 and (expr.startswith("||", i) or ch == "?"):
            return None
        cur += ch
        i += 1
    parts.append(cur)
    return [p.strip() for p in parts]


def _strip_parens(e: str) -> str:
    while e.startswith("(") and e.endswith(")") and _split_and(e[1:-1]) is not None:
        inner = e[1:-1]
        depth = 0
        balanced = True
        for ch in inner:
            depth += ch == "("
            depth -= ch == ")"
            if depth < 0:
                balanced = False
                break
        if not balanced:
            break
        e = inner.strip()
    return e


def _literal(text: str) -> tuple[bool, Any]:
    t = text.strip()
    m = re.fullmatch(_STR, t)
    if m:
        return True, m.group(1) if m.group(1) is not None else m.group(2)
    if t in ("true", "false"):
        return True, t == "true"
    if re.fullmatch(r"-?\d+", t):
        return True, int(t)
    return False, None


def _compare(a: Any, op: str, b: Any) -> bool | None:
    try:
        return bool({"==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b,
                     "<": a < b}[op])
    except TypeError:
        return None


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _lookup(device: Device, which: str, domain: str, name: str) -> tuple[bool, Any]:
    """(found, value); attributes of the driver's own domain may be stored unqualified."""
    table = device.attributes if which == "attributes" else device.capacity
    for key in (f"{domain}/{name}", name if domain == device.driver else None):
        if key is not None and key in table:
            return True, table[key]
    return False, None


def _term(term: str, device: Device) -> bool | None:
    term = _strip_parens(term.strip())
    negate = False
    if term.startswith("!") and not term.startswith("!="):
        negate, term = True, _strip_parens(term[1:].strip())
    res = _term_plain(term, device)
    return (not res) if (res is not None and negate) else res


def _term_plain(term: str, device: Device) -> bool | None:
    if term in ("true", "false"):
        return term == "true"
    if term.startswith("device.driver"):
        m = _OP.match(term[len("device.driver"):])
        if not m or m.group(1) not in ("==", "!="):
            return None
        ok, lit = _literal(m.group(2))
        return _compare(device.driver, m.group(1), lit) if ok else None
    m = _ATTR.match(term)
    if not m:
        return None
    which, domain, name = m.group(1), m.group(2) if m.group(2) is not None else m.group(3), \
        m.group(4)
    rest = term[m.end():].strip()
    found, value = _lookup(device, which, domain, name)
    if not found:
        # CEL errors on a missing key; the scheduler counts that device as not matching.
        return False
    if not rest:
        return value if isinstance(value, bool) else None
    cmp = _CMP_TO.match(rest)
    if cmp:
        kind, lit = cmp.group(1), cmp.group(2) if cmp.group(2) is not None else cmp.group(3)
        if kind == "quantity":
            a, b = float(parse_quantity(value)), float(parse_quantity(lit))
        else:
            a_v, b_v = _version(str(value)), _version(lit)
            sign = (a_v > b_v) - (a_v < b_v)
            return _compare(sign, cmp.group(4), int(cmp.group(5)))
        sign = (a > b) - (a < b)
        return _compare(sign, cmp.group(4), int(cmp.group(5)))
    meth = _METHOD.match(rest)
    if meth and isinstance(value, str):
        arg = meth.group(2) if meth.group(2) is not None else meth.group(3)
        if meth.group(1) == "startsWith":
            return value.startswith(arg)
        if meth.group(1) == "endsWith":
            return value.endswith(arg)
        if meth.group(1) == "contains":
            return arg in value
        try:
            return re.search(arg, value) is not None
        except re.error:
            return None
    op = _OP.match(rest)
    if op:
        ok, lit = _literal(op.group(2))
        if not ok:
            return None
        numeric = which == "capacity" or (isinstance(lit, int) and not isinstance(lit, bool))
        if numeric and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return None
        return _compare(value, op.group(1), lit)
    return None


def evaluate(expr: str, device: Device) -> bool | None:
    """True/False when every part of the selector could be read; None otherwise (a False
    part still makes the whole False: ``&&`` needs all)."""
    parts = _split_and(_strip_parens(expr.strip()))
    if parts is None:
        return None
    unknown = False
    for p in parts:
        r = _term(p, device)
        if r is False:
            return False
        if r is None:
            unknown = True
    return None if unknown else True


def matches(selectors: tuple[str, ...] | list[str], device: Device) -> tuple[bool | None, str]:
    """All selectors together, and the first one that could not be evaluated."""
    unknown = ""
    for s in selectors:
        r = evaluate(s, device)
        if r is False:
            return False, ""
        if r is None and not unknown:
            unknown = s
    return (None, unknown) if unknown else (True, "")
