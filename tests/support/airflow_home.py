"""An Airflow home for a test: the environment Airflow reads (this repository's dags/,
no examples; the run report plugin comes from the package's entry point, and the
plugins folder is the home's own, empty: docs/adr/0110) and ``airflow db migrate``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.paths import AIRFLOW, DAGS


def airflow_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment with AIRFLOW_HOME=``home``, plus ``extra``."""
    return {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"), **extra}


def migrate(env: dict[str, str]) -> dict[str, str]:
    """Create the metadata database of ``env``'s AIRFLOW_HOME; returns ``env``."""
    subprocess.run([str(AIRFLOW), "db", "migrate"], check=True, capture_output=True, env=env)
    return env
