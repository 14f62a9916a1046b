"""The tools tests run (Debian's Prometheus binaries, kubectl, kubernetes-validate): skip
where they are not installed, except in CI.

``.ci/run`` installs ``prometheus`` and ``prometheus-alertmanager`` and checks that kubectl is
there; with ``CI`` set a missing tool fails the test instead of skipping it, so CI never
passes by skipping.
"""

from __future__ import annotations

import os
import shutil

import pytest

PROMETHEUS_HINT = "apt-get install prometheus prometheus-alertmanager; .ci/run does it"


def require(*names: str, hint: str = PROMETHEUS_HINT) -> list[str]:
    """The tools' paths; skip (fail in CI) when one is missing."""
    found = [shutil.which(n) for n in names]
    missing = [n for n, p in zip(names, found, strict=True) if p is None]
    if missing:
        why = f"{', '.join(missing)} not installed ({hint})"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return [p for p in found if p is not None]


def kubectl() -> str:
    """kubectl's path: the machine image's (Debian's 1.20 cannot build kustomize components)."""
    return require("kubectl", hint="the image's kubectl 1.32; .ci/run checks for it")[0]
