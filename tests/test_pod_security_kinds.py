"""Each admission mechanism that refuses GPU operator pods gets its own fix."""

import pytest

from bot.snapshot import load_snapshot
from tests.scenarios import load_scenarios
from tests.test_scenarios import run_on

SCENARIOS = {s.name: s for s in load_scenarios()}


@pytest.mark.parametrize("scenario,mechanism,fix_says", [
    ("doctor_pod_security_blocks_operator", "Pod Security admission",
     "pod-security.kubernetes.io/enforce=privileged"),
    ("doctor_psp_blocks_operator_driver", "PodSecurityPolicy",
     "--resource=podsecuritypolicies.policy"),
    ("doctor_scc_blocks_operator_nfd", "OpenShift SecurityContextConstraints",
     "oc adm policy add-scc-to-user privileged -z node-feature-discovery -n gpu-operator"),
])
def test_refusal_names_its_mechanism_and_fix(scenario: str, mechanism: str,
                                              fix_says: str) -> None:
    s = SCENARIOS[scenario]
    diag = run_on(s, load_snapshot(s.snapshot))
    found = [f for f in diag.findings if f.code == "POD_SECURITY_BLOCKS_OPERATOR"]
    assert len(found) == 1
    assert found[0].summary.startswith(mechanism)
    said = "\n".join(found[0].fix.commands)
    assert fix_says in said
    others = {"Pod Security admission": "enforce=privileged", "PodSecurityPolicy":
              "podsecuritypolicies", "OpenShift SecurityContextConstraints": "add-scc-to-user"}
    assert not [m for m, text in others.items() if m != mechanism and text in said]
