"""Debian's Prometheus binaries for tests: skip where they are not installed, except in CI.

``.ci/run`` installs ``prometheus`` and ``prometheus-alertmanager``; with ``CI`` set a
missing binary fails the test instead of skipping it, so CI never passes by skipping.
"""

from __future__ import annotations

import os
import shutil

import pytest


def require(*names: str) -> list[str]:
    """The binaries' paths; skip (fail in CI) when one is missing."""
    found = [shutil.which(n) for n in names]
    missing = [n for n, p in zip(names, found, strict=True) if p is None]
    if missing:
        why = (f"{', '.join(missing)} not installed (apt-get install prometheus "
               "prometheus-alertmanager; .ci/run does it)")
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return [p for p in found if p is not None]
