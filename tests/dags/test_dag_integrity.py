"""What CI of a DAG package must guarantee: every DAG imports, parses fast, imports no
heavy engine library, and has the shape and knobs the README promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

CHAIN = ["crawl_metadata", "stitch_prompts", "plan_shards", "wait_for_capacity",
         "rephrase_shard", "validate_shard", "register_catalog", "smoke_test_training"]


@pytest.mark.parametrize("runner", ["local", "kubernetes"])
def test_every_dag_imports_without_errors(dagbag_for, runner):
    bag = dagbag_for(runner)
    assert bag.import_errors == {}
    assert "synthetic_rephrase" in bag.dags


def test_parse_is_fast_and_imports_nothing_heavy():
    """Time the DAG files alone, after Airflow's own import, in a clean interpreter."""
    env = {**os.environ, "SYNTHFACTORY_RUNNER": "local"}
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "dag_parse_time.py"), "--json"],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["import_errors"] == {}
    assert result["heavy_modules"] == []
    assert set(result["dag_files_s"]) >= {"synthetic_rephrase.py"}
    for name, seconds in result["first_parse_s"].items():
        assert seconds < 1.0, f"{name} took {seconds:.2f}s to parse"


def test_task_chain_is_the_documented_pipeline(dagbag_for):
    dag = dagbag_for("local").dags["synthetic_rephrase"]
    assert set(dag.task_ids) == set(CHAIN)
    for upstream, downstream in zip(CHAIN, CHAIN[1:], strict=False):
        assert downstream in dag.get_task(upstream).downstream_task_ids, (upstream, downstream)
    # nothing runs before its predecessor: the chain is a topological order
    position = {task_id: i for i, task_id in enumerate(CHAIN)}
    for task in dag.tasks:
        assert all(position[d] > position[task.task_id] for d in task.downstream_task_ids)
    assert dag.catchup is False
    assert dag.doc_md and "rephrase" in dag.doc_md


def test_rephrase_and_validate_are_mapped(dagbag_for):
    dag = dagbag_for("local").dags["synthetic_rephrase"]
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    assert isinstance(dag.get_task("rephrase_shard"), MappedOperator)
    assert isinstance(dag.get_task("validate_shard"), MappedOperator)


def test_every_param_has_a_json_schema_type(dagbag_for):
    dag = dagbag_for("local").dags["synthetic_rephrase"]
    for name in dag.params:
        schema = dag.params.get_param(name).schema
        assert "type" in schema, name


def test_bad_param_values_are_refused_by_the_schema(dagbag_for):
    from airflow.sdk import ParamsDict

    dag = dagbag_for("local").dags["synthetic_rephrase"]
    params = ParamsDict(dag.params)
    params["shard_tokens"] = 2048
    params.validate()
    for name, bad in [("shard_tokens", 10), ("templates", ["poetry"]), ("table", "no_dot"),
                      ("checkpoint_rows", 0), ("templates", [])]:
        broken = ParamsDict(dag.params)
        with pytest.raises(Exception, match=name):
            broken[name] = bad
            broken.validate()
