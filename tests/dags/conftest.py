from __future__ import annotations

import pytest

from tests.support.paths import DAGS


@pytest.fixture
def dagbag_for(monkeypatch):
    """Parse dags/ afresh under the given runner setting."""

    def load(runner: str = "local"):
        from airflow.dag_processing.dagbag import DagBag

        monkeypatch.setenv("SYNTHFACTORY_RUNNER", runner)
        return DagBag(dag_folder=str(DAGS))

    return load
