"""Dynamic completion (bot/complete.py): `gpubot completion bash`'s function, run in a real
bash with the words bash would give it, completes contexts, namespaces, pending pods and
nodes from a snapshot and from a live cluster (the fake API server), and completes nothing,
quickly, when the cluster does not answer."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import yaml

from bot.cli import build_parser
from bot.complete import DEADLINE, complete, read_line, split_line
from bot.completion import script
from tests.fake_kube import FakeKube

ROOT = Path(__file__).resolve().parents[1]
CRASH = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
NODES = ["ip-10-18-1-1.ec2.internal", "ip-10-18-1-2.ec2.internal", "ip-10-18-9-1.ec2.internal"]
BASH_WORDBREAKS = " \t\n\"'@><=;|&(:"
EKS = "arn:aws:eks:us-west-2:123456789012:cluster/gpu-prod"


def _env(**extra: str) -> dict[str, str]:
    """gpubot on PATH (the venv's), no kubeconfig of the machine's, not in a pod."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "GPUBOT_CONFIG",
                        "GPUBOT_CLUSTERS")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def _bash_words(line: str) -> list[str]:
    """COMP_WORDS as bash makes them: split at spaces and at ':' and '=' (COMP_WORDBREAKS),
    a run of those characters a word of its own."""
    words: list[str] = []
    for part in line.split(" "):
        words += re.findall(r"[=:]+|[^=:]+", part) or [""]
    return words


def bash_complete(line: str, env: Mapping[str, str] | None = None,
                  timeout: float = 10) -> list[str]:
    """What `gpubot completion bash`'s function puts in COMPREPLY for a TAB at the end of
    ``line``."""
    bash = shutil.which("bash")
    assert bash, "bash runs the completion test"
    words = _bash_words(line)
    program = (script("bash", build_parser())
               + f"\nCOMP_WORDS=({' '.join(_quote(w) for w in words)})\n"
               f"COMP_CWORD={len(words) - 1}\nCOMP_LINE={_quote(line)}\n"
               f"COMP_POINT={len(line)}\n_gpubot\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n")
    done = subprocess.run([bash, "--norc", "-c", program], capture_output=True, text=True,
                          timeout=timeout, check=True, env=dict(env or _env()))
    assert done.stderr == ""
    return [w for w in done.stdout.split("\n") if w]


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


# -- from a snapshot -------------------------------------------------------------------------


def test_nodes_pods_and_namespaces_come_from_the_snapshot_on_the_line() -> None:
    snap = f"--snapshot {CRASH}"
    assert bash_complete(f"gpubot doctor {snap} ") == NODES
    assert bash_complete(f"gpubot doctor {snap} ip-10-18-1") == NODES[:2]
    # The snapshot given before the command, -o's value not taken for the command.
    assert bash_complete(f"gpubot {snap} -o json doctor ip-10-18-9") == NODES[2:]
    # why-pending's TARGET: the pending pods, NS/POD, or POD in -n's namespace.
    assert bash_complete(f"gpubot why-pending {snap} ") == ["ml-team/train-0"]
    assert bash_complete(f"gpubot -n ml-team why-pending {snap} tr") == ["train-0"]
    assert bash_complete(f"gpubot why-pending {snap} -n gpu-operator t") == []
    assert bash_complete(f"gpubot pending {snap} -n ") == ["gpu-operator", "ml-team"]
    assert bash_complete(f"gpubot pending {snap} --namespace=m") == ["ml-team"]
    assert bash_complete(f"gpubot quota {snap} g") == ["gpu-operator"]


def test_snapshots_o_is_a_path_not_an_output_format() -> None:
    assert bash_complete(f"gpubot snapshot -o {ROOT}/exam") == [f"{ROOT}/examples"]
    assert bash_complete(f"gpubot snapshot --output {ROOT}/exam") == [f"{ROOT}/examples"]
    assert bash_complete("gpubot nodes -o ") == ["text", "wide", "json", "yaml"]


def test_a_given_argument_leaves_flags_to_complete() -> None:
    replies = bash_complete(f"gpubot doctor --snapshot {CRASH} {NODES[0]} ")
    assert "--output" in replies and NODES[1] not in replies
    assert "--selector" in bash_complete(f"gpubot pending --snapshot {CRASH} --s")


# -- from a live cluster ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_kube() -> Iterator[FakeKube]:
    with FakeKube(CRASH) as fk:
        yield fk


def test_nodes_pods_and_namespaces_come_from_the_cluster_the_line_names(
        fake_kube: FakeKube, tmp_path: Path) -> None:
    kubeconfig = fake_kube.write_kubeconfig(tmp_path / "kc", context="lab")
    on = f"--kubeconfig {kubeconfig}"
    assert bash_complete(f"gpubot doctor {on} ") == NODES
    assert bash_complete(f"gpubot why-pending {on} ml-team/") == ["ml-team/train-0"]
    assert bash_complete(f"gpubot why-pending {on} -n ml-team ") == ["train-0"]
    namespaces = bash_complete(f"gpubot {on} pending -n ")
    assert {"gpu-operator", "ml-team"} <= set(namespaces)
    # The same through $KUBECONFIG and the context named on the line.
    env = _env(KUBECONFIG=str(kubeconfig))
    assert bash_complete("gpubot doctor --context lab ip-10-18-9", env) == NODES[2:]
    assert bash_complete("gpubot doctor --context elsewhere ip-", env) == []


def test_contexts_come_from_the_kubeconfig_file(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    contexts = [{"name": n, "context": {"cluster": "c", "user": "u"}}
                for n in ("prod", "lab", EKS)]
    kubeconfig.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config",
                                          "contexts": contexts}))
    # No server in it answers: the file alone gives the names.
    assert bash_complete(f"gpubot --kubeconfig {kubeconfig} --context ") == sorted(
        ["prod", "lab", EKS])
    assert bash_complete(f"gpubot nodes --kubeconfig {kubeconfig} --context=l") == ["lab"]
    # bash replaces only what follows the last ':' of the word: the rest of the name.
    env = _env(KUBECONFIG=str(kubeconfig))
    assert bash_complete("gpubot --context arn:aws:eks:us-west-2:1", env) == [
        "123456789012:cluster/gpu-prod"]
    assert bash_complete("gpubot pending --context=arn:a", env) == [EKS.split(":", 1)[1]]


def test_a_cluster_that_does_not_answer_completes_nothing_within_the_deadline(
        tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        kubeconfig = tmp_path / "kc"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "down",
            "clusters": [{"name": "down", "cluster": {
                "server": f"http://127.0.0.1:{silent.getsockname()[1]}"}}],
            "users": [{"name": "down", "user": {}}],
            "contexts": [{"name": "down", "context": {"cluster": "down", "user": "down"}}]}))
        for line in (f"gpubot doctor --kubeconfig {kubeconfig} ip-",
                     f"gpubot pending --kubeconfig {kubeconfig} -n "):
            started = time.monotonic()
            assert bash_complete(line) == []
            assert time.monotonic() - started < DEADLINE + 1.5


def test_no_kubeconfig_and_no_snapshot_complete_nothing(tmp_path: Path) -> None:
    env = _env(HOME=str(tmp_path))
    assert bash_complete("gpubot doctor ip-", env) == []
    assert bash_complete("gpubot --context ", env) == []
    assert bash_complete("gpubot doctor --snapshot /no/such/dir ip-", env) == []


# -- zsh and fish ----------------------------------------------------------------------------


def test_zsh_and_fish_scripts_ask_the_same_hook() -> None:
    zsh = script("zsh", build_parser())
    assert "bashcompinit" in zsh and "_gpubot_values" in zsh
    assert 'gpubot __complete "${COMP_LINE:0:COMP_POINT}"' in zsh
    fish = script("fish", build_parser())
    hook = "'(gpubot __complete (commandline -cp) = 2>/dev/null)'"
    assert f"-l context -x -a {hook}" in fish
    assert f"-s n -l namespace -x -a {hook}" in fish
    assert f"complete -c gpubot -n '__fish_seen_subcommand_from doctor' -a {hook}" in fish


def test_fish_gets_an_options_value_without_the_option(tmp_path: Path) -> None:
    """fish puts `--context=` back itself: the hook, told '=' breaks words, prints values."""
    gpubot = shutil.which("gpubot", path=str(Path(sys.executable).parent))
    assert gpubot
    done = subprocess.run([gpubot, "__complete", f"gpubot pending --snapshot {CRASH} "
                           "--namespace=ml", "="], capture_output=True, text=True,
                          timeout=10, env=_env())
    assert (done.returncode, done.stdout, done.stderr) == (0, "ml-team\n", "")


# -- reading the line ------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "what", "typed"), [
    ("gpubot doctor ", "nodes", ""),
    ("gpubot -n ml why-pending tr", "pods", "tr"),
    ("gpubot --context=pr", "contexts", "pr"),
    ("gpubot pending -nml", "namespaces", "ml"),
    ("gpubot quota ", "namespaces", ""),
    ("gpubot quota ml-team ", None, ""),  # NS given: nothing more to complete
    ("gpubot nodes ", None, ""),
    ("gpubot snapshot -o ", None, ""),
    ("gpubot why-pending 'ml-team/tr", "pods", "ml-team/tr"),  # an open quote
])
def test_the_line_says_what_is_completed(line: str, what: str | None, typed: str) -> None:
    read = read_line(build_parser(), split_line(line))
    assert (read.what, read.typed) == (what, typed)


def test_flags_and_subcommands_never_ask_the_cluster() -> None:
    # No snapshot, no kubeconfig: had these asked a cluster they would raise, not be [].
    env = {"HOME": "/nonexistent"}
    for line in ("gpubot ", "gpubot why", "gpubot doctor --", "gpubot -o "):
        assert complete(build_parser(), line, BASH_WORDBREAKS, env) == []


# -- clusters (issue 26) -----------------------------------------------------------------------


def test_clusters_come_from_the_config_and_name_where_values_are_read(tmp_path: Path) -> None:
    frag = ROOT / "examples" / "gpu-fragmentation"
    config = tmp_path / "gpubot.yaml"
    config.write_text(yaml.safe_dump({"clusters": [{"name": "prod", "snapshot": str(CRASH)},
                                                   {"name": "lab", "snapshot": str(frag)}]}))
    assert bash_complete(f"gpubot --config {config} --cluster ") == ["lab", "prod"]
    assert bash_complete(f"gpubot nodes --config {config} -c p") == ["prod"]
    env = _env(GPUBOT_CONFIG=str(config))
    assert bash_complete("gpubot pending --cluster=l", env) == ["lab"]
    # Nodes of the cluster named; none named, the first one's (the CLI's default).
    assert bash_complete("gpubot doctor --cluster prod ip-10-18-9", env) == NODES[2:]
    assert bash_complete("gpubot doctor ip-10-18-9", env) == NODES[2:]
    lab_nodes = bash_complete("gpubot -c lab doctor ", env)
    assert lab_nodes and not set(lab_nodes) & set(NODES)
    # $GPUBOT_CLUSTERS wins over the file, as for the CLI and serve.
    env = _env(GPUBOT_CONFIG=str(config),
               GPUBOT_CLUSTERS=yaml.safe_dump([{"name": "only", "snapshot": str(frag)}]))
    assert bash_complete("gpubot --cluster ", env) == ["only"]
