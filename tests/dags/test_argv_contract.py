"""Every command line the DAGs hand the engine parses with the engine's own argparse.

The DAGs render each step's argv from the steps table (synthfactory/contract/steps.py,
ADR 0140), and plan_shards builds the mapped rephrase and validate argv from the options
after its ``--``: a flag the table renders that the engine's parser refuses (an owner
outside the table, a runner's extra options) would fail only when a run reaches that
step. Here every task's arguments are rendered by Airflow
(its templating, and its own resolution of mapped arguments from the plan's XCom) under
each runner, with the default Params and with a non-default set, and all of them are
parsed in one .venv-worker process (tests/dags/engine_argparse.py).
"""

from __future__ import annotations

import copy
import json
import shlex
import subprocess
import tempfile
from types import SimpleNamespace

import pendulum
import pytest

from tests.support.paths import DAGS, ROOT, WORKER_PYTHON

PARSER = ROOT / "tests" / "dags" / "engine_argparse.py"
MODES = {"local": {"SYNTHFACTORY_RUNNER": "local", "SYNTHFACTORY_REPHRASE_MODE": "pods"},
         "kubernetes": {"SYNTHFACTORY_RUNNER": "kubernetes", "SYNTHFACTORY_REPHRASE_MODE": "pods"},
         "kuberay": {"SYNTHFACTORY_RUNNER": "kubernetes", "SYNTHFACTORY_REPHRASE_MODE": "kuberay"}}
SHARD = "file:///data/run/prompts/shard-00000.parquet"
PARAMS = {  # per DAG: (what a trigger must give, a non-default set a user could send)
    "synthetic_rephrase": ({}, {
        "source": "s3://seeds/corpus", "partition_template": "{yyyy}/{mm}/{dd}",
        "output_root": "s3://synth/out", "templates": ["qa", "faq", "tutorial"],
        "text_column": "content", "id_column": "doc_id", "quality_column": "score",
        "min_quality": 0.35,
        # a folder of one's own that check_params can list here: the shipped one
        "templates_url": f"file://{ROOT}/synthfactory/templates",
        "styles_per_doc": 2, "shard_tokens": 16384,
        "spark_master": "k8s://https://kubernetes.default.svc", "spark_partitions": 64,
        "spark_executors": 8, "spark_executor_cores": 4, "spark_executor_memory": "8g",
        "max_new_tokens": 512, "max_model_len": 4096, "temperature": 0.0,
        "checkpoint_rows": 256, "replicas": 4, "max_shard_groups": 3,
        "model": "s3://models/Qwen2.5-7B-Instruct",
        "engine_args": {"max_num_seqs": 64, "enable_prefix_caching": True},
        "catalog_uri": "", "catalog_conn_id": "pg_catalog",
        "warehouse": "s3://synth/warehouse", "table": "synth.wrap_v2", "smoke_steps": 50,
        "include_rejected": True}),
    "engine_sweep": ({"shard": SHARD}, {
        "shard": SHARD, "model": "/models/m", "grid": [{"max_num_seqs": 8}, {"dtype": "half"}],
        "sample_rows": 16, "max_new_tokens": 64, "gpu_hour_usd": 3.2, "safety_margin": 0.25,
        "apply": False, "output_root": "s3://synth/out", "sweep_name": "h200-week48"}),
}
NO_ARGV = {"check_params", "wait_for_capacity"}  # the only tasks that launch no engine argv


class Engine:
    """The .venv-worker process that parses argv: one request line, one answer line."""

    def __init__(self) -> None:
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen([str(WORKER_PYTHON), str(PARSER)], cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr)

    def parse(self, entries: list[dict]) -> dict:
        self.process.stdin.write(json.dumps(entries) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            self.stderr.seek(0)
            raise RuntimeError(f"{PARSER.name} died:\n{self.stderr.read()[-3000:]}")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.stderr.close()


@pytest.fixture(scope="module")
def engine():
    if not WORKER_PYTHON.exists():
        pytest.skip(f"{WORKER_PYTHON} missing: run `make setup`")
    engine = Engine()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def dags() -> dict[str, dict]:
    """{mode: {dag_id: dag}}, both DAG files parsed under each runner."""
    from airflow.dag_processing.dagbag import DagBag

    parsed = {}
    for mode, env in MODES.items():
        with pytest.MonkeyPatch.context() as mp:
            for name, value in env.items():
                mp.setenv(name, value)
            bag = DagBag(dag_folder=str(DAGS))
        assert bag.import_errors == {}, mode
        parsed[mode] = bag.dags
    return parsed


def run_params(dag, conf: dict) -> dict:
    """The run's Params as Airflow resolves a trigger's conf (the schema checks it)."""
    from airflow.sdk import ParamsDict

    params = ParamsDict(copy.deepcopy(dag.params))  # setting a Param sets it in the DAG
    for name, value in conf.items():
        params[name] = value
    return params.validate()


def context(dag, params: dict, plan: list | None = None, map_index: int = -1) -> dict:
    start = pendulum.datetime(2026, 11, 29, tz="UTC")
    ti = SimpleNamespace(dag_id=dag.dag_id, try_number=1, map_index=map_index,
                         xcom_pull=lambda **_: plan)  # plan_shards' XCom: the plan's groups
    return {"dag": dag, "params": params, "ti": ti, "task_instance": ti,
            "run_id": "scheduled__2026-11-29T00:00:00+00:00", "logical_date": start,
            "data_interval_start": start, "data_interval_end": start.add(days=1),
            "ds": start.to_date_string()}


def rendered(task, ctx: dict) -> list[str]:
    task = copy.copy(task)  # rendering replaces the task's fields
    task.render_template_fields(ctx)
    if hasattr(task, "build_manifest"):  # kuberay's wave: the RayJob's entrypoint
        return shlex.split(task.build_manifest(ctx)["spec"]["entrypoint"])[1:]
    return task.arguments


def planned(task, dag, params: dict, plan: list) -> list[tuple[str, list[str]]]:
    """A mapped task's argv per map index, resolved by Airflow from the plan's groups."""
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    argvs = []
    for i in range(len(plan)):
        ctx = context(dag, params, plan, i)
        argv = (task.expand_input.resolve(ctx)[0]["arguments"]
                if isinstance(task, MappedOperator) else task.arguments.resolve(ctx))
        argvs.append((f"{task.task_id}[{i}]", argv))
    return argvs


def step_argvs(dag, conf: dict) -> tuple[dict, list[tuple[str, list[str]]], list]:
    """(params, [(task_id, argv)] of the tasks that need no XCom, the tasks that do)."""
    params = run_params(dag, conf)
    now, later = [], []
    for task in dag.tasks:
        if task.task_id in NO_ARGV:
            continue
        if isinstance(getattr(task, "arguments", None), list):
            now.append((task.task_id, rendered(task, context(dag, params))))
        else:
            later.append(task)
    return params, now, later


def contract_failures(engine: Engine, dag, conf: dict, where: str,
                      edit=lambda task_id, argv: argv) -> tuple[list[str], set[str]]:
    """One line per argv the engine refuses, naming the task; and the task ids checked.
    ``edit`` changes a rendered argv before it is parsed (to prove a failure shows)."""
    params, now, later = step_argvs(dag, conf)
    first = engine.parse([{"task_id": t, "argv": edit(t, a)} for t, a in now])
    plan = first["plans"].get("plan_shards")
    then: list[tuple[str, list[str]]] = []
    for task in later:
        assert plan, f"{task.task_id} needs plan_shards' groups ({where})"
        then += ([(task.task_id, rendered(task, context(dag, params, plan)))]
                 if hasattr(task, "build_manifest") else planned(task, dag, params, plan))
    second = engine.parse([{"task_id": t, "argv": a} for t, a in then]) if then else {}
    errors = {**first["errors"], **second.get("errors", {})}
    lines = [f"{task_id}: {message}   [{where}]"
             for task_id, messages in errors.items() for message in messages]
    return lines, {t.split("[")[0] for t, _ in now + then}


@pytest.mark.parametrize("mode", MODES)
def test_every_argv_parses_with_the_engines_own_argparse(engine, dags, mode):
    from synthfactory_airflow.operators.param_rules import problems

    failures = []
    for dag_id, (required, custom) in PARAMS.items():
        dag = dags[mode][dag_id]
        if dag_id == "synthetic_rephrase":  # a set the run's first task would accept
            assert problems(run_params(dag, custom), custom, dag.params) == []
        for name, conf in (("default", required), ("non-default", custom)):
            lines, checked = contract_failures(
                engine, dag, conf, f"{dag_id}, {mode} runner, {name} Params")
            failures += lines
            assert checked == set(dag.task_ids) - NO_ARGV, "a task's argv went unchecked"
    assert failures == [], "the engine refuses argv the DAGs write:\n" + "\n".join(failures)


@pytest.mark.parametrize(("mode", "flag", "typo", "failing"), [
    ("local", "--shard-tokens", "--shard-tokenz",
     "stitch_prompts: synthfactory stitch: error: unrecognized arguments: --shard-tokenz 8192"),
    # a rephrase option passed on by plan_shards fails in the argv that plan builds
    ("local", "--checkpoint-rows", "--checkpoint-rowz",
     "shard.rephrase[0]: synthfactory rephrase: error: unrecognized arguments: "
     "--checkpoint-rowz 64"),  # the form's default: the table's
    ("kuberay", "--checkpoint-rows", "--checkpoint-rowz",
     "rephrase_wave: synthfactory rephrase: error: unrecognized arguments: "
     "--checkpoint-rowz 64"),  # the form's default: the table's
], ids=["stitch", "through-plan", "kuberay-entrypoint"])
def test_a_misspelled_flag_fails_naming_the_task_and_the_flag(engine, dags, mode, flag, typo,
                                                                failing):
    def misspell(task_id: str, argv: list[str]) -> list[str]:
        return [typo if a == flag else a for a in argv]

    lines, _ = contract_failures(engine, dags[mode]["synthetic_rephrase"], {},
                                 f"synthetic_rephrase, {mode} runner, {flag} misspelled",
                                 misspell)
    print("\n".join(lines))
    assert any(line.startswith(failing) for line in lines), lines


@pytest.mark.parametrize("mode", MODES)
def test_every_rephrase_runs_in_the_window_its_shards_were_cut_for(engine, dags, mode):
    """One window from stitch to the engine: plan reads it from shards.json (the parser's
    run folder records its own window) into every rephrase argv, kuberay's entrypoint's
    too."""
    dag = dags[mode]["synthetic_rephrase"]
    params, now, later = step_argvs(dag, {})
    answer = engine.parse([{"task_id": t, "argv": a} for t, a in now])
    plan, window = answer["plans"]["plan_shards"], answer["window"]
    argvs = []
    for task in later:
        if hasattr(task, "build_manifest"):
            argvs.append(rendered(task, context(dag, params, plan)))
        elif task.task_id.endswith("rephrase"):
            argvs += [argv for _, argv in planned(task, dag, params, plan)]
    assert len(argvs) == (1 if mode == "kuberay" else len(plan)) >= 1
    for argv in argvs:
        assert argv[0] == "rephrase" and argv.count("--max-model-len") == 1, argv
        assert argv[argv.index("--max-model-len") + 1] == str(window), argv


def test_templates_url_reaches_stitch_and_null_means_the_shipped_ones(dags):
    dag = dags["local"]["synthetic_rephrase"]
    stitch = dag.get_task("stitch_prompts")
    for conf, flag in (({}, "--templates-url="),  # the engine reads "" as shipped
                       ({"templates_url": "s3://lab/templates"},
                        "--templates-url=s3://lab/templates")):
        argv = rendered(stitch, context(dag, run_params(dag, conf)))
        assert [a for a in argv if a.startswith("--templates-url")] == [flag]


@pytest.mark.parametrize("mode", ["local", "kubernetes"])
def test_engine_endpoint_reaches_every_rephrase_as_engine_endpoint(engine, dags, mode):
    from synthfactory_airflow.operators.param_rules import problems

    dag = dags[mode]["synthetic_rephrase"]
    conf = {"engine": "endpoint", "endpoint_conn_id": "team_llm"}
    assert problems(run_params(dag, conf), conf, dag.params) == []
    lines, _ = contract_failures(engine, dag, conf, f"engine endpoint, {mode} runner")
    assert lines == []
    for given, engine_flag in ((conf, "endpoint"), ({}, "vllm")):
        _, now, _ = step_argvs(dag, given)
        plan_argv = dict(now)["plan_shards"]
        assert plan_argv[plan_argv.index("--engine") + 1] == engine_flag


def test_the_endpoint_connection_goes_to_rephrase_only_when_the_engine_is_endpoint(dags):
    dag = dags["local"]["synthetic_rephrase"]
    rephrase = dag.get_task("shard.rephrase")
    template = rephrase.endpoint_conn_id  # an operator in a mapped group: fields as given
    env = dag.get_template_env()
    for conf, expected in (({"engine": "endpoint", "endpoint_conn_id": "team_llm"}, "team_llm"),
                           ({"engine": "offline", "endpoint_conn_id": "team_llm"}, ""),
                           ({"engine": "endpoint"}, "")):
        assert env.from_string(template).render(params=run_params(dag, conf)) == expected
    assert not dag.get_task("shard.validate").endpoint_conn_id


def test_engine_args_with_the_endpoint_engine_are_refused_before_the_run(dags):
    from synthfactory_airflow.operators.param_rules import problems

    dag = dags["local"]["synthetic_rephrase"]
    conf = {"engine": "endpoint", "endpoint_conn_id": "llm", "engine_args": {"max_num_seqs": 8}}
    assert problems(run_params(dag, conf), conf, dag.params) == [
        "engine_args={'max_num_seqs': 8}: engine = endpoint takes its engine arguments from "
        "the server; empty engine_args or use engine = vllm"]
