"""Shared by the property-based tests (Hypothesis): the budget, and running the CLI.

The default budget keeps the fuzz tests to seconds in CI, with a fixed seed so that a
green run stays green; ``GPUBOT_FUZZ_EXAMPLES=N`` runs N random examples per test
instead (e.g. 2000 before a release: ``GPUBOT_FUZZ_EXAMPLES=2000 ./dev test -k fuzz``).
"""

from __future__ import annotations

import io
import os
import traceback
from collections.abc import Sequence

from hypothesis import HealthCheck, settings

from bot.cli import main

MAX_OUTPUT = 256_000  # characters a command may print for a bundled example, mutated


def budget(ci_examples: int) -> settings:
    wanted = os.environ.get("GPUBOT_FUZZ_EXAMPLES", "")
    return settings(
        max_examples=int(wanted) if wanted.isdigit() else ci_examples,
        derandomize=not wanted.isdigit(),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much],
        print_blob=True,
    )


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the CLI; an exception is an AssertionError naming the
    command and carrying the traceback, so Hypothesis shrinks towards it."""
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(list(argv), out=out, err=err)
    except SystemExit as e:
        code = int(e.code or 0)
    except Exception as err:  # the property under test: nothing escapes
        raise AssertionError(f"gpubot {' '.join(argv)} raised:\n"
                             f"{traceback.format_exc()}") from err
    return code, out.getvalue(), err.getvalue()
