"""What CI of a DAG package must guarantee: every DAG imports, parses fast, imports no
heavy engine library, and has the shape and knobs the README promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

CHAIN = ["check_params", "crawl_metadata", "stitch_prompts", "plan_shards",
         "wait_for_capacity", "shard.rephrase", "shard.validate", "join_chunks",
         "register_catalog", "audit_run", "smoke_test_training", "write_card",
         "export_dataset", "write_report"]
# side by side after the smoke test, each run when its Param asks (docs/export.md)
SIDE_BY_SIDE = {("write_card", "export_dataset")}
# SYNTHFACTORY_REPHRASE_MODE=kuberay: one RayJob over every shard group, then validate[i]
KUBERAY_CHAIN = [*CHAIN[:5], "rephrase_wave", "validate", *CHAIN[7:]]


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


@pytest.mark.parametrize(("runner", "mode", "chain"), [
    ("local", "pods", CHAIN), ("kubernetes", "pods", CHAIN),
    ("kubernetes", "kuberay", KUBERAY_CHAIN)])
def test_task_chain_is_the_documented_pipeline(dagbag_for, monkeypatch, runner, mode, chain):
    monkeypatch.setenv("SYNTHFACTORY_REPHRASE_MODE", mode)
    dag = dagbag_for(runner).dags["synthetic_rephrase"]
    assert set(dag.task_ids) == set(chain)
    for upstream, downstream in zip(chain, chain[1:], strict=False):
        if (upstream, downstream) in SIDE_BY_SIDE:
            continue
        assert downstream in dag.get_task(upstream).downstream_task_ids, (upstream, downstream)
    assert dag.get_task("smoke_test_training").downstream_task_ids == {"write_card",
                                                                        "export_dataset"}
    # nothing runs before its predecessor: the chain is a topological order
    position = {task_id: i for i, task_id in enumerate(chain)}
    for task in dag.tasks:
        assert all(position[d] > position[task.task_id] for d in task.downstream_task_ids)
    assert dag.catchup is False


@pytest.mark.parametrize(("runner", "mode"), [
    ("local", "pods"), ("kubernetes", "pods"), ("kubernetes", "kuberay")])
def test_doc_md_names_every_task_of_the_dag(dagbag_for, monkeypatch, runner, mode):
    """The DAG's doc (the UI's Docs panel) names each task the run shows, as `task_id`,
    under every runner: a task added or renamed without its doc fails here. The ids come
    from the parsed DAG, not from a list here. Seen failing: rephrase_wave renamed in
    operators/runners/kuberay.py while doc_md still says `rephrase_wave`."""
    monkeypatch.setenv("SYNTHFACTORY_REPHRASE_MODE", mode)
    dag = dagbag_for(runner).dags["synthetic_rephrase"]
    missing = [task_id for task_id in dag.task_ids if f"`{task_id}`" not in (dag.doc_md or "")]
    assert missing == [], f"doc_md of synthetic_rephrase does not name {missing}"


@pytest.mark.parametrize("runner", ["local", "kubernetes"])
def test_rephrase_and_validate_are_one_mapped_group_per_shard_group(dagbag_for, runner):
    """validate[i] waits for rephrase[i] only, not for the whole wave: both sit in one
    task group mapped over the plan, so Airflow pairs them by map index."""
    from airflow.sdk.definitions.taskgroup import MappedTaskGroup

    dag = dagbag_for(runner).dags["synthetic_rephrase"]
    group = dag.task_group_dict["shard"]
    assert isinstance(group, MappedTaskGroup)
    assert group.get_child_by_label("rephrase").task_id == "shard.rephrase"
    assert dag.get_task("shard.validate").upstream_task_ids == {"shard.rephrase", "plan_shards"}
    for task_id in ("shard.rephrase", "shard.validate"):
        assert dag.get_task(task_id).get_closest_mapped_task_group() is group
    # the group is mapped over plan_shards' XCom, one entry per shard group
    (upstream,) = {op.task_id for op, _ in group._expand_input.iter_references()}
    assert upstream == "plan_shards"


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
    # an unknown template id passes the schema (a templates_url folder has its own):
    # check_params refuses it (test_trigger_form.py); one that is no file name does not
    for name, bad in [("shard_tokens", 10), ("templates", ["po,etry"]), ("table", "no_dot"),
                      ("checkpoint_rows", 0), ("templates", []),
                      ("templates_url", "var/templates")]:
        broken = ParamsDict(dag.params)
        with pytest.raises(Exception, match=name):
            broken[name] = bad
            broken.validate()
