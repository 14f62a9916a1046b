"""A fake Kubernetes API server for tests: real HTTP on 127.0.0.1, serving any snapshot, that
the official ``kubernetes`` client and ``kubectl`` use unmodified.

    from tests.fake_kube import FakeKube

    with FakeKube("tests/data/fake_kube/cluster", daemonset_delay=0.2) as fk:
        kubeconfig = fk.write_kubeconfig(tmp_path / "kubeconfig")
        api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        ...
        fk.faults.forbid("pods", verb="list", namespace="ml-team")   # faults.py
        fk.requests.find("DELETE", "/api/v1/namespaces/ml-team/pods/x")  # the request log
        fk.store.find("Node", "gpu-node-1")                             # state, as dicts
        fk.store.put({...})              # change state behind the API (watches see it)
        fk.store.set_logs("ns", "pod", "container", "text")

    # several servers at once (a fleet): one kubeconfig, a context per server
    write_kubeconfig_many(tmp_path / "kubeconfig", {"prod": fk1, "lab": fk2})

    # pytest: fixtures made by factories (fixtures.py)
    fake_kube = fake_kube_fixture("tests/data/fake_kube/cluster")
    kube_api = api_client_fixture("fake_kube")

    # a process: writes the kubeconfig, prints "ready http://127.0.0.1:PORT", runs until
    # SIGTERM/SIGINT
    python -m tests.fake_kube --snapshot PATH --kubeconfig-out FILE [--log-requests FILE]

Modules: ``server`` (HTTP, watch streaming, ``FakeKube``), ``store`` (objects, resource
versions, API semantics), ``resources`` (what is served, discovery), ``routing``,
``faults``, ``controllers`` (DaemonSet controller, pod termination), ``tables``
(server-side printing for kubectl), ``events`` (core <-> events.k8s.io), ``defaults``
(always-present fields), ``patch``, ``status`` (error bodies), ``requestlog``, ``seed``.

Known differences from a real apiserver: no TLS, no protobuf, no aggregated discovery
(clients fall back to the legacy documents), no server-side apply (415), strategic merge
patch is a JSON merge patch, a continued list shows the current state after its start
key (not the first page's snapshot), watches of the whole history never see objects as
they were seeded (seeding leaves no history), no admission or validation beyond
names/namespaces/kinds, no controllers besides the DaemonSet one and the kubelet's
finishing of graceful pod deletions.
"""

from .faults import DEFAULT_USER, Fault, Faults
from .fixtures import api_client_fixture, fake_kube_fixture
from .kubeconfig import write_kubeconfig_many
from .requestlog import RequestLog, RequestRecord
from .server import FakeKube
from .status import ApiError
from .store import Store, wait_until

__all__ = [
    "DEFAULT_USER",
    "ApiError",
    "FakeKube",
    "Fault",
    "Faults",
    "RequestLog",
    "RequestRecord",
    "Store",
    "api_client_fixture",
    "fake_kube_fixture",
    "wait_until",
    "write_kubeconfig_many",
]
