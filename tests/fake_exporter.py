"""A metrics endpoint on 127.0.0.1 that a real Prometheus scrapes: kube-state-metrics and
dcgm-exporter series as text, changeable while it runs.

    with MetricsFixture() as fx:
        fx.set('kube_pod_status_phase{namespace="ml-team",pod="train-0",phase="Pending"}', 1)
        fx.url  # http://127.0.0.1:PORT/metrics
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class MetricsFixture:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._series: dict[str, float] = {}
        fixture = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = fixture.text().encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def target(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def set(self, series: str, value: float) -> None:
        with self._lock:
            self._series[series] = value

    def text(self) -> str:
        with self._lock:
            return "".join(f"{s} {v:g}\n" for s, v in sorted(self._series.items()))

    def __enter__(self) -> MetricsFixture:
        self._thread.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
