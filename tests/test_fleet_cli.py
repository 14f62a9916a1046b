"""The CLI over several clusters (issue 26): ``--cluster``/``-c`` and ``--all-clusters``,
with the ``clusters`` setting of the config file or ``GPUBOT_CLUSTERS``, through
``bot.cli.main`` against two fake API servers on loopback and a context where nothing
answers (one kubeconfig, a context each).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, main
from tests.fake_kube import FakeKube, write_kubeconfig_many
from tests.fake_slack.harness import ROOT
from tests.test_json_schema import validator

TRAIN = ROOT / "examples/plugin-crashloop-cuda-mismatch"  # ml-team/train-0 pending
LAB = ROOT / "tests/data/fake_kube/cluster"  # ml-team/train-0 too, and ml-team/notebook-1
DOWN = "http://127.0.0.1:9"  # nothing listens there


@dataclass
class Clusters:
    env: dict[str, str]  # GPUBOT_CONFIG: a config file listing train, lab and down
    clusters: list[dict[str, str]]

    def run(self, *argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        try:
            code = main(list(argv), out=out, err=err, environ=self.env if env is None else env)
        except SystemExit as e:  # argparse usage errors
            code = int(e.code or 0)
        return code, out.getvalue(), err.getvalue()

    def json(self, *argv: str) -> dict[str, Any]:
        """The JSON answer, checked against docs/schema/diagnosis.schema.json."""
        code, out, err = self.run(*argv, "-o", "json")
        assert code == EXIT_OK, err
        data: dict[str, Any] = json.loads(out)
        assert [e.message for e in validator().iter_errors(data)] == []
        return data


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    tmp = tmp_path_factory.mktemp("fleet-cli")
    with FakeKube(TRAIN) as train, FakeKube(LAB) as lab:
        kubeconfig = write_kubeconfig_many(tmp / "kubeconfig", {
            "train-ctx": train, "lab-ctx": lab, "down-ctx": DOWN})
        clusters = [{"name": n, "context": f"{n}-ctx", "kubeconfig": str(kubeconfig)}
                    for n in ("train", "lab", "down")]
        config = tmp / "gpubot.yaml"
        config.write_text(yaml.safe_dump({"clusters": clusters}))
        yield Clusters({"GPUBOT_CONFIG": str(config)}, clusters)


def _one(snapshot: Path, command: str) -> dict[str, Any]:
    """``command``'s JSON on one snapshot, read as a single cluster."""
    out, err = io.StringIO(), io.StringIO()
    assert main([command, "--snapshot", str(snapshot), "-o", "json"], out=out, err=err,
                environ={}) == EXIT_OK, err.getvalue()
    data: dict[str, Any] = json.loads(out.getvalue())
    return data


def test_the_same_pod_in_two_clusters_is_ambiguous_until_a_cluster_is_named(
        fleet: Clusters) -> None:
    code, out, err = fleet.run("why-pending", "ml-team/train-0")
    assert code == EXIT_USAGE and out == ""
    assert "exists in clusters train, lab" in err and "-c train or -c lab" in err
    # Named: that cluster's pod, and the JSON says which cluster it read.
    data = fleet.json("why-pending", "ml-team/train-0", "--cluster", "lab")
    assert data["cluster"] == "lab" and data["source"].startswith("cluster lab · ")
    assert data["root_cause"]["code"] == "DRIVER_NOT_READY"  # lab's, not train's
    assert fleet.json("-c", "train", "why-pending", "ml-team/train-0")["root_cause"][
        "code"] == "CUDA_DRIVER_MISMATCH"


def test_a_pod_in_one_cluster_is_found_there_and_the_answer_says_where(
        fleet: Clusters) -> None:
    code, out, _ = fleet.run("why-pending", "ml-team/notebook-1")
    assert code == EXIT_OK
    assert out.splitlines()[0].startswith(
        "gpubot why-pending pod/ml-team/notebook-1  (cluster lab · ")
    assert "not read: cluster down: unreachable" in out
    assert fleet.json("why-pending", "notebook-1", "-n", "ml-team")["cluster"] == "lab"


def test_a_pod_in_no_cluster_names_every_cluster_asked(fleet: Clusters) -> None:
    code, _, err = fleet.run("why-pending", "ml-team/nobody")
    assert code == EXIT_NOT_FOUND
    assert "in any cluster (train, lab, down)" in err
    assert "not read: cluster down: unreachable" in err


def test_a_cluster_down_is_reported_and_the_others_answer(fleet: Clusters) -> None:
    code, _, err = fleet.run("nodes", "--cluster", "down")
    assert code == EXIT_NOT_FOUND and "cluster down is unreachable" in err
    data = fleet.json("nodes")
    assert data["clusters"] == ["train", "lab"]
    assert any(u.startswith("not read: cluster down is unreachable") for u in data["unchecked"])


def test_nodes_without_a_cluster_shows_each_cluster_and_the_total(fleet: Clusters) -> None:
    train, lab = _one(TRAIN, "nodes"), _one(LAB, "nodes")
    for argv in (("nodes",), ("nodes", "--all-clusters")):
        details = fleet.json(*argv)["details"]
        for key in ("nodes", "lost", "free"):
            assert details["totals"][key] == (train["details"]["totals"][key]
                                              + lab["details"]["totals"][key]), key
        per_cluster = {m["product"]: m for m in details["models"]
                       if m["product"].endswith(" (all)")}
        assert per_cluster["train (all)"]["nodes"] == train["details"]["totals"]["nodes"]
        assert per_cluster["lab (all)"]["lost"] == lab["details"]["totals"]["lost"]
        assert {r["node"].split("/")[0] for r in details["rows"]} == {"train", "lab"}


def test_pending_all_clusters_groups_by_cluster(fleet: Clusters) -> None:
    data = fleet.json("pending", "--all-clusters")
    assert data["clusters"] == ["train", "lab"]
    rows = data["details"]["rows"]
    assert [(r["cluster"], r["namespace"], r["workload"]) for r in rows] == [
        ("train", "train/ml-team", "pod/train-0"), ("lab", "lab/ml-team", "pod/train-0")]
    assert {r["code"] for r in rows} == {"CUDA_DRIVER_MISMATCH", "DRIVER_NOT_READY"}
    # One cluster's pending: that cluster's rows only, as a single cluster answers.
    one = fleet.json("pending", "-c", "lab")
    assert one["cluster"] == "lab"
    assert [r["code"] for r in one["details"]["rows"]] == ["DRIVER_NOT_READY"]


def test_unknown_cluster_is_a_usage_error_with_the_closest_name(fleet: Clusters) -> None:
    code, _, err = fleet.run("nodes", "--cluster", "trian")
    assert code == EXIT_USAGE
    assert "no cluster 'trian'; did you mean train?" in err and "train, lab, down" in err


def test_a_command_without_a_target_needs_a_cluster(fleet: Clusters) -> None:
    code, _, err = fleet.run("pending")
    assert code == EXIT_USAGE
    assert "3 clusters (train, lab, down)" in err and "--cluster NAME or --all-clusters" in err
    code, _, err = fleet.run("quota", "--all-clusters")
    assert code == EXIT_USAGE and "--all-clusters is for nodes and pending" in err
    code, _, err = fleet.run("nodes", "--all-clusters", "-c", "lab")
    assert code == EXIT_USAGE and "not both" in err
    code, _, err = fleet.run("digest", "--cluster", "lab")
    assert code == EXIT_USAGE and "digest reads one cluster" in err


def test_clusters_from_the_environment(fleet: Clusters) -> None:
    env = {"GPUBOT_CLUSTERS": yaml.safe_dump(fleet.clusters[:2])}
    code, out, err = fleet.run("why-pending", "ml-team/notebook-1", "-o", "json", env=env)
    assert code == EXIT_OK, err
    assert json.loads(out)["cluster"] == "lab"


def test_cluster_flags_without_clusters_or_with_one_cluster_named(
        fleet: Clusters, tmp_path: Path) -> None:
    code, _, err = fleet.run("nodes", "--cluster", "lab", env={})
    assert code == EXIT_USAGE and "GPUBOT_CLUSTERS" in err and "--config" in err
    code, _, err = fleet.run("nodes", "--cluster", "lab", "--snapshot", str(LAB))
    assert code == EXIT_USAGE and "give one or the other" in err
    # A single cluster named on the line is read as always, whatever the config lists.
    data = fleet.json("nodes", "--snapshot", str(LAB))
    assert "cluster" not in data and "clusters" not in data
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"clusters": [{"name": "Prod!"}]}))
    code, _, err = fleet.run("nodes", "--config", str(bad), env={})
    assert code == EXIT_USAGE and "clusters[0]" in err


def test_config_and_cluster_flags_go_anywhere_on_the_line() -> None:
    from bot.cli import build_parser

    for argv in (["--config", "a.yaml", "-c", "lab", "pending"],
                 ["pending", "--config", "a.yaml", "--cluster=lab"]):
        args = build_parser().parse_args(argv)
        assert (args.config, args.cluster, args.all_clusters) == ("a.yaml", "lab", False)
    # serve's own --config: given before `serve`, it stays.
    assert build_parser().parse_args(["--config", "a.yaml", "serve"]).config == "a.yaml"
    assert build_parser().parse_args(["serve", "--config", "b.yaml"]).config == "b.yaml"
