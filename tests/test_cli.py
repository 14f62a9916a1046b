"""The CLI's contract: exit codes, JSON shape, no colour off a terminal."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot.cli import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, main

SCEN = Path(__file__).parent / "scenarios"
TAINT = SCEN / "taint-not-tolerated" / "cluster.yaml"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(list(argv), out=out, err=err)
    except SystemExit as e:  # argparse usage errors
        code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def target_of(scenario: str) -> list[str]:
    """The scenario's target as CLI arguments (TARGET [-n NS])."""
    data = yaml.safe_load((SCEN / scenario / "scenario.yaml").read_text())
    return [data["target"], *(["-n", data["namespace"]] if data.get("namespace") else [])]


def test_json_output_has_findings_and_checks() -> None:
    code, out, _ = run("why-pending", *target_of("taint-not-tolerated"), "--snapshot", str(TAINT),
                       "-o", "json")
    assert code == EXIT_OK
    data = json.loads(out)
    assert {"findings", "checks"} <= data.keys()
    first = data["findings"][0]
    assert {"code", "severity", "summary", "objects", "evidence", "fix"} <= first.keys()
    assert "TAINT_NOT_TOLERATED" in [f["code"] for f in data["findings"]]
    assert data["nodes"], "per-node verdicts are part of the JSON"


def test_text_output_has_no_colour_off_a_tty() -> None:
    code, out, _ = run("why-pending", *target_of("taint-not-tolerated"), "--snapshot", str(TAINT))
    assert code == EXIT_OK
    assert "TAINT_NOT_TOLERATED" in out
    assert "\x1b[" not in out


def test_colour_when_forced() -> None:
    _, out, _ = run("why-pending", *target_of("taint-not-tolerated"), "--snapshot", str(TAINT),
                    "--color", "always")
    assert "\x1b[" in out


def test_unknown_pod_exits_1_and_suggests_close_names() -> None:
    target, *ns = target_of("taint-not-tolerated")
    head, _, name = target.rpartition("/")
    typo = f"{head}/{name[:-1]}x" if head else name[:-1] + "x"
    code, out, err = run("why-pending", typo, *ns, "--snapshot", str(TAINT))
    assert code == EXIT_NOT_FOUND
    assert out == ""
    assert name in err


def test_missing_snapshot_exits_1_naming_the_path() -> None:
    code, _, err = run("nodes", "--snapshot", "/nonexistent/dump")
    assert code == EXIT_NOT_FOUND
    assert "/nonexistent/dump" in err


@pytest.mark.parametrize("argv", [
    ["why-pending"],                                             # no target
    ["frobnicate", "--snapshot", str(TAINT)],                    # unknown command
    ["why-pending", "a/b/c/d", "--snapshot", str(TAINT)],        # malformed target
    ["why-pending", "ns1/pod", "-n", "ns2", "--snapshot", str(TAINT)],  # two namespaces
    ["nodes", "--snapshot", str(TAINT), "--context", "prod"],    # two data sources
    ["nodes", "--snapshot", str(TAINT), "-o", "xml"],            # bad output format
])
def test_usage_errors_exit_2(argv: list[str]) -> None:
    code, _, err = run(*argv)
    assert code == EXIT_USAGE
    assert err


def test_doctor_unknown_node_exits_1() -> None:
    code, _, err = run("doctor", "no-such-node", "--snapshot", str(TAINT))
    assert code == EXIT_NOT_FOUND
    assert "no-such-node" in err


def test_nodes_json_ledger() -> None:
    code, out, _ = run("nodes", "--snapshot", str(TAINT), "-o", "json")
    assert code == EXIT_OK
    rows = json.loads(out)["details"]["rows"]
    assert rows and all({"node", "capacity", "allocatable", "allocated", "free"} <= r.keys()
                        for r in rows)
    assert all(r["free"] == max(r["allocatable"] - r["allocated"], 0) for r in rows)


def test_views_are_held_only_for_a_process_that_exits_without_freeing() -> None:
    from bot import cliview

    assert run("nodes", "--snapshot", str(TAINT), "-o", "json")[0] == EXIT_OK
    assert cliview._HELD is None  # main() in a library or a test keeps nothing
    kept = cliview._HELD
    try:
        cliview.hold_until_exit()  # what entry() does before it calls main()
        assert run("nodes", "--snapshot", str(TAINT), "-o", "json")[0] == EXIT_OK
        assert [type(v).__name__ for v in cliview._HELD or []] == ["SnapshotView"]
    finally:
        cliview._HELD = kept


def test_module_entry_point_runs() -> None:
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "nodes", "--snapshot", str(TAINT),
                           "-o", "json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["command"] == "nodes"


def test_no_snapshot_and_no_kubeconfig_exits_1_naming_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code, out, err = run("nodes")
    assert code == EXIT_NOT_FOUND
    assert out == ""
    assert str(missing) in err


def test_live_cluster_through_the_fake_api_server(tmp_path: Path) -> None:
    from tests.fake_kube import FakeKube

    target = target_of("taint-not-tolerated")
    with FakeKube(TAINT) as fk:
        kc = str(fk.write_kubeconfig(tmp_path / "kc", context="lab"))
        code, out, err = run("why-pending", *target, "--kubeconfig", kc, "--context", "lab",
                             "-o", "json")
    assert code == EXIT_OK, err
    data = json.loads(out)
    assert "TAINT_NOT_TOLERATED" in [f["code"] for f in data["findings"]]
    assert data["source"].startswith("context lab")


def test_unreachable_cluster_exits_1_naming_the_server(tmp_path: Path) -> None:
    from tests.fake_kube import FakeKube

    with FakeKube(TAINT) as fk:
        kc = str(fk.write_kubeconfig(tmp_path / "kc"))
        url = fk.url
    code, out, err = run("nodes", "--kubeconfig", kc)
    assert code == EXIT_NOT_FOUND
    assert out == ""
    assert url in err


def test_forbidden_read_is_listed_as_not_checked(tmp_path: Path) -> None:
    from tests.fake_kube import FakeKube

    target = target_of("taint-not-tolerated")
    with FakeKube(TAINT) as fk:
        fk.faults.forbid("resourcequotas")
        kc = str(fk.write_kubeconfig(tmp_path / "kc"))
        code, out, _ = run("why-pending", *target, "--kubeconfig", kc, "-o", "json")
    assert code == EXIT_OK
    data = json.loads(out)
    assert any("resourcequotas" in u and "403" in u for u in data["unchecked"])
    assert "TAINT_NOT_TOLERATED" in [f["code"] for f in data["findings"]]


def test_mistyped_snapshot_path_suggests_the_real_one() -> None:
    code, _, err = run("nodes", "--snapshot", str(SCEN / "taint-not-tolerate"))
    assert code == EXIT_NOT_FOUND
    assert str(SCEN / "taint-not-tolerated") in err


def test_mistyped_node_suggests_close_names() -> None:
    from bot.snapshot import load_snapshot

    name = load_snapshot(TAINT).list("Node")[0]["metadata"]["name"]
    typo = name[:-1] + ("x" if name[-1] != "x" else "y")
    code, _, err = run("doctor", typo, "--snapshot", str(TAINT))
    assert code == EXIT_NOT_FOUND
    assert name in err
