"""resource.Quantity parsing ("500m", "16Gi", "1e3", 2)."""

from __future__ import annotations

import re
from functools import lru_cache

_SUFFIX = {
    "": 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "P": 1e15, "E": 1e18, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
    "Pi": 2.0**50, "Ei": 2.0**60,
}
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


class QuantityError(ValueError):
    pass


@lru_cache(maxsize=4096)
def _parse(text: str) -> float:
    m = _RE.match(text.strip())
    if not m:
        raise QuantityError(f"invalid quantity {text!r}")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def parse_quantity(value: str | int | float | None) -> float:
    """The quantity as a float (bytes, cores, or a count). None and "" are 0."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    return _parse(str(value))


def is_whole(value: str | int | float | None) -> bool:
    """Extended resources (GPUs) must be whole numbers: "0.5" and "500m" are not."""
    try:
        q = parse_quantity(value)
    except QuantityError:
        return False
    return q == int(q)


def fmt_quantity(value: float, resource: str = "") -> str:
    """Human form: cpu in cores/millicores, memory in Gi/Mi, counts as integers."""
    if resource == "cpu":
        return f"{value:g}" if value >= 1 or value == 0 else f"{round(value * 1000)}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if abs(value) >= size:
                return f"{value / size:.4g}{unit}"
        return f"{value:g}"
    return f"{value:g}"
