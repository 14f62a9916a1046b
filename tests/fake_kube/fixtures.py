"""pytest fixtures for the fake API server, made by factories so each test module (or
``tests/conftest.py``) names them as it likes, without import-shadowing lint:

    from tests.fake_kube.fixtures import api_client_fixture, fake_kube_fixture

    fake_kube = fake_kube_fixture("tests/data/fake_kube/cluster", daemonset_delay=0.2)
    kube_api = api_client_fixture("fake_kube")      # a kubernetes.client.ApiClient

    def test_x(fake_kube, kube_api): ...

    # another snapshot or options for one test: indirect parametrisation
    @pytest.mark.parametrize("fake_kube", [{"snapshot": "x/", "token": "t"}], indirect=True)

Every server is stopped (and every client closed) when its test ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from .server import FakeKube

Scope = Literal["session", "package", "module", "class", "function"]


def fake_kube_fixture(snapshot: str | Path | None = None, *, scope: Scope = "function",
                      **options: Any) -> Callable[..., Any]:
    """A fixture yielding a started ``FakeKube(snapshot, **options)``. An indirect param
    (a snapshot path, or a dict of FakeKube arguments with an optional ``snapshot``)
    overrides the defaults."""

    @pytest.fixture(scope=scope)
    def fixture(request: pytest.FixtureRequest) -> Iterator[FakeKube]:
        params = dict(options)
        snap = snapshot
        param = getattr(request, "param", None)
        if isinstance(param, (str, Path)):
            snap = param
        elif isinstance(param, dict):
            params.update(param)
            snap = params.pop("snapshot", snap)
        with FakeKube(snap, **params) as fake:
            yield fake

    return fixture


def connect(fake: FakeKube, directory: Path, name: str = "kubeconfig") -> Any:
    """A ``kubernetes.client.ApiClient`` for ``fake``, through a kubeconfig it writes."""
    from kubernetes import config

    path = fake.write_kubeconfig(directory / name)
    return config.new_client_from_config(config_file=str(path))  # type: ignore[no-untyped-call]


def api_client_fixture(fake_fixture: str = "fake_kube") -> Callable[..., Any]:
    """A fixture yielding an ApiClient for the FakeKube fixture named ``fake_fixture``."""

    @pytest.fixture
    def fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
        fake: FakeKube = request.getfixturevalue(fake_fixture)
        client = connect(fake, tmp_path)
        try:
            yield client
        finally:
            client.close()

    return fixture
