"""Run the fake API server until SIGTERM/SIGINT.

    python -m tests.fake_kube --snapshot PATH --kubeconfig-out FILE [--port N]
                              [--log-requests FILE] [--token T] [--daemonset-delay S]
                              [--daemonset-outcome NS/NAME=ready|crashloop ...]
                              [--churn-pods N|P% --churn-node-period S]

With ``--churn-pods``, SIGUSR1 starts churn (``churn.py``: N pod changes a second, or P% of
the served pods a second, and every node's heartbeat every S seconds) and SIGUSR2 stops it:
the benchmark starts it once its watch cache has synced. SIGHUP compacts the watch history,
so every watch ends with 410 Gone and its client lists again.

Writes the kubeconfig first, then prints one line, ``ready http://127.0.0.1:PORT``, once
the server accepts connections.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from .churn import Churn
from .server import FakeKube


def _outcome(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or "/" not in key or value not in ("ready", "crashloop"):
        raise argparse.ArgumentTypeError(f"expected NS/NAME=ready|crashloop, got {text!r}")
    return key, value


def _rate(text: str) -> tuple[float, bool]:
    """``N`` pods a second, or ``P%`` of the pods a second: (value, is_percent)."""
    try:
        return (float(text[:-1]), True) if text.endswith("%") else (float(text), False)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or P%, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fake_kube",
                                     description="A fake Kubernetes API server for tests.")
    parser.add_argument("--snapshot", help="snapshot file or directory to serve")
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--kubeconfig-out", required=True, help="where to write a kubeconfig")
    parser.add_argument("--context", default="fake")
    parser.add_argument("--log-requests", help="append one line per request to this file")
    parser.add_argument("--token", help="require this bearer token")
    parser.add_argument("--daemonset-delay", type=float, default=2.0)
    parser.add_argument("--daemonset-outcome", type=_outcome, action="append", default=[])
    parser.add_argument("--pod-termination-delay", type=float, default=0.0)
    parser.add_argument("--churn-pods", type=_rate, default=(0.0, False),
                        help="pod changes a second, N or P%% of the pods, while churning "
                             "(SIGUSR1 starts, SIGUSR2 stops)")
    parser.add_argument("--churn-node-period", type=float, default=10.0,
                        help="seconds between two heartbeats of a node while churning")
    args = parser.parse_args(argv)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    fake = FakeKube(args.snapshot, token=args.token, host=args.host, port=args.port,
                    daemonset_delay=args.daemonset_delay,
                    daemonset_outcome=dict(args.daemonset_outcome),
                    pod_termination_delay=args.pod_termination_delay,
                    log_requests=args.log_requests)
    fake.start()
    signal.signal(signal.SIGHUP, lambda *_: fake.store.compact())
    rate, percent = args.churn_pods
    if rate > 0:
        if percent:
            rate = rate / 100 * len(fake.store.names("Pod"))
        churn = Churn(fake.store, pods_per_s=rate,
                      node_period=args.churn_node_period)
        signal.signal(signal.SIGUSR1, lambda *_: churn.start())
        signal.signal(signal.SIGUSR2, lambda *_: churn.stop())
    try:
        fake.write_kubeconfig(args.kubeconfig_out, context=args.context)
        print(f"ready {fake.url}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
