"""Knowledge kept as data (YAML beside its loader), each entry with its evidence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# libyaml when PyYAML was built with it: the knowledge files load about ten times faster,
# which every CLI start pays.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: Path) -> Any:
    """A knowledge file's document, with the safe loader."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
