from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "dags"


@pytest.fixture
def dagbag_for(monkeypatch):
    """Parse dags/ afresh under the given runner setting."""

    def load(runner: str = "local"):
        from airflow.dag_processing.dagbag import DagBag

        monkeypatch.setenv("SYNTHFACTORY_RUNNER", runner)
        return DagBag(dag_folder=str(DAGS))

    return load
