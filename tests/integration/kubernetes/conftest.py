"""Session fixtures of the kubernetes runner's end-to-end tests (helpers: e2e_support.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.integration.kubernetes.e2e_support import INTERVAL_DAY, AirflowHome
from tests.support.airflow_home import airflow_env, migrate
from tests.support.paths import WORKER


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
