"""Real Prometheus and Alertmanager (Debian's binaries) on 127.0.0.1, for end-to-end tests.

Both run from a temporary directory on free ports, 1 s scrape and evaluation intervals,
Alertmanager without clustering (``--cluster.listen-address=``: otherwise it binds
0.0.0.0:9094 and waits for gossip); both are stopped by PID.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not come up in {timeout}s")
        time.sleep(0.2)


class Process:
    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._out.close()


def start_alertmanager(binary: str, tmp: Path, webhook_url: str, token: str, *,
                       port: int | None = None) -> tuple[Process, str]:
    """``port``: one reserved beforehand (a bot configured with Alertmanager's URL)."""
    port = port or free_port()
    config = {
        "route": {"receiver": "gpubot", "group_by": ["alertname", "namespace", "pod", "node"],
                  "group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "gpubot", "webhook_configs": [{
            "url": webhook_url, "send_resolved": True,
            "http_config": {"authorization": {"type": "Bearer", "credentials": token}}}]}],
    }
    (tmp / "alertmanager.yml").write_text(yaml.safe_dump(config))
    proc = Process([binary, f"--config.file={tmp / 'alertmanager.yml'}",
                    f"--storage.path={tmp / 'am-data'}",
                    f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                    "--log.level=warn"], tmp / "alertmanager.log")
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/-/ready")
    return proc, url


def start_prometheus(binary: str, tmp: Path, rules: dict[str, Any], target: str,
                     alertmanager: str | None) -> tuple[Process, str]:
    port = free_port()
    (tmp / "rules.yaml").write_text(yaml.safe_dump(rules))
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp / "rules.yaml")],
        "scrape_configs": [{"job_name": "fixture", "static_configs": [{"targets": [target]}]}],
    }
    if alertmanager:
        config["alerting"] = {"alertmanagers": [{"static_configs": [
            {"targets": [alertmanager.removeprefix("http://")]}]}]}
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    proc = Process([binary, f"--config.file={tmp / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp / 'prom-data'}",
                    f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                   tmp / "prometheus.log")
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/-/ready")
    return proc, url


def query(url: str, q: str) -> list[dict[str, Any]]:
    from urllib.parse import urlencode

    with urllib.request.urlopen(f"{url}/api/v1/query?{urlencode({'query': q})}",
                                timeout=5) as resp:
        return list(json.load(resp)["data"]["result"])


def wait_series(url: str, q: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        found = query(url, q)
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"no series for {q} in {timeout}s")
        time.sleep(0.3)
