"""deploy/prometheus: the PrometheusRule passes promtool's check and its unit tests, and
the Alertmanager receiver example passes amtool check-config."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.real_binaries import kubectl, require

DEPLOY = Path(__file__).resolve().parents[1] / "deploy/prometheus"
ALERTS = {"GPUQuotaExceeded", "GPUResourceExhaustion", "GPUDevicePluginDown",
          "GPUNotAdvertised", "GPUPodPendingTooLong", "GPUXidErrors"}


def _rule_file(tmp: Path) -> Path:
    """The PrometheusRule's spec.groups as a plain rule file (what promtool reads)."""
    doc = yaml.safe_load((DEPLOY / "gpubot-rules.yaml").read_text())
    assert doc["kind"] == "PrometheusRule"
    out = tmp / "rules.yaml"
    out.write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}))
    return out


def test_every_alert_the_bot_understands_is_a_rule_with_a_unit_test(tmp_path: Path) -> None:
    from bot.alerts.mapping import KNOWN

    groups = yaml.safe_load(_rule_file(tmp_path).read_text())["groups"]
    alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    assert alerts == ALERTS
    assert set(KNOWN) == ALERTS
    tested = {t["alertname"] for case in yaml.safe_load(
        (DEPLOY / "tests/gpubot-rules.test.yaml").read_text())["tests"]
              for t in case["alert_rule_test"]}
    assert tested == ALERTS


def test_promtool_check_and_unit_tests(tmp_path: Path) -> None:
    (promtool,) = require("promtool")
    rules = _rule_file(tmp_path)
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    shutil.copy(DEPLOY / "tests/gpubot-rules.test.yaml", tmp_path)
    run = subprocess.run([promtool, "test", "rules", "gpubot-rules.test.yaml"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_unit_tests_catch_a_quota_rule_without_ignoring_type(tmp_path: Path) -> None:
    """kube-state-metrics' quota series differ in `type`: without ignoring(type) the ratio
    matches nothing, and the unit test must say so."""
    (promtool,) = require("promtool")
    rules = _rule_file(tmp_path)
    rules.write_text(rules.read_text().replace("ignoring (type)", "on (namespace)"))
    shutil.copy(DEPLOY / "tests/gpubot-rules.test.yaml", tmp_path)
    run = subprocess.run([promtool, "test", "rules", "gpubot-rules.test.yaml"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "GPUQuotaExceeded" in run.stdout + run.stderr


def test_alertmanager_receiver_example_passes_amtool() -> None:
    (amtool,) = require("amtool")
    run = subprocess.run([amtool, "check-config", str(DEPLOY / "alertmanager-receiver.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    config = yaml.safe_load((DEPLOY / "alertmanager-receiver.yaml").read_text())
    hook = next(r for r in config["receivers"] if r["name"] == "gpubot")["webhook_configs"][0]
    assert hook["url"].endswith("/alertmanager") and hook["send_resolved"] is True
    assert hook["http_config"]["authorization"]["type"] == "Bearer"


def test_the_monitoring_overlay_installs_the_rules() -> None:
    out = subprocess.run([kubectl(), "kustomize", str(DEPLOY.parent / "overlays/monitoring")],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    rules = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "PrometheusRule"]
    assert [(r["metadata"]["name"], r["metadata"]["namespace"]) for r in rules] == [
        ("gpubot", "gpubot")]
    alerts = {r["alert"] for g in rules[0]["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert alerts == ALERTS
