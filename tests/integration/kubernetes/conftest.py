"""Session fixtures of the kubernetes runner's end-to-end tests (helpers: e2e_support.py):
two real control planes (a CPU and a GPU cluster, scripts/kube-control-plane.sh) with the
project's CRDs and the deploy kit applied, an Airflow home migrated once, a small corpus."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.integration.kubernetes.e2e_support import INTERVAL_DAY, AirflowHome
from tests.support.airflow_home import airflow_env, migrate
from tests.support.kube_control_plane import ControlPlane, require_control_plane
from tests.support.paths import RESULTS, WORKER


@pytest.fixture(scope="session")
def control_planes(tmp_path_factory) -> Iterator[dict[str, ControlPlane]]:
    """A CPU cluster and a GPU cluster, each its own etcd, apiserver, scheduler and
    controller-manager, shared by every test of the session and stopped at its end."""
    require_control_plane()
    base = tmp_path_factory.mktemp("control-planes")
    planes: dict[str, ControlPlane] = {}
    try:
        for name in ("cpu", "gpu"):
            planes[name] = ControlPlane.up(base / name, name)
            planes[name].install_crds()
            planes[name].apply_deploy_kit()
        yield planes
    finally:
        write_service_account_calls(planes)
        for plane in planes.values():
            plane.down()


def write_service_account_calls(planes: dict[str, ControlPlane]) -> None:
    """var/test-results/service-account-calls.md: every (ServiceAccount, verb, resource) the
    session's calls used on either cluster, with the apiserver's answers (from its audit log):
    the measured side of docs/kubernetes-rbac.md."""
    calls: dict[tuple[str, str, str], set[int]] = {}
    for plane in planes.values():
        for key, codes in plane.service_account_calls().items():
            calls.setdefault(key, set()).update(codes)
    if not calls:
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    lines = ["| ServiceAccount | verb | resource | answers |", "|---|---|---|---|"]
    lines += [f"| {user} | {verb} | {resource} | {', '.join(map(str, sorted(codes)))} |"
              for (user, verb, resource), codes in sorted(calls.items())]
    (RESULTS / "service-account-calls.md").write_text("\n".join(lines) + "\n")


@pytest.fixture
def control_plane(control_planes) -> Iterator[ControlPlane]:
    """The CPU cluster, emptied of the test's pods and Services afterwards."""
    yield control_planes["cpu"]
    for plane in control_planes.values():
        plane.clear_namespace()


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory) -> Iterator[AirflowHome]:
    home = tmp_path_factory.mktemp("airflow-k8s")
    migrate(airflow_env(home))
    yield AirflowHome(home)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> str:
    """Ten seed documents on the data interval's day."""
    out = tmp_path_factory.mktemp("corpus")
    subprocess.run([str(WORKER), "corpus", "--out", f"file://{out}", "--days", "2",
                    "--docs-per-day", "10", "--end-date", INTERVAL_DAY],
                   check=True, capture_output=True)
    return f"file://{out}"
