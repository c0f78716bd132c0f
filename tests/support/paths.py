"""The repository's folders and the programs of its two environments (docs/adr/0001)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "dags"
PLUGINS = ROOT / "plugins"
# .venv-worker: every `synthfactory` subcommand
WORKER_BIN = ROOT / ".venv-worker" / "bin"
WORKER = WORKER_BIN / "synthfactory"
WORKER_PYTHON = WORKER_BIN / "python"
MOTO_SERVER = WORKER_BIN / "moto_server"
# .venv: Airflow
AIRFLOW_BIN = ROOT / ".venv" / "bin"
AIRFLOW = AIRFLOW_BIN / "airflow"
AIRFLOW_PYTHON = AIRFLOW_BIN / "python"
MODEL = ROOT / "var" / "models" / "SmolLM2-135M-Instruct"  # `make setup` prepares it
# var/ is ignored: test artifacts and figures go here, never into tracked folders
RESULTS = ROOT / "var" / "test-results"
