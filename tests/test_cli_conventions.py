"""kubectl's conventions in the CLI: global flags anywhere, the context's namespace, -n/-A,
-o text|wide|json|yaml, durations, -l, --version, completion, NO_COLOR, stdin and .gz
snapshots, --fail-on."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from bot.cli import EXIT_FINDINGS, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, build_parser, main
from bot.durations import parse_duration
from bot.version import version
from tests.fake_kube import FakeKube

ROOT = Path(__file__).resolve().parents[1]
SCEN = ROOT / "tests" / "scenarios"
CRASH = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
TAINT = SCEN / "taint-not-tolerated" / "cluster.yaml"
TEAMS = SCEN / "pending_several_namespaces" / "cluster.yaml"
ALL_CLEAR = SCEN / "doctor_all_clear" / "snapshot"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(*argv: str, stdin: bytes | None = None, environ: dict[str, str] | None = None,
        out: io.StringIO | None = None) -> tuple[int, str, str]:
    out = out if out is not None else io.StringIO()
    err = io.StringIO()
    try:
        code = main(list(argv), out=out, err=err,
                    stdin=io.BytesIO(stdin) if stdin is not None else None,
                    environ=environ if environ is not None else {})
    except SystemExit as e:
        code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def codes(out: str) -> list[str]:
    return [f["code"] for f in json.loads(out)["findings"]]


# -- flags anywhere on the line ---------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["--snapshot", str(CRASH), "-o", "json", "why-pending", "ml-team/train-0"],
    ["why-pending", "--snapshot", str(CRASH), "ml-team/train-0", "-o", "json"],
    ["-o", "json", "why-pending", "train-0", "-n", "ml-team", "--snapshot", str(CRASH)],
    ["-n", "ml-team", "--snapshot", str(CRASH), "why-pending", "train-0", "--output=json"],
])
def test_global_flags_work_before_and_after_the_subcommand(argv: list[str]) -> None:
    code, out, err = run(*argv)
    assert code == EXIT_OK, err
    assert codes(out)[0] == "CUDA_DRIVER_MISMATCH"  # the root cause leads (issue 8)


def test_a_usage_error_shows_the_subcommands_own_usage() -> None:
    code, _, err = run("quota", "--snapshot", str(TEAMS), "--bogus")
    assert code == EXIT_USAGE
    assert err.startswith("usage: gpubot quota")
    assert "--bogus" in err
    code, _, err = run("--snapshot", str(TEAMS), "pending", "--limit", "many")
    assert code == EXIT_USAGE
    assert err.startswith("usage: gpubot pending")


def test_flags_given_before_serve_reach_it() -> None:
    args = build_parser().parse_args(["--snapshot", "x", "serve", "--mode", "http"])
    assert (args.snapshot, args.mode) == ("x", "http")
    args = build_parser().parse_args(["serve", "--snapshot", "y"])
    assert args.snapshot == "y"


# -- namespaces ---------------------------------------------------------------------------------


def _quota_namespaces(out: str) -> set[str]:
    return {row["namespace"] for row in json.loads(out)["details"]["rows"]}


def test_quota_takes_n_a_and_a_positional_namespace() -> None:
    _, everything, _ = run("quota", "--snapshot", str(TEAMS), "-o", "json")
    assert len(_quota_namespaces(everything)) > 1
    for argv in (["-n", "vision"], ["vision"], ["--namespace=vision"]):
        code, out, err = run("quota", *argv, "--snapshot", str(TEAMS), "-o", "json")
        assert code == EXIT_OK, err
        assert _quota_namespaces(out) == {"vision"}
    code, out, _ = run("quota", "-A", "--snapshot", str(TEAMS), "-o", "json")
    assert code == EXIT_OK
    assert _quota_namespaces(out) == _quota_namespaces(everything)
    assert run("quota", "-A", "-n", "vision", "--snapshot", str(TEAMS))[0] == EXIT_USAGE
    assert run("quota", "vision", "-n", "ml-team", "--snapshot", str(TEAMS))[0] == EXIT_USAGE


def test_pending_takes_n_and_a() -> None:
    code, out, _ = run("pending", "-A", "--snapshot", str(TEAMS), "-o", "json")
    assert code == EXIT_OK
    assert len({r["namespace"] for r in json.loads(out)["details"]["rows"]}) > 1
    code, out, _ = run("-n", "vision", "pending", "--snapshot", str(TEAMS), "-o", "json")
    assert {r["namespace"] for r in json.loads(out)["details"]["rows"]} == {"vision"}


def test_the_contexts_namespace_is_the_default_namespace(tmp_path: Path) -> None:
    with FakeKube(CRASH) as fk:
        kubeconfig = str(fk.write_kubeconfig(tmp_path / "kc", namespace="ml-team"))
        code, out, err = run("why-pending", "train-0", "--kubeconfig", kubeconfig,
                             "--timeout", "5s", "-o", "json")
        assert code == EXIT_OK, err
        assert "DEVICE_PLUGIN_CRASHLOOP" in codes(out)
        # Another context namespace: train-0 is looked for there.
        kubeconfig = str(fk.write_kubeconfig(tmp_path / "kc2", namespace="research"))
        code, _, err = run("why-pending", "train-0", "--kubeconfig", kubeconfig)
        assert code == EXIT_NOT_FOUND and "namespace 'research'" in err
        # NS/POD and -n win over the context's namespace.
        for argv in (["ml-team/train-0"], ["train-0", "-n", "ml-team"]):
            code, out, err = run("why-pending", *argv, "--kubeconfig", kubeconfig, "-o", "json")
            assert code == EXIT_OK, err
            assert "DEVICE_PLUGIN_CRASHLOOP" in codes(out)
        # No namespace in the context: `default`, as in kubectl.
        kubeconfig = str(fk.write_kubeconfig(tmp_path / "kc3", namespace=""))
        code, _, err = run("why-pending", "train-0", "--kubeconfig", kubeconfig)
        assert code == EXIT_NOT_FOUND and "namespace 'default'" in err


# -- output formats -----------------------------------------------------------------------------


def test_yaml_output_is_the_json_document() -> None:
    argv = ("why-pending", "ml-team/train-0", "--snapshot", str(CRASH))
    _, as_json, _ = run(*argv, "-o", "json")
    code, as_yaml, _ = run(*argv, "-o", "yaml")
    assert code == EXIT_OK
    assert yaml.safe_load(as_yaml) == json.loads(as_json)


def test_wide_output_has_more_columns() -> None:
    _, text, _ = run("nodes", "--snapshot", str(CRASH))
    _, wide, _ = run("nodes", "--snapshot", str(CRASH), "-o", "wide")

    def header(out: str) -> list[str]:
        return next(line.split() for line in out.splitlines() if line.startswith("NODE "))

    assert len(header(text)) < len(header(wide))
    assert {"READY", "SCHEDULABLE", "TAINTS"} <= set(header(wide))


# -- durations, selectors, version ---------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [
    ("5s", 5), ("1m", 60), ("1m30s", 90), ("500ms", 0.5), ("1h", 3600), ("10", 10),
    ("2.5s", 2.5),
])
def test_durations_as_kubectl_takes_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "s", "-1s", "0", "1m 5s", "5s1"])
def test_bad_durations_are_usage_errors(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)
    code, _, err = run("nodes", "--snapshot", str(CRASH), "--timeout", text)
    assert code == EXIT_USAGE
    assert "--timeout" in err


def test_pending_selector_keeps_matching_workloads_and_templates() -> None:
    code, out, _ = run("pending", "-l", "app=sd-finetune", "--snapshot", str(TEAMS), "-o", "json")
    assert code == EXIT_OK
    rows = json.loads(out)["details"]["rows"]
    assert [r["workload"] for r in rows] == ["deployment/sd-finetune"]  # no pod: its template
    _, out, _ = run("pending", "--selector", "app in (llm-serve,clip-eval)",
                    "--snapshot", str(TEAMS), "-o", "json")
    assert sorted(r["workload"] for r in json.loads(out)["details"]["rows"]) == [
        "deployment/clip-eval", "deployment/llm-serve"]
    code, _, err = run("pending", "-l", "app in (x", "--snapshot", str(TEAMS))
    assert code == EXIT_USAGE and "selector" in err


def test_version() -> None:
    code, out, _ = run("--version")
    assert code == EXIT_OK
    assert out.strip() == f"gpubot {version()}"
    assert version()[0].isdigit()


# -- completion -----------------------------------------------------------------------------------


def _bash_complete(script: str, line: str) -> list[str]:
    words = line.split(" ")
    program = (script + f"\nCOMP_WORDS=({' '.join(repr(w) for w in words)})\n"
               f"COMP_CWORD={len(words) - 1}\n_gpubot\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n")
    bash = shutil.which("bash")
    assert bash, "bash runs the completion test"
    done = subprocess.run([bash, "--norc", "-c", program], capture_output=True, text=True,
                          timeout=10, check=True)
    return done.stdout.split()


def test_bash_completion_completes_commands_flags_and_values() -> None:
    code, script, _ = run("completion", "bash")
    assert code == EXIT_OK
    assert _bash_complete(script, "gpubot why") == ["why-pending"]
    assert "--all-namespaces" in _bash_complete(script, "gpubot quota --")
    assert "--selector" in _bash_complete(script, "gpubot pending --s")
    assert "--selector" not in _bash_complete(script, "gpubot quota --s")
    assert _bash_complete(script, "gpubot nodes -o ") == ["text", "wide", "json", "yaml"]
    assert _bash_complete(script, "gpubot pending --fail-on c") == ["critical"]


def test_zsh_and_fish_completion_name_every_command() -> None:
    parser_commands = ["why-pending", "doctor", "nodes", "pending", "quota", "serve"]
    _, zsh, _ = run("completion", "zsh")
    assert "bashcompinit" in zsh and "complete -o default -F _gpubot gpubot" in zsh
    code, fish, _ = run("completion", "fish")
    assert code == EXIT_OK
    for name in parser_commands:
        assert f"-a {name} " in fish
    assert "__fish_seen_subcommand_from pending' -s l -l selector -x" in fish
    assert "-s o -l output -x -a 'text wide json yaml'" in fish
    assert run("completion", "tcsh")[0] == EXIT_USAGE


# -- colour ---------------------------------------------------------------------------------------


def test_no_color_turns_colour_off_on_a_terminal() -> None:
    argv = ("why-pending", "ml-team/train-0", "--snapshot", str(CRASH))
    assert "\x1b[" in run(*argv, out=_Tty())[1]
    assert "\x1b[" not in run(*argv, out=_Tty(), environ={"NO_COLOR": "1"})[1]
    assert "\x1b[" in run(*argv, "--color", "always", environ={"NO_COLOR": "1"})[1]
    assert "\x1b[" not in run(*argv, "--color=never", out=_Tty())[1]


# -- snapshots from stdin and gzip ----------------------------------------------------------------


def test_snapshot_from_standard_input() -> None:
    code, out, err = run("why-pending", "deployment/segformer", "-n", "cv-team",
                         "--snapshot", "-", "-o", "json", stdin=TAINT.read_bytes())
    assert code == EXIT_OK, err
    assert "TAINT_NOT_TOLERATED" in codes(out)
    assert json.loads(out)["source"] == "snapshot stdin"


def test_gzipped_snapshots_are_read_as_they_are(tmp_path: Path) -> None:
    single = tmp_path / "cluster.yaml.gz"
    single.write_bytes(gzip.compress(TAINT.read_bytes()))
    code, out, err = run("why-pending", "deployment/segformer", "-n", "cv-team",
                         "--snapshot", str(single), "-o", "json")
    assert code == EXIT_OK, err
    assert "TAINT_NOT_TOLERATED" in codes(out)
    # A cluster-info dump directory whose files were gzipped one by one.
    dump = tmp_path / "dump"
    shutil.copytree(CRASH, dump)
    for f in list(dump.rglob("*.json")):
        f.with_name(f.name + ".gz").write_bytes(gzip.compress(f.read_bytes()))
        f.unlink()
    code, out, err = run("why-pending", "ml-team/train-0", "--snapshot", str(dump), "-o", "json")
    assert code == EXIT_OK, err
    assert codes(out)[0] == "CUDA_DRIVER_MISMATCH"  # the root cause leads (issue 8)
    # Stdin may be gzipped too; a broken gzip file is a problem named, not a crash.
    code, out, _ = run("why-pending", "deployment/segformer", "-n", "cv-team", "--snapshot", "-",
                       "-o", "json", stdin=gzip.compress(TAINT.read_bytes()))
    assert "TAINT_NOT_TOLERATED" in codes(out)
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(TAINT, bad / "cluster.yaml")
    (bad / "extra.yaml.gz").write_bytes(gzip.compress(b"kind: List\n")[:12])
    code, out, _ = run("why-pending", "deployment/segformer", "-n", "cv-team",
                       "--snapshot", str(bad), "-o", "json")
    assert code == EXIT_OK
    assert any("extra.yaml.gz" in u and "gzip" in u for u in json.loads(out)["unchecked"])


# -- --fail-on -------------------------------------------------------------------------------------


def test_fail_on_exits_3_at_that_severity_or_worse() -> None:
    argv = ("why-pending", "ml-team/train-0", "--snapshot", str(CRASH))
    assert run(*argv)[0] == EXIT_OK  # default: off
    assert run(*argv, "--fail-on", "critical")[0] == EXIT_FINDINGS
    code, out, _ = run(*argv, "--fail-on", "warning", "-o", "json")
    assert code == EXIT_FINDINGS and codes(out)  # the report is still printed
    clear = ("doctor", "--snapshot", str(ALL_CLEAR))
    assert codes(run(*clear, "-o", "json")[1]) == ["ALL_CLEAR"]
    assert run(*clear, "--fail-on", "warning")[0] == EXIT_OK
    assert run(*argv, "--fail-on", "info")[0] == EXIT_USAGE


def test_a_gzip_bomb_is_refused_not_inflated(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.snapshot import loader

    monkeypatch.setattr(loader, "MAX_INFLATED", 64 << 10)
    snap = tmp_path / "snap"
    snap.mkdir()
    shutil.copy(TAINT, snap / "cluster.yaml")
    (snap / "bomb.json.gz").write_bytes(gzip.compress(b" " * (1 << 20)))
    code, out, _ = run("why-pending", "deployment/segformer", "-n", "cv-team",
                       "--snapshot", str(snap), "-o", "json")
    assert code == EXIT_OK
    assert any("bomb.json.gz" in u and "inflates to more than" in u
               for u in json.loads(out)["unchecked"])
    code, _, err = run("nodes", "--snapshot", "-", stdin=b" " * (65 << 10))
    assert code == 1 and "larger than" in err


# -- did you mean ---------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, meant", [
    (["why-pendng", "x"], "why-pending"),
    (["doctr"], "doctor"),
    (["nodes", "-o", "jsn"], "json"),
    (["completion", "fsh"], "fish"),
])
def test_a_mistyped_choice_names_the_closest_one(argv: list[str], meant: str) -> None:
    code, _, err = run(*argv)
    assert code == EXIT_USAGE
    assert f"did you mean {meant}?" in err
    assert "choose from" not in err


def test_a_choice_like_no_other_lists_them_all() -> None:
    code, _, err = run("frobnicate")
    assert code == EXIT_USAGE
    assert "did you mean" not in err
    assert "why-pending, doctor, nodes" in err


# -- serve --help ---------------------------------------------------------------------------------


def test_serve_help_shows_serves_own_examples_and_each_parses() -> None:
    code, out, _ = run("serve", "--help")
    assert code == EXIT_OK
    assert "why-pending" not in out and "--fail-on" not in out  # the diagnoses' examples
    examples = [line.split("gpubot ", 1)[1] for line in out.split("examples:", 1)[1].splitlines()
                if "gpubot serve" in line]
    assert len(examples) >= 3
    for example in examples:
        # An example's trailing words after three spaces are its comment.
        argv = example.split("   ", 1)[0].split()
        assert argv[0] == "serve"
        build_parser().parse_args(argv)
