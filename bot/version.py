"""gpubot's version: the installed distribution's (pyproject.toml's ``version``)."""

from __future__ import annotations

from functools import cache


@cache
def version() -> str:
    # importlib.metadata costs a CLI start ~20 ms: imported only when the version is asked.
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _dist_version

    try:
        return _dist_version("gpubot")
    except PackageNotFoundError:  # a checkout on sys.path without `pip install`
        return "0+unknown"
