"""Run the fake API server until SIGTERM/SIGINT.

    python -m tests.fake_kube --snapshot PATH --kubeconfig-out FILE [--port N]
                              [--log-requests FILE] [--token T] [--daemonset-delay S]
                              [--daemonset-outcome NS/NAME=ready|crashloop ...]

Writes the kubeconfig first, then prints one line, ``ready http://127.0.0.1:PORT``, once
the server accepts connections.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from .server import FakeKube


def _outcome(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or "/" not in key or value not in ("ready", "crashloop"):
        raise argparse.ArgumentTypeError(f"expected NS/NAME=ready|crashloop, got {text!r}")
    return key, value


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
