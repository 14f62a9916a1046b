"""``gpubot serve`` in a thread, for tests that talk to it over HTTP."""

from __future__ import annotations

import argparse
import io
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from bot.serve import serve
from bot.slack.server import BotServer


@contextmanager
def serving(args: argparse.Namespace, env: dict[str, str]) -> Iterator[BotServer]:
    """The server once it serves; on leaving, it is stopped and must have exited 0."""
    started: list[BotServer] = []
    ready, stop = threading.Event(), threading.Event()
    result: list[int] = []

    def on_ready(server: BotServer) -> None:
        started.append(server)
        ready.set()

    t = threading.Thread(target=lambda: result.append(
        serve(args, env=env, err=io.StringIO(), ready=on_ready, stop=stop)))
    t.start()
    try:
        assert ready.wait(10)
        yield started[0]
    finally:
        stop.set()
        t.join(20)
    assert result == [0]
