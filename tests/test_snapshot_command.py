"""`gpubot snapshot`: what it writes is what a diagnosis needs. A command run on the snapshot
gives the findings it gives on the live cluster (the fake API server, read by the real
kubernetes client over HTTP), plain and anonymized; a kind the cluster refuses is listed as
not captured and reads as "not checked"; anonymized files carry none of the names, env
values, Secret references or annotations; bad -o paths are refused before anything is read.
"""

from __future__ import annotations

import copy
import io
import json
import re
import tarfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.live import open_live_view
from bot.snapshot import load_snapshot
from bot.snapshot.view import MUST_BE_CAPTURED
from handlers.model import Diagnosis
from tests.fake_kube import FakeKube
from tests.scenarios import Scenario, load_scenarios
from tests.test_scenarios import run_on

SCENARIOS = {s.name: s for s in load_scenarios()}
# why-pending on a rollout, quota, Kueue, DRA; doctor with logs, a time-slicing config
# (a ConfigMap of the GPU stack), a node named by its EC2 hostname.
CASES = ["plugin-rollout-bad-tag", "quota-exceeded-deployment",
         "kueue-jobset-exceeds-max-capacity", "dra-no-device-matches-selector",
         "example_plugin-crashloop-why-pending", "doctor_timeslicing_invalid",
         "doctor-vfio-passthrough-container-plugin",
         "eks-116-beta-instance-type-plugin-no-runtime"]


def snapshot(kubeconfig: Path, out: Path, *args: str) -> tuple[int, str]:
    err = io.StringIO()
    code = main(["snapshot", "--kubeconfig", str(kubeconfig), "-o", str(out), *args],
                out=io.StringIO(), err=err)
    return code, err.getvalue()


def mapped(names: dict[str, str], text: str) -> str:
    """``text`` with each name of ``names`` replaced, as the anonymizer maps them."""
    return "/".join(names.get(part, part) for part in text.split("/"))


def as_mapped(s: Scenario, names: dict[str, str]) -> Scenario:
    given = {k: mapped(names, v) if isinstance(v, str) else v for k, v in s.given.items()}
    return replace(s, given=given)


def codes(d: Diagnosis) -> list[str]:
    return [f.code for f in d.findings]


def objects(d: Diagnosis, names: dict[str, str] | None = None) -> list[list[str]]:
    return [[mapped(names or {}, str(o)) for o in f.objects] for f in d.findings]


@pytest.mark.parametrize("name", CASES)
def test_the_snapshot_diagnoses_as_the_live_cluster(name: str, tmp_path: Path) -> None:
    s = SCENARIOS[name]
    with FakeKube(s.snapshot) as fk:
        kubeconfig = fk.write_kubeconfig(tmp_path / "kubeconfig")
        live = run_on(s, open_live_view(str(kubeconfig), timeout=5))
        code, err = snapshot(kubeconfig, tmp_path / "plain")
        assert code == 0, err
        code, err = snapshot(kubeconfig, tmp_path / "anon.tgz", "--anonymize",
                             "--mapping", str(tmp_path / "names.json"))
        assert code == 0, err
    plain = run_on(s, load_snapshot(tmp_path / "plain"))
    assert codes(plain) == codes(live)
    assert objects(plain) == objects(live)
    names = json.loads((tmp_path / "names.json").read_text())
    anon = run_on(as_mapped(s, names), load_snapshot(tmp_path / "anon.tgz"))
    assert codes(anon) == codes(live)
    assert objects(anon) == objects(live, names)


def test_a_namespace_snapshot_diagnoses_its_pods(tmp_path: Path) -> None:
    s = SCENARIOS["quota-exceeded-deployment"]
    assert s.namespace
    with FakeKube(s.snapshot) as fk:
        kubeconfig = fk.write_kubeconfig(tmp_path / "kubeconfig")
        live = run_on(s, open_live_view(str(kubeconfig), timeout=5))
        code, err = snapshot(kubeconfig, tmp_path / "ns", "-n", s.namespace)
        assert code == 0, err
    snap = load_snapshot(tmp_path / "ns")
    assert codes(run_on(s, snap)) == codes(live)
    assert snap.manifest is not None and snap.manifest.namespaces == (s.namespace,)
    assert {p["metadata"]["namespace"] for p in snap.list("ResourceQuota")} <= {s.namespace}


def test_a_refused_kind_is_listed_as_not_captured(tmp_path: Path) -> None:
    s = SCENARIOS["quota-exceeded-deployment"]
    with FakeKube(s.snapshot) as fk:
        fk.faults.forbid("resourcequotas", verb="list")
        kubeconfig = fk.write_kubeconfig(tmp_path / "kubeconfig")
        live = run_on(s, open_live_view(str(kubeconfig), timeout=5))
        code, err = snapshot(kubeconfig, tmp_path / "snap")
    assert code == 0, err
    assert re.search(r"not captured: ([^;]*; )*[^;(]*ResourceQuota[^;(]*\(forbidden\)", err)
    manifest = (tmp_path / "snap" / "gpubot-snapshot.yaml").read_text()
    assert "kind: ResourceQuota" in manifest and "resourcequotas.json" not in {
        p.name for p in (tmp_path / "snap").iterdir()}
    got = run_on(s, load_snapshot(tmp_path / "snap"))
    assert codes(got) == codes(live)
    assert any("ResourceQuota" in u and "not captured" in u for u in got.unchecked)
    assert any("resourcequotas" in u for u in live.unchecked)


def test_kinds_that_must_be_captured_are_written_even_when_empty(tmp_path: Path) -> None:
    s = SCENARIOS["dra-all-devices-allocated"]  # no quota, LimitRange, PriorityClass
    with FakeKube(s.snapshot) as fk:
        hidden = set(fk.uncaptured)  # served as 403, as RBAC would
        code, err = snapshot(fk.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "snap")
    assert code == 0, err
    snap = load_snapshot(tmp_path / "snap")
    served = [k for k, plural in MUST_BE_CAPTURED.items() if plural not in hidden]
    assert served and set(served) <= snap.kinds
    # None in this cluster, and the snapshot says so rather than "not captured".
    assert [k for k in served if snap.list(k) == []]
    assert snap.manifest is not None and snap.manifest.captured_at == snap.now()


# -- anonymizing ------------------------------------------------------------------------------

SECRET_POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "alice-train-7f9c", "namespace": "team-alice",
                 "labels": {"app": "alice-train"},
                 "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}",
                                 "owner": "alice@example.com",
                                 "gpubot.io/gpu-family": "ampere"}},
    "spec": {"nodeName": "", "serviceAccountName": "alice-runner",
             "imagePullSecrets": [{"name": "regcred"}],
             "containers": [{
                 "name": "main", "image": "registry.example.com/team-alice/train:1",
                 "args": ["--api-token=s3cr3t", "--password", "hunter2", "--epochs=3"],
                 "env": [{"name": "DB_PASSWORD", "value": "hunter2"},
                         {"name": "NCCL_DEBUG", "value": "INFO"},
                         {"name": "TOKEN", "valueFrom": {"secretKeyRef": {
                             "name": "alice-secret", "key": "token"}}}],
                 "envFrom": [{"secretRef": {"name": "alice-env"}}],
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
             "volumes": [{"name": "creds", "secret": {"secretName": "alice-creds"}}]},
    "status": {"phase": "Pending", "podIP": "10.1.2.3"},
}


def test_anonymized_files_carry_no_names_env_values_secrets_or_annotations(
        tmp_path: Path) -> None:
    s = SCENARIOS["plugin-rollout-bad-tag"]
    with FakeKube(s.snapshot) as fk:
        fk.store.put({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "team-alice"}})
        fk.store.put(copy.deepcopy(SECRET_POD))
        nodes = [n["metadata"] for n in fk.store.all("Node")]
        code, err = snapshot(fk.write_kubeconfig(tmp_path / "kubeconfig"),
                             tmp_path / "anon.tgz", "--anonymize",
                             "--mapping", str(tmp_path / "names.json"))
    assert code == 0, err
    with tarfile.open(tmp_path / "anon.tgz") as tar:
        text = "\n".join(tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                         for m in tar.getmembers() if m.isfile())
    names = json.loads((tmp_path / "names.json").read_text())
    secrets = ["team-alice", "alice-train-7f9c", "alice-runner", "alice@example.com",
               "hunter2", "s3cr3t", "regcred", "alice-secret", "alice-env", "alice-creds",
               "last-applied-configuration", "10.1.2.3", "127.0.0.1:"]
    secrets += [n["name"] for n in nodes]
    assert [x for x in secrets if x in text] == []
    # One name, one pseudonym, everywhere it stands.
    ns, pod = names["team-alice"], names["alice-train-7f9c"]
    assert f'"name":"{pod}","namespace":"{ns}"' in text
    assert f"registry.example.com/{ns}/train:1" in text
    assert '"gpubot.io/gpu-family":"ampere"' in text  # what diagnoses read stays
    assert '{"name":"NCCL_DEBUG","value":"INFO"}' in text and '"DB_PASSWORD"' in text
    assert '"--api-token=REDACTED","--password","REDACTED","--epochs=3"' in text
    assert all(names[n["name"]] in text for n in nodes)
    assert "anonymized: true" in text and "127.0.0.1" not in text


# -- -o ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("out", "message"), [
    ("taken", "not empty"),
    ("file.txt", "a snapshot is a directory or a .tgz"),
    ("snap.json", "a snapshot is a directory or a .tgz"),
    ("missing/snap.tgz", "no directory"),
    ("old.tgz", "already exists"),
    ("-", "give a directory or a FILE.tgz"),
])
def test_bad_output_paths_are_refused_before_reading(out: str, message: str,
                                                     tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "pods.json").write_text("{}")
    (tmp_path / "old.tgz").write_bytes(b"")
    (tmp_path / "file.txt").write_text("x")
    target = out if out == "-" else str(tmp_path / out)
    err = io.StringIO()
    # No cluster behind this kubeconfig: -o is checked first.
    code = main(["snapshot", "--kubeconfig", str(tmp_path / "none"), "-o", target],
                out=io.StringIO(), err=err)
    assert code == 2 and message in err.getvalue(), err.getvalue()


def test_usage_errors(tmp_path: Path) -> None:
    for args, message in [
        (["-n", "a", "-A"], "not both"),
        (["--mapping", "m.json"], "--mapping goes with --anonymize"),
        (["--anonymize", "--mapping", str(tmp_path / "o" / "m.json")], "keep it out"),
    ]:
        err = io.StringIO()
        code = main(["snapshot", "-o", str(tmp_path / "o"), *args], out=io.StringIO(),
                    err=err)
        assert code == 2 and message in err.getvalue(), (args, err.getvalue())


def test_an_unreachable_cluster_writes_nothing(tmp_path: Path) -> None:
    with FakeKube(SCENARIOS["plugin-rollout-bad-tag"].snapshot) as fk:
        kubeconfig = fk.write_kubeconfig(tmp_path / "kubeconfig")
    code, err = snapshot(kubeconfig, tmp_path / "snap.tgz", "--timeout", "2s")
    assert code == 1 and "snap.tgz" not in {p.name for p in tmp_path.iterdir()}, err


def test_a_snapshot_can_be_anonymized_from_a_snapshot(tmp_path: Path) -> None:
    s = SCENARIOS["example_plugin-crashloop-why-pending"]
    err = io.StringIO()
    code = main(["snapshot", "--snapshot", str(s.snapshot), "--anonymize", "--mapping",
                 str(tmp_path / "names.json"), "-o", str(tmp_path / "anon")],
                out=io.StringIO(), err=err)
    assert code == 0, err.getvalue()
    names = json.loads((tmp_path / "names.json").read_text())
    got = run_on(as_mapped(s, names), load_snapshot(tmp_path / "anon"))
    assert codes(got) == codes(run_on(s, load_snapshot(s.snapshot)))


def test_a_tar_is_read_in_memory_and_its_links_skipped(tmp_path: Path) -> None:
    pods = b'{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"p",' \
           b'"namespace":"ns"},"spec":{"containers":[]}}]}'
    archive = tmp_path / "odd.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("../../escape/pods.json", "snap/.hidden.json"):
            info = tarfile.TarInfo(name)
            info.size = len(pods)
            tar.addfile(info, io.BytesIO(pods))
        link = tarfile.TarInfo("snap/etc-passwd.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    view = load_snapshot(archive)
    assert [p["metadata"]["name"] for p in view.list("Pod")] == ["p"]
    assert view.files == [str(archive / "escape" / "pods.json")]
    assert not (tmp_path.parent / "escape").exists()


def test_refused_logs_are_listed_as_not_captured(tmp_path: Path) -> None:
    s = SCENARIOS["example_plugin-crashloop-why-pending"]
    with FakeKube(s.snapshot) as fk:
        fk.faults.forbid("pods/log")
        kubeconfig = fk.write_kubeconfig(tmp_path / "kubeconfig")
        live = run_on(s, open_live_view(str(kubeconfig), timeout=5))
        code, err = snapshot(kubeconfig, tmp_path / "snap")
    assert code == 0, err
    assert "pods/log in namespace" in err
    snap = load_snapshot(tmp_path / "snap")
    assert not (tmp_path / "snap" / "logs.txt").exists()
    got = run_on(s, snap)
    assert codes(got) == codes(live)
    assert any("pods/log" in u and "not captured" in u for u in got.unchecked)
