"""The discovery chain's stages, one file each: every module here registers its stage (and
the words of the codes it owns) with ``handlers.chain.stage`` when it is imported.

``load()`` imports them all, so that a new stage is a new file and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache


@cache
def load() -> tuple[str, ...]:
    """Import every stage module (once); their names, sorted."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    for name in names:
        importlib.import_module(f"{__name__}.{name}")
    return tuple(names)
