"""Session fixtures of the kubernetes runner's end-to-end tests (helpers: e2e_support.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.integration.kubernetes.e2e_support import (
    AIRFLOW,
    INTERVAL_DAY,
    ROOT,
    WORKER,
    AirflowHome,
)


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory) -> Iterator[AirflowHome]:
    home = tmp_path_factory.mktemp("airflow-k8s")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags")}
    subprocess.run([str(AIRFLOW), "db", "migrate"], check=True, capture_output=True, env=env)
    yield AirflowHome(home)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> str:
    """Ten seed documents on the data interval's day."""
    out = tmp_path_factory.mktemp("corpus")
    subprocess.run([str(WORKER), "corpus", "--out", f"file://{out}", "--days", "2",
                    "--docs-per-day", "10", "--end-date", INTERVAL_DAY],
                   check=True, capture_output=True)
    return f"file://{out}"
