"""What parsing the DAG files costs every task: each task process parses its DAG file
before it runs (2,048 times in a run of 1,024 shard groups: benchmarks/orchestration.py,
docs/scale.md). The Kubernetes client (every API model, ~1 s of CPU) is imported on first
use only, never when the local runner's DAG is parsed (the kubernetes runner's steps are
the provider's pod operator, which needs it); and the orchestration dry-run setting puts
the echo engine on the rephrase argv only when it is set."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import DAGS, ROOT


def test_parsing_the_dags_imports_no_kubernetes_client(monkeypatch):
    code = ("import sys; from airflow.dag_processing.dagbag import DagBag; "
            f"b = DagBag(dag_folder={str(DAGS)!r}); "
            "assert not b.import_errors, b.import_errors; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))")
    monkeypatch.setenv("SYNTHFACTORY_RUNNER", "local")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_dry_run_setting_puts_the_echo_engine_last_on_the_rephrase_options(monkeypatch):
    from synthfactory_airflow.operators.settings import Settings

    monkeypatch.delenv("SYNTHFACTORY_DRY_RUN_ECHO_DELAY_S", raising=False)
    assert Settings().dry_run_rephrase_options() == []
    monkeypatch.setenv("SYNTHFACTORY_DRY_RUN_ECHO_DELAY_S", "2.5")
    assert Settings().dry_run_rephrase_options() == ["--engine", "echo", "--echo-delay-s", "2.5"]
    monkeypatch.setenv("SYNTHFACTORY_DRY_RUN_ECHO_DELAY_S", "soon")
    with pytest.raises(ValueError, match="SYNTHFACTORY_DRY_RUN_ECHO_DELAY_S"):
        Settings()


def test_plan_arguments_end_with_the_dry_run_options(dagbag_for, monkeypatch):
    monkeypatch.setenv("SYNTHFACTORY_DRY_RUN_ECHO_DELAY_S", "3")
    plan = dagbag_for("local").dags["synthetic_rephrase"].get_task("plan_shards")
    assert plan.arguments[-4:] == ["--engine", "echo", "--echo-delay-s", "3"]
    monkeypatch.delenv("SYNTHFACTORY_DRY_RUN_ECHO_DELAY_S")
    plan = dagbag_for("local").dags["synthetic_rephrase"].get_task("plan_shards")
    assert "echo" not in plan.arguments
