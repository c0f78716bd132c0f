"""write_report ends every synthetic_rephrase run, failed ones too, and the report view
finds the run folder the DAG wrote (plugins/run_report/dag_runs.py mirrors RUN)."""

from __future__ import annotations

import datetime as dt

import pytest


@pytest.mark.parametrize("runner", ["local", "kubernetes"])
def test_write_report_is_a_teardown_after_everything(dagbag_for, runner):
    dag = dagbag_for(runner).dags["synthetic_rephrase"]
    task = dag.get_task("write_report")
    assert task.is_teardown and not task.on_failure_fail_dagrun  # a failed run stays failed
    assert task.trigger_rule == "all_done_setup_success"  # no setups: runs once all are done
    assert task.downstream_task_ids == set()
    for last in ("write_card", "export_dataset"):  # the tasks after the smoke test
        assert dag.get_task(last).downstream_task_ids == {"write_report"}
    # every other task is upstream of it, so it runs last
    upstream = task.get_flat_relative_ids(upstream=True)
    assert upstream == set(dag.task_ids) - {"write_report"}
    argv = list(task.arguments)
    assert argv[:2] == ["report", "--run"]
    assert argv[2] == dag.get_task("register_catalog").arguments[2]  # the same run folder


def test_report_view_resolves_the_run_folder_the_dag_writes(dagbag_for):
    from synthfactory_airflow.plugins.run_report.dag_runs import folder

    dag = dagbag_for("local").dags["synthetic_rephrase"]
    run_template = dag.get_task("write_report").arguments[2]
    start = dt.datetime(2026, 3, 4, tzinfo=dt.UTC)
    render = dag.get_template_env().from_string(run_template).render
    for root in ("file:///srv/data", "s3://bucket/prefix"):
        rendered = render(params={"output_root": root}, data_interval_start=start)
        assert rendered == folder(root, start) == f"{root}/synthetic_rephrase/2026-03-04"
        # a run without a logical date has no data interval: same folder name both sides
        assert render(params={"output_root": root}, data_interval_start=None) == folder(root, None)
