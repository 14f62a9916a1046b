"""The HTTP front door: malformed and unsigned requests of any shape get 400/401 (never a
500 or a traceback), unsigned bodies are never logged, long commands are refused before
they are parsed, slow clients are cut off and cannot lock others out."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import socket
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from waitress import wasyncore

from bot.slack.frontdoor import FrontDoor, GuardedServer
from tests.fake_slack.harness import SECRET, BotHarness

NOW = 1_700_000_000


def sign(body: bytes, ts: str = str(NOW), secret: str = SECRET) -> dict[str, str]:
    mac = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
    return {"HTTP_X_SLACK_REQUEST_TIMESTAMP": ts, "HTTP_X_SLACK_SIGNATURE": "v0=" + mac.hexdigest()}


class Inner:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        self.bodies.append(environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"])))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


def call(body: bytes, headers: dict[str, str] | None = None, *, method: str = "POST",
         length: str | None = None) -> tuple[int, bytes, Inner]:
    inner = Inner()
    door = FrontDoor(inner, SECRET, clock=lambda: NOW)  # type: ignore[arg-type]
    environ = {"REQUEST_METHOD": method, "wsgi.input": io.BytesIO(body), "REMOTE_ADDR": "10.0.0.9",
               "CONTENT_LENGTH": str(len(body)) if length is None else length, **(headers or {})}
    got: list[str] = []
    out = b"".join(door(environ, lambda status, hdrs: got.append(status)))  # type: ignore[arg-type]
    return int(got[0].split()[0]), out, inner


FORM = b"command=%2Fgpu&text=nodes&user_id=U1&channel_id=C1"


def test_a_signed_command_goes_through() -> None:
    status, out, inner = call(FORM, sign(FORM))
    assert (status, out, inner.bodies) == (200, b"ok", [FORM])


@pytest.mark.parametrize("headers", [
    {},
    {"HTTP_X_SLACK_REQUEST_TIMESTAMP": "abc", "HTTP_X_SLACK_SIGNATURE": "v0=00"},
    {"HTTP_X_SLACK_REQUEST_TIMESTAMP": "١٧٠٠٠٠٠٠٠٠", "HTTP_X_SLACK_SIGNATURE": "v0=00"},
    {"HTTP_X_SLACK_REQUEST_TIMESTAMP": "9" * 400, "HTTP_X_SLACK_SIGNATURE": "v0=00"},
    {"HTTP_X_SLACK_REQUEST_TIMESTAMP": str(NOW), "HTTP_X_SLACK_SIGNATURE": "garbage"},
    {"HTTP_X_SLACK_REQUEST_TIMESTAMP": str(NOW), "HTTP_X_SLACK_SIGNATURE": "\x80"},  # fuzz
    sign(FORM, ts=str(NOW - 301)),
    sign(FORM, secret="not-the-secret"),
])
def test_unsigned_requests_get_401_and_their_body_is_never_logged(
        headers: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    body = FORM + b"&secret_marker=BODY-MUST-NOT-BE-LOGGED"
    status, _, inner = call(body, headers)
    assert status == 401 and inner.bodies == []
    assert "BODY-MUST-NOT-BE-LOGGED" not in caplog.text
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING]


@pytest.mark.parametrize("body", [
    b"command=%2Fgpu&text=\xff\xfe",  # not UTF-8
    b"payload=%7Bnot-json",
    b"payload=%5B1%5D",  # a list
    b"payload=" + json.dumps({"actions": []}).encode(),  # no type
    b"payload=" + json.dumps({"type": "block_actions", "actions": "x"}).encode(),
    b"payload=" + json.dumps({"type": "block_actions", "actions": [1]}).encode(),
    b"payload=" + json.dumps({"type": "block_actions", "actions": [{"value": 5}]}).encode(),
    b"payload=" + json.dumps({"type": "block_actions", "user": "U1"}).encode(),
    b"payload=" + json.dumps({"type": "block_actions", "channel": {"id": ["C1"]}}).encode(),
    b"payload=" + json.dumps({"type": "block_actions", "response_url": 7}).encode(),
    b"payload=" + b"[" * 100_000,
    b"a=1&" * 100,  # too many fields
    b"=&&=",
])
def test_malformed_signed_requests_get_400(body: bytes) -> None:
    status, _, inner = call(body, sign(body))
    assert status == 400 and inner.bodies == []


@pytest.mark.parametrize(("method", "length", "want"), [
    ("GET", None, 405), ("POST", "", 400), ("POST", "abc", 400), ("POST", "-5", 400),
    ("POST", str(10 << 20), 413),
])
def test_methods_and_lengths(method: str, length: str | None, want: int) -> None:
    assert call(FORM, sign(FORM), method=method, length=length)[0] == want


def test_a_long_command_is_answered_without_being_parsed() -> None:
    body = b"command=%2Fgpu&user_id=U1&text=why-pending+" + b"x" * 100_000
    status, out, inner = call(body, sign(body))
    assert status == 200 and inner.bodies == []
    reply = json.loads(out)
    assert reply["response_type"] == "ephemeral" and len(reply["text"]) < 300


# -- through the running bot -------------------------------------------------------------------


def test_user_errors_log_at_info_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with BotHarness() as h:
        h.command("why-pending ml-team/train-9")
        h.slack.wait_for("response_url")
        time.sleep(0.2)
    records = [r for r in caplog.records if "train-9" in r.getMessage()]
    assert records
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_error_replies_fit_slack_whatever_the_argument() -> None:
    with BotHarness() as h:
        _, ack, _ = h.command("why-pending " + "y" * 1990)
        if ack["text"].startswith("Diagnosing"):
            reply = h.slack.wait_for("response_url")[0].params["text"]
        else:
            reply = ack["text"]
        assert len(reply) <= 3000
        _, ack, _ = h.command("nosuchcommand-" + "z" * 1980)
        assert len(ack["text"]) <= 3000


# -- slow clients ------------------------------------------------------------------------------


def _hello(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]


@pytest.fixture
def server() -> Iterator[GuardedServer]:
    srv = GuardedServer(_hello, host="127.0.0.1", port=0, threads=2, connection_limit=20,
                        read_deadline=1.0, channel_timeout=30)
    stop = threading.Event()
    smap: Any = srv._map  # type: ignore[attr-defined]

    def loop() -> None:
        while not stop.is_set():
            wasyncore.loop(timeout=0.05, map=smap, count=1)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield srv
    stop.set()
    thread.join(5)
    wasyncore.close_all(smap)
    srv.task_dispatcher.shutdown(timeout=1)


def _get(srv: GuardedServer) -> int:
    url = f"http://127.0.0.1:{srv.effective_port}/"
    with urllib.request.urlopen(url, timeout=5) as resp:
        return int(resp.status)


def _slow(srv: GuardedServer) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", int(srv.effective_port)), timeout=5)
    s.sendall(b"POST /slack/events HTTP/1.1\r\nHost: x\r\n")  # and never the rest
    return s


def _closed(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_a_trickled_request_is_cut_off_at_the_read_deadline(server: GuardedServer) -> None:
    s = _slow(server)
    start = time.monotonic()
    while time.monotonic() - start < 4 and not _closed(s, 0.25):
        s.sendall(b"X")  # one byte at a time: never idle, never done
    assert time.monotonic() - start < 4, "the trickling client was never cut off"
    s.close()


def test_slow_clients_beyond_the_connection_limit_are_dropped_first(
        server: GuardedServer) -> None:
    slow = [_slow(server) for _ in range(30)]  # more than the limit of 20
    try:
        assert _get(server) == 200  # served at once, not after the slow ones time out
        assert any(_closed(s, 0.5) for s in slow[:5]), "the oldest slow clients were kept"
    finally:
        for s in slow:
            s.close()
