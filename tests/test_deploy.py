"""The manifests: RBAC grants exactly the reads the bot makes, and nothing else."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.live.kinds import KINDS

BASE = Path(__file__).resolve().parents[1] / "deploy" / "base"
READ = {"get", "list", "watch"}


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((BASE / name).read_text()) if d]


def _grants() -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> verbs, over every Role and ClusterRole."""
    out: dict[tuple[str, str], set[str]] = {}
    for doc in _docs("rbac.yaml"):
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for res in rule["resources"]:
                    out.setdefault((group, res), set()).update(rule["verbs"])
    return out


def test_every_kind_the_bot_reads_is_granted_read() -> None:
    grants = _grants()
    missing = [k.kind for k in KINDS.values()
               if not grants.get((k.group, k.plural), set()) >= READ]
    assert missing == []
    assert grants[("", "pods/log")] == {"get"}


def test_nothing_beyond_reads_and_no_secrets() -> None:
    grants = _grants()
    known = {(k.group, k.plural) for k in KINDS.values()} | {("", "pods/log")}
    assert set(grants) <= known, sorted(set(grants) - known)
    assert all(verbs <= READ for verbs in grants.values())
    assert not any(res == "secrets" or "*" in (grp, res) for grp, res in grants)


def test_configmaps_only_in_the_operator_namespace() -> None:
    cluster_wide = {(g, r) for d in _docs("rbac.yaml") if d["kind"] == "ClusterRole"
                    for rule in d["rules"] for g in rule["apiGroups"]
                    for r in rule["resources"]}
    assert ("", "configmaps") not in cluster_wide


def test_bindings_name_the_bots_service_account() -> None:
    sa = _docs("serviceaccount.yaml")[0]["metadata"]
    for doc in _docs("rbac.yaml"):
        if doc["kind"].endswith("Binding"):
            assert doc["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"],
                                        "namespace": sa["namespace"]}]


def test_pod_runs_unprivileged() -> None:
    pod = _docs("deployment.yaml")[0]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kustomize_builds() -> None:
    out = subprocess.run(["kubectl", "kustomize", str(BASE)], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    kinds = [d["kind"] for d in yaml.safe_load_all(out) if d]
    assert {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
            "RoleBinding", "Deployment", "Service"} <= set(kinds)
