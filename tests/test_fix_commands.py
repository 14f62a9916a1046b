"""Every fix of every scenario is one on-call can run as printed (issue 25 item 1).

Each scenario runs through its command, as tests/test_scenarios.py runs it. Every command of
every finding's fix must split as a shell splits it, name a program a fix may run, and, for
kubectl, a subcommand and flags its own ``--help`` lists (helm: the table taken from its
source); a ``kubectl patch`` payload must fit the kind it patches. Every patch must be YAML
that fits the schema of its kind at its path. Prose stays in the summary. The checks are in
tests/fixcheck.py; the negative tests below show that each of them can fail.
"""

from __future__ import annotations

import re

import pytest

from handlers.model import Diagnosis, Fix, Patch
from tests.fixcheck import check_line, check_patch
from tests.real_binaries import kubectl
from tests.scenarios import Scenario, load_scenarios
from tests.test_scenarios import run_scenario

SCENARIOS = load_scenarios()
_COMMAND_IN_PROSE = re.compile(r"\b(kubectl|helm|oc) [a-z]")


def _fixes(d: Diagnosis) -> list[tuple[str, Fix]]:
    out = [(f.code, f.fix) for f in d.findings]
    if d.root_cause is not None:
        out.append((f"root {d.root_cause.code}", d.root_cause.fix))
    return out


@pytest.fixture(scope="module", autouse=True)
def _kubectl() -> None:
    kubectl()  # skip (fail in CI) without the kubectl whose --help the checks read


@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_every_command_and_patch_of_a_scenario_runs_as_printed(s: Scenario) -> None:
    problems: list[str] = []
    d = run_scenario(s)
    for change in d.fits_if:  # fits_if's changes: prose, and commands as lines
        problems += [f"fits_if {change.change}: {p}" for c in change.commands
                     for p in check_line(c)]
        if _COMMAND_IN_PROSE.search(change.summary):
            problems.append(f"fits_if {change.change}: a command in the summary: "
                            f"{change.summary!r}")
    for code, fix in _fixes(d):
        problems += [f"{code}: {p}" for c in fix.commands for p in check_line(c)]
        if fix.patch is not None:
            problems += [f"{code}: {p}" for p in check_patch(fix.patch)]
        if _COMMAND_IN_PROSE.search(fix.summary):
            problems.append(f"{code}: a command in the summary: {fix.summary!r}")
        if "the patch" in fix.summary and fix.patch is None:
            problems.append(f"{code}: the summary speaks of a patch it does not carry")
        problems += [f"{code}: doc {u!r} is not a URL" for u in fix.docs
                     if not u.startswith(("https://", "http://"))]
    assert not problems


def test_the_scenarios_fixes_carry_commands_and_patches() -> None:
    """The corpus exercises the checks: most problems come with commands, and patches of
    built-in kinds and CRDs alike are among them."""
    fixes = [fix for s in SCENARIOS for _, fix in _fixes(run_scenario(s)) if fix]
    with_commands = [f for f in fixes if f.commands]
    kinds = {f.patch.kind for f in fixes if f.patch is not None}
    assert len(with_commands) > len(fixes) * 0.7
    assert {"Deployment", "Pod", "DaemonSet", "RuntimeClass", "ClusterQueue"} <= kinds
    assert any(c.startswith("helm ") for f in fixes for c in f.commands)
    assert any(" patch clusterpolicy " in c for f in fixes for c in f.commands)


@pytest.mark.parametrize(("line", "why"), [
    ("kubectl get pods --no-such-flag", "unknown flag --no-such-flag"),
    ("kubectl -n ml logs train-0 --previus", "unknown flag --previus"),
    ("kubectl rollout undoo deployment/train", "not one of its subcommands"),
    ("kubectl restart pod train-0", "no subcommand kubectl knows"),
    ("kubectl -n ml delete pod <pod>", "placeholder"),
    ("kubectl logs 'train-0", "does not parse"),
    ("sudo systemctl restart containerd", "not a program"),
    ("kubectl get pods | xargs kubectl delete pod", "not a program"),
    ("helm upgrade nvdp nvidia-device-plugin --reuse-value", "unknown flag --reuse-value"),
    ("oc adm policy add-scc-to-user privileged --user sa", "unknown flag --user"),
    # The ClusterPolicy's GFD switch is spec.gfd.enabled (the old fix text said "enable").
    ("kubectl patch clusterpolicy cluster-policy --type merge "
     "-p '{\"spec\":{\"gfd\":{\"enable\":true}}}'", "spec.gfd.enable: no such field"),
    ("kubectl -n cv patch deployment seg --type json "
     "-p '[{\"op\":\"add\",\"path\":\"/spec/template/spec/toleration/-\",\"value\":{}}]'",
     "no field at spec.template.spec.toleration"),
    ("kubectl -n cv patch deployment seg --type merge -p '{not json}'", "not JSON"),
])
def test_a_bad_command_is_caught(line: str, why: str) -> None:
    problems = check_line(line)
    assert any(why in p for p in problems), problems


@pytest.mark.parametrize(("patch", "why"), [
    (Patch("Deployment", "seg", "spec.template.spec.tolerations",
           [{"key": "nvidia.com/gpu", "operatr": "Exists"}], "cv"), "operatr: no such field"),
    (Patch("Deployment", "seg", "spec.template.spec.tolerationz", [{"key": "a"}], "cv"),
     "no field at spec.template.spec.tolerationz"),
    (Patch("Pod", "p", "spec", {"priorityClassName": 7}, "ml"), "the schema wants"),
    (Patch("RuntimeClass", "nvidia", "", {"apiVersion": "node.k8s.io/v1",
                                          "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
                                          "handlr": "nvidia"}), "handlr: no such field"),
    (Patch("RuntimeClass", "nvidia", "", {"handler": "nvidia"}), "needs kind RuntimeClass"),
    (Patch("ClusterQueue", "cq", "spec.resourceGroups[0].flavors[0].resources[0]",
           {"nominalQuotaa": "8"}), "nominalQuotaa: no such field"),
    (Patch("ClusterPolicy", "cluster-policy", "spec.daemonsets.tolerations",
           {"key": "a"}), "a mapping where the schema has"),
    (Patch("Widget", "w", "spec", {}), "no schema known"),
])
def test_a_bad_patch_is_caught(patch: Patch, why: str) -> None:
    problems = check_patch(patch)
    assert any(why in p for p in problems), problems


def test_good_commands_and_patches_pass() -> None:
    """The checks are not blanket refusals: lines and patches as fixes write them pass."""
    for line in ["kubectl -n ml logs train-0 -c main --previous",
                 "kubectl debug node/gpu-1 -it --image=ubuntu -- chroot /host sh -c "
                 "'dmesg | grep -i xid'",
                 "kubectl -n gpu-operator delete pod -l app=nvidia-device-plugin-daemonset "
                 "--field-selector spec.nodeName=gpu-1",
                 "kubectl get resourceslices -o yaml | grep -A12 'driver: gpu.nvidia.com'",
                 "helm upgrade -i nvdp nvdp/nvidia-device-plugin --namespace nvidia-device-plugin"
                 " --create-namespace --version 0.17.1"]:
        assert check_line(line) == [], line
    assert check_patch(Patch("ClusterPolicy", "cluster-policy", "spec.daemonsets.tolerations",
                             [{"key": "dedicated", "operator": "Exists"}])) == []
    assert check_patch(Patch("Pod", "p", "spec.containers",
                             [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                             "ml")) == []
