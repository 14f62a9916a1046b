"""Slack front end under load: N concurrent ``/gpu why-pending`` commands, a slow cluster.

    .venv/bin/python bench/bench_slack.py                       # 50 commands, 2 s per request
    .venv/bin/python bench/bench_slack.py --n 50 --latency 2 --workers 8 --no-watch

The bot runs as ``gpubot serve`` does (HTTP mode, waitress on 127.0.0.1, live view with
its watch cache, shared reads) against the fake Kubernetes API server (tests/fake_kube)
with ``--latency`` seconds added to every request, and the fake Slack Web API
(tests/fake_slack). All commands are correctly signed and POSTed at once from N threads.

Measured per command: ack = until the HTTP response to the slash command (Slack's limit
is 3 s; the target is 1 s); answer = until the card's chat.postMessage reached Slack.
Pass: every command acked within 1 s and every one answered with a card (no timeout).
Exit code 0 on pass, 1 on fail.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.serve import open_cluster  # noqa: E402
from bot.slack.app import SlackBot  # noqa: E402
from bot.slack.config import Settings  # noqa: E402
from bot.slack.server import BotServer  # noqa: E402
from tests.fake_kube import FakeKube  # noqa: E402
from tests.fake_slack import FakeSlack, signed_headers  # noqa: E402
from tests.fake_slack.harness import SECRET, make_settings  # noqa: E402


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50, help="concurrent commands (default 50)")
    ap.add_argument("--latency", type=float, default=2.0,
                    help="seconds added to every API request (default 2)")
    ap.add_argument("--snapshot", default=str(ROOT / "examples/plugin-crashloop-cuda-mismatch"))
    ap.add_argument("--target", default="ml-team/train-0")
    ap.add_argument("--workers", type=int, default=None, help="diagnosis pool size")
    ap.add_argument("--deadline", type=float, default=None, help="per-diagnosis deadline (s)")
    ap.add_argument("--no-watch", action="store_true", help="no watch cache: every read asks")
    ap.add_argument("--timeout", type=float, default=300, help="give up after (s)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # waitress warns at every queued connection of the burst; the ack times say it all.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)

    with tempfile.TemporaryDirectory() as tmp, FakeKube(args.snapshot) as kube, \
            FakeSlack() as slack:
        kubeconfig = kube.write_kubeconfig(Path(tmp) / "kubeconfig")
        kube.faults.latency(args.latency)
        # The production defaults (bot.slack.config.Settings) unless a flag says otherwise.
        prod = Settings()
        settings = make_settings(
            slack, kubeconfig=str(kubeconfig), context=None, watch=not args.no_watch,
            rate_limit=0, workers=args.workers or prod.workers,
            queue_size=max(prod.queue_size, args.n), deadline=args.deadline or prod.deadline,
            http_threads=prod.http_threads, coalesce_ttl=prod.coalesce_ttl)
        t0 = time.monotonic()
        view, probe, close_view = open_cluster(settings)
        bot = SlackBot(settings, view, cluster_probe=probe)
        server = BotServer(bot).start()
        live = getattr(view, "view", None)
        cache = getattr(live, "cache", None)
        if cache is not None:
            synced = cache.wait_synced(120)
            print(f"watch cache {'synced' if synced else 'NOT synced'} in "
                  f"{time.monotonic() - t0:.1f}s ({', '.join(cache.kinds)})")
        try:
            acks, answers, ok = run(args, server.url, slack)
        finally:
            server.stop(timeout=5)
            close_view()
        requests = len(kube.requests)

    n = args.n
    print(f"{n} concurrent /gpu why-pending {args.target}; API latency {args.latency:g}s per "
          f"request; {settings.workers} workers; watch cache {'off' if args.no_watch else 'on'}")
    print(f"ack     p50 {pct(acks, 50) * 1000:7.0f} ms   p99 {pct(acks, 99) * 1000:7.0f} ms   "
          f"max {max(acks) * 1000:7.0f} ms   ({sum(a <= 1.0 for a in acks)}/{n} within 1 s)")
    if answers:
        print(f"answer  p50 {pct(answers, 50):7.2f} s    p99 {pct(answers, 99):7.2f} s    "
              f"max {max(answers):7.2f} s    ({len(answers)}/{n} answered)")
    print(f"API requests made: {requests}")
    passed = ok and len(answers) == n and all(a <= 1.0 for a in acks)
    print("PASS" if passed else "FAIL")
    return 0 if passed else 1


def run(args: argparse.Namespace, url: str, slack: FakeSlack
        ) -> tuple[list[float], list[float], bool]:
    n = args.n
    barrier = threading.Barrier(n)
    starts: dict[str, float] = {}
    acks: dict[str, float] = {}
    errors: list[str] = []

    def fire(i: int) -> None:
        channel = f"C{i:05d}"
        body = urlencode({
            "command": "/gpu", "text": f"why-pending {args.target}", "user_id": f"U{i:05d}",
            "channel_id": channel, "channel_name": "bench", "team_id": "T1",
            "trigger_id": f"bench.{i}", "response_url": slack.response_url(channel)})
        req = urllib.request.Request(url + "/slack/events", data=body.encode(),
                                     headers=signed_headers(SECRET, body))
        barrier.wait()
        start = time.monotonic()
        starts[channel] = start
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                text = resp.read()
                if b"Diagnosing" not in text:
                    errors.append(f"{channel}: {text[:200]!r}")
        except Exception as err:  # report, do not hide
            errors.append(f"{channel}: {err}")
        acks[channel] = time.monotonic() - start

    threads = [threading.Thread(target=fire, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    deadline = time.monotonic() + args.timeout
    answers: dict[str, float] = {}
    timeouts = 0
    while time.monotonic() < deadline:
        for c in slack.calls("chat.postMessage"):
            ch = str(c.params.get("channel"))
            if "thread_ts" not in c.params and c.status == 200 and ch in starts:
                answers.setdefault(ch, c.at - starts[ch])
        timeouts = sum("timed out" in str(c.params.get("text", ""))
                       for c in slack.calls("response_url"))
        if len(answers) + timeouts >= n:
            break
        time.sleep(0.1)
    for e in errors[:5]:
        print("error:", e)
    if timeouts:
        print(f"{timeouts} commands timed out")
    return list(acks.values()), list(answers.values()), not errors and not timeouts


if __name__ == "__main__":
    sys.exit(main())
