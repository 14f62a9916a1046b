"""The manifests: RBAC grants exactly the reads the bot makes and, only in the actions and
ha components, the few writes their features need; every overlay renders and validates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.live.kinds import KINDS
from tests.real_binaries import kubectl, require

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
BASE = DEPLOY / "base"
COMPONENTS = DEPLOY / "components"
OVERLAYS = sorted(p.name for p in (DEPLOY / "overlays").iterdir() if p.is_dir())
READ = {"get", "list", "watch"}
# The only writes gpubot may make, and the component that grants each.
WRITES = {
    "actions": {("", "pods", "delete"), ("", "nodes", "patch"), ("", "events", "create"),
                ("events.k8s.io", "events", "create")},
    "kubernetes-store": {("", "configmaps", v) for v in ("create", "update", "patch", "delete")}
    | {("coordination.k8s.io", "leases", v) for v in ("create", "update")},
}


def _rules(path: Path) -> list[tuple[str, str, set[str], str]]:
    """(apiGroup, resource, verbs, role kind) of every rule in a manifest file."""
    out = []
    for doc in yaml.safe_load_all(path.read_text()):
        if isinstance(doc, dict) and doc.get("kind") in ("Role", "ClusterRole"):
            for rule in doc["rules"]:
                for group in rule["apiGroups"]:
                    for res in rule["resources"]:
                        out.append((group, res, set(rule["verbs"]), doc["kind"]))
    return out


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


def test_no_wildcards_no_secrets_and_writes_only_where_a_feature_needs_them() -> None:
    files = sorted(DEPLOY.rglob("*.yaml"))
    seen_writes: dict[str, set[tuple[str, str, str]]] = {}
    for path in files:
        part = path.relative_to(DEPLOY).parts
        for group, res, verbs, _ in _rules(path):
            assert "*" not in (group, res) and "*" not in verbs, path
            assert res.split("/")[0] != "secrets", path
            writes = {(group, res, v) for v in verbs - READ}
            if not writes:
                continue
            owner = part[1] if part[0] == "components" else part[0]
            assert owner in WRITES, f"{path}: writes {sorted(writes)} outside actions/ha"
            seen_writes.setdefault(owner, set()).update(writes)
    assert seen_writes == WRITES


def test_ha_and_actions_use_the_kubernetes_store() -> None:
    for name in ("actions", "ha"):
        kust = yaml.safe_load((COMPONENTS / name / "kustomization.yaml").read_text())
        assert "../kubernetes-store" in kust["components"]
    store = yaml.safe_load((COMPONENTS / "kubernetes-store" / "kustomization.yaml").read_text())
    assert "GPUBOT_STORE=kubernetes" in store["configMapGenerator"][0]["literals"]


def test_the_sentinel_lease_is_created_read_and_renewed_in_the_bots_namespace_only() -> None:
    from bot.sentinel.lease import NAME

    docs = list(yaml.safe_load_all((COMPONENTS / "kubernetes-store" / "rbac.yaml").read_text()))
    leases = [(d["kind"], d["metadata"]["namespace"], rule) for d in docs
              for rule in d.get("rules") or [] if "leases" in rule["resources"]]
    assert leases == [
        ("Role", "gpubot", {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                            "verbs": ["create"]}),
        ("Role", "gpubot", {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                            "resourceNames": [NAME], "verbs": ["get", "update"]})]


def _render(target: Path) -> list[dict[str, Any]]:
    out = subprocess.run([kubectl(), "kustomize", str(target)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_kustomize_builds() -> None:
    kinds = [d["kind"] for d in _render(BASE)]
    assert {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
            "RoleBinding", "Deployment", "Service", "ConfigMap", "PodDisruptionBudget",
            "NetworkPolicy"} <= set(kinds)


def test_overlays_are_the_documented_ones() -> None:
    assert OVERLAYS == ["actions", "ha", "http-mode", "monitoring", "socket-mode"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_renders_and_validates_for_kubernetes_1_30(overlay: str) -> None:
    docs = _render(DEPLOY / "overlays" / overlay)
    validator = Path(sys.executable).with_name("kubernetes-validate")
    if not validator.exists():
        validator = Path(require("kubernetes-validate", hint="pip install -e .[dev]")[0])
    builtin = [d for d in docs if d["kind"] not in ("ServiceMonitor", "PrometheusRule")]
    res = subprocess.run([str(validator), "-k", "1.30.0", "--strict", "-"],
                         input=yaml.safe_dump_all(builtin), capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    settings = next(d for d in docs if d["kind"] == "ConfigMap"
                    and d["metadata"]["name"].startswith("gpubot-settings"))["data"]
    refs = [e["configMapRef"]["name"] for c in deploy["spec"]["template"]["spec"]["containers"]
            for e in c["envFrom"] if "configMapRef" in e]
    assert refs == [next(d for d in docs if d["kind"] == "ConfigMap")["metadata"]["name"]]
    mode = {"http-mode": "http"}.get(overlay, "socket")
    assert settings["GPUBOT_SLACK_MODE"] == mode
    replicas = deploy["spec"]["replicas"]
    assert replicas == (2 if overlay == "ha" else 1)
    if replicas > 1 or overlay == "actions":
        assert settings["GPUBOT_STORE"] == "kubernetes"
    else:
        assert "GPUBOT_STORE" not in settings  # SQLite, the default
    pdb = next(d for d in docs if d["kind"] == "PodDisruptionBudget")["spec"]
    assert pdb.get("minAvailable", 0) < replicas  # a drain can always evict one


def test_probes_resources_and_a_read_only_root() -> None:
    pod = _docs("deployment.yaml")[0]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsUser"] != 0
