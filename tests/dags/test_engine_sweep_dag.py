"""engine_sweep: parses under both runners, manual trigger only, its Params refuse bad
input, and its one task runs the documented `synthfactory sweep` argv on the GPU pool."""

from __future__ import annotations

import json

import pytest


def _dag(dagbag_for, runner="local"):
    bag = dagbag_for(runner)
    assert bag.import_errors == {}
    return bag.dags["engine_sweep"]


@pytest.mark.parametrize("runner", ["local", "kubernetes"])
def test_parses_as_a_manual_one_task_dag(dagbag_for, runner):
    dag = _dag(dagbag_for, runner)
    assert dag.task_ids == ["sweep_engine_args"]
    assert type(dag.timetable).__name__ == "NullTimetable"  # schedule=None: manual only
    assert dag.doc_md and "synthfactory-engine.json" in dag.doc_md


def test_kubernetes_runner_puts_the_sweep_on_the_gpu_pool(dagbag_for):
    task = _dag(dagbag_for, "kubernetes").get_task("sweep_engine_args")
    assert task.arguments[0] == "sweep"
    assert task.container_resources.limits["nvidia.com/gpu"] == "1"
    assert task.node_selector == {"synthfactory.io/pool": "gpu"}


def test_params_schema_accepts_both_grid_forms_and_refuses_bad_values(dagbag_for):
    from airflow.sdk import ParamsDict

    dag = _dag(dagbag_for)
    assert all("type" in dag.params.get_param(n).schema for n in dag.params)
    for grid in ([{"max_num_seqs": 8}], {"max_num_seqs": [8, 16]}):
        params = ParamsDict(dag.params)
        params["shard"] = "file:///data/prompts/shard-00000.parquet"
        params["grid"] = grid
        params.validate()
    for name, bad in [("grid", "max_num_seqs=8"), ("grid", []), ("grid", {}),
                      ("safety_margin", 1.0), ("safety_margin", -0.1), ("sample_rows", 0),
                      ("gpu_hour_usd", -1), ("shard", ""), ("sweep_name", "a/b")]:
        params = ParamsDict(dag.params)
        params["shard"] = "file:///data/prompts/shard-00000.parquet"
        with pytest.raises(Exception, match=name):
            params[name] = bad
            params.validate()


def test_the_shard_has_no_default_so_a_trigger_must_name_it(dagbag_for):
    from airflow.sdk import ParamsDict

    with pytest.raises(Exception, match="shard"):
        ParamsDict(_dag(dagbag_for).params).validate()


def test_rendered_argv_is_the_sweep_command(dagbag_for):
    dag = _dag(dagbag_for)
    task = dag.get_task("sweep_engine_args")
    params = {"shard": "s3://bucket/run/prompts/shard-00003.parquet", "model": "/models/m",
              "grid": {"max_num_seqs": [8, 16]}, "sample_rows": 16, "max_new_tokens": 64,
              "gpu_hour_usd": 3.2, "safety_margin": 0.15, "apply": False,
              "output_root": "s3://bucket/out", "sweep_name": "", "engine": "offline",
              "endpoint_conn_id": None}
    env = dag.get_template_env()  # Airflow's own filters (tojson) render the argv
    argv = [env.from_string(a).render(params=params, run_id="manual__2026-11-30T10:00:00+00:00")
            for a in task.arguments]
    assert argv == [
        "sweep", "--shard", params["shard"], "--model", "/models/m",
        "--grid", json.dumps(params["grid"]),
        "--out", "s3://bucket/out/engine_sweep/manual__2026-11-30T100000_0000",
        "--gpu-hour-usd", "3.2", "--sample-rows", "16", "--max-new-tokens", "64",
        "--safety-margin", "0.15", "--no-apply", "--engine", "vllm"]
    named = dict(params, sweep_name="h200-week48", apply=True)
    rendered = [env.from_string(a).render(params=named, run_id="x") for a in task.arguments]
    assert "s3://bucket/out/engine_sweep/h200-week48" in rendered
    assert rendered[-3] == "--apply"
    # a saved conf with the Param's former name (gpu_hour_cost, issue 51) prices the same
    former = {k: v for k, v in params.items() if k != "gpu_hour_usd"} | {
        "gpu_hour_cost": 4.5, "gpu_hour_usd": 2.5}  # the form's default beside it
    rendered = [env.from_string(a).render(params=former, run_id="x") for a in task.arguments]
    assert rendered[rendered.index("--gpu-hour-usd") + 1] == "4.5"


def test_the_endpoint_sweep_gets_its_connection_and_the_endpoint_engine(dagbag_for):
    dag = _dag(dagbag_for)
    task = dag.get_task("sweep_engine_args")
    env = dag.get_template_env()
    conf = {"engine": "endpoint", "endpoint_conn_id": "team_llm", "apply": True}
    assert env.from_string(task.arguments[-1]).render(params=conf) == "endpoint"
    assert env.from_string(task.endpoint_conn_id).render(params=conf) == "team_llm"
    offline = dict(conf, engine="offline")
    assert env.from_string(task.endpoint_conn_id).render(params=offline) == ""
