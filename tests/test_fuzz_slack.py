"""Property: Slack requests of any shape get an answer, never a 500 or a traceback; a
channel restricted to some namespaces is told nothing about the others, whatever it
types. Budget: tests/fuzzing.py."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.slack.frontdoor import FrontDoor
from tests.fake_slack.harness import SECRET, BotHarness
from tests.fuzzing import budget

NOW = 1_700_000_000
ROOT = Path(__file__).resolve().parents[1]
# The example's workload namespace, renamed so that no help text or example names it: the
# channel may read only "default".
OTHER = "team-secret-x"


def _sign(body: bytes, ts: str) -> tuple[str, str]:
    mac = hmac.new(SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
    return ts, "v0=" + mac.hexdigest()


# -- the front door, in process: any bytes, any headers ----------------------------------------

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "actions", "user", "channel", "id", "value", "action_id",
                         "response_url", "container", "message", "ts", "name"]),
        inner, max_size=4),
    max_leaves=12)
BODIES = st.one_of(
    st.binary(max_size=300),
    st.dictionaries(st.sampled_from(["command", "text", "user_id", "channel_id",
                                     "response_url", "trigger_id", "payload", "x"]),
                    st.text(max_size=30), max_size=6).map(lambda d: urlencode(d).encode()),
    JSONISH.map(lambda v: b"payload=" + urlencode({"": json.dumps(v)})[1:].encode()),
)


@budget(ci_examples=300)
@given(body=BODIES, signed=st.booleans(),
       ts=st.one_of(st.just(str(NOW)), st.text(max_size=12)),
       signature=st.text(max_size=70), length=st.one_of(st.none(), st.text(max_size=6)),
       method=st.sampled_from(["POST", "POST", "GET", "PUT"]))
def test_the_front_door_answers_any_request(body: bytes, signed: bool, ts: str, signature: str,
                                            length: str | None, method: str) -> None:
    seen: list[bytes] = []

    def inner(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ["wsgi.input"].read())
        start_response("200 OK", [])
        return [b""]

    if signed:
        ts, signature = _sign(body, str(NOW))
    environ = {"REQUEST_METHOD": method, "wsgi.input": io.BytesIO(body),
               "CONTENT_LENGTH": str(len(body)) if length is None else length,
               "HTTP_X_SLACK_REQUEST_TIMESTAMP": ts, "HTTP_X_SLACK_SIGNATURE": signature}
    statuses: list[str] = []
    door = FrontDoor(inner, SECRET, clock=lambda: NOW)  # type: ignore[arg-type]
    b"".join(door(environ, lambda s, h: statuses.append(s)))  # type: ignore[arg-type]
    status = int(statuses[0].split()[0])
    assert status in (200, 400, 401, 405, 413)
    if seen:  # only signed, well-formed requests get through
        assert signed and status == 200 and seen == [body]


# -- the running bot, in a restricted channel ---------------------------------------------------

WORDS = ["why-pending", "doctor", "nodes", "pending", "quota", "help", "wp", "Why-Pending",
         "-n", "--namespace", "default", "kube-system", "*", "--all-namespaces", "-A",
         "train-0", "train-1", "deployment/train", "job/train-0", "statefulset/train",
         "gpu-a100-0", "gpu-node-7", "nvidia-device-plugin-daemonset-x", "—n", "“train-0”",
         "a/b/c", "/", "", "\u200b", "%s", "<@U123>", "`", "*bold*", "x" * 300]


class _Errors(logging.Handler):
    """ERROR records and records with a traceback (caplog is per test, not per example)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            self.records.append(record)


@pytest.fixture(scope="module")
def errors() -> Iterator[_Errors]:
    handler = _Errors()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="module")
def bot(errors: _Errors, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotHarness]:
    snap = tmp_path_factory.mktemp("slackfuzz") / "snap"
    shutil.copytree(ROOT / "examples" / "plugin-crashloop-cuda-mismatch", snap)
    (snap / "ml-team").rename(snap / OTHER)
    for f in snap.rglob("*"):
        if f.is_file():
            f.write_text(f.read_text().replace("ml-team", OTHER))
    with BotHarness(snap, channel_namespaces={"C0CHAN1": frozenset({"default"})},
                    rate_limit=0) as h:
        yield h


def _answers(h: BotHarness, ack: Any, started: float) -> str:
    """The ack and whatever the bot sends after it, once it is quiet."""
    quiet_since = time.monotonic()
    count = -1
    while time.monotonic() - started < 20:
        calls = h.slack.calls()
        if len(calls) != count:
            count, quiet_since = len(calls), time.monotonic()
        elif time.monotonic() - quiet_since > 0.3 and (
                "Diagnosing" not in json.dumps(ack) or h.slack.calls("response_url")
                or h.slack.calls("chat.postMessage")):
            break
        time.sleep(0.05)
    return json.dumps(ack) + json.dumps([c.params for c in h.slack.calls()])


# Weighted towards what could leak: why-pending of names that exist only elsewhere.
COMMANDS = ["why-pending", "why-pending", "wp", "doctor", "nodes", "pending", "quota",
            "help"]
TARGET_WORDS = ["train-0", "eval-sweep-0", "pod/train-0", "default/train-0", "train-0",
                "eval-sweep-0", "job/train-0", "deployment/train-0", "statefulset/eval-sweep",
                "train-1", "gpu-a100-0", "nvidia-device-plugin-daemonset-x",
                "kube-system/train-0", "default"]
FLAGS = [[], [], [], ["-n", "default"], ["\u2014namespace", "default"],
         ["--namespace", "kube-system"], ["-A"], ["-n"]]


@st.composite
def command_texts(draw: st.DrawFn) -> str:
    """A command, a target that exists only in the other namespace or nowhere, flags, and
    now and then a stray word or Hypothesis's junk. Words are drawn uniformly (Hypothesis's
    own list draws favour short, simple lists)."""
    rnd = draw(st.randoms(use_true_random=False))
    parts = [rnd.choice(COMMANDS)]
    if rnd.random() < 0.8:
        parts.append(rnd.choice(TARGET_WORDS))
    parts += rnd.choice(FLAGS)
    if rnd.random() < 0.2:
        parts.insert(rnd.randint(0, len(parts)), rnd.choice(WORDS))
    if rnd.random() < 0.2:
        parts.append(draw(st.text(max_size=12).filter(lambda t: OTHER not in t)))
    return " ".join(parts).strip()


@budget(ci_examples=30)
@given(text=command_texts())
def test_a_restricted_channel_learns_nothing_of_other_namespaces(
        bot: BotHarness, errors: _Errors, text: str) -> None:
    errors.records.clear()
    bot.slack.clear()
    started = time.monotonic()
    status, ack, _ = bot.command(text)
    assert status == 200
    told = _answers(bot, ack, started)
    assert OTHER not in told, (text, told)
    assert not errors.records, (text, [r.getMessage() for r in errors.records])


@budget(ci_examples=25)
@given(value=JSONISH, action=st.sampled_from(["gpubot_recheck", "gpubot_action", "x"]))
def test_buttons_with_any_value_get_an_answer(bot: BotHarness, errors: _Errors, value: Any,
                                              action: str) -> None:
    errors.records.clear()
    bot.slack.clear()
    status, _, _ = bot.action(action, json.dumps(value), message_ts="1700000000.000001")
    assert status in (200, 404)
    time.sleep(0.05)
    assert not errors.records, [r.getMessage() for r in errors.records]
