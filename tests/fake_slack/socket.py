"""A Socket Mode WebSocket endpoint (aiohttp, in a thread of its own): what
``apps.connections.open`` hands out. Tests push envelopes and read the acks.

    slack.socket.wait_connected()
    slack.socket.send({"envelope_id": "e1", "type": "slash_commands",
                       "accepts_response_payload": True, "payload": {...}})
    ack = slack.socket.wait_ack("e1")      # {"envelope_id": "e1", "payload": {...}}
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from aiohttp import WSMsgType, web


class FakeSocketMode:
    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-socket",
                                        daemon=True)
        self._runner: web.AppRunner | None = None
        self._clients: list[web.WebSocketResponse] = []
        self._cond = threading.Condition()
        self.acks: list[dict[str, Any]] = []
        self.connections = 0
        self.port = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/link"

    def start(self) -> FakeSocketMode:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/link", self._ws)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def _ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        with self._cond:
            self._clients.append(ws)
            self.connections += 1
            self._cond.notify_all()
        await ws.send_str(json.dumps({"type": "hello", "num_connections": 1,
                                      "connection_info": {"app_id": "A0001"}}))
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                data = json.loads(msg.data)
                with self._cond:
                    self.acks.append(data)
                    self._cond.notify_all()
        with self._cond:
            if ws in self._clients:
                self._clients.remove(ws)
        return ws

    def wait_connected(self, timeout: float = 10.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._clients), timeout):
                raise AssertionError("no Socket Mode client connected")

    def send(self, envelope: dict[str, Any]) -> None:
        with self._cond:
            ws = self._clients[-1]
        asyncio.run_coroutine_threadsafe(ws.send_str(json.dumps(envelope)),
                                         self._loop).result(5)

    def wait_ack(self, envelope_id: str, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for a in self.acks:
                    if a.get("envelope_id") == envelope_id:
                        return a
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no ack for envelope {envelope_id}")
                self._cond.wait(left)

    def stop(self) -> None:
        async def _stop() -> None:
            for ws in list(self._clients):
                await ws.close()
            if self._runner is not None:
                await self._runner.cleanup()

        try:
            asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()
