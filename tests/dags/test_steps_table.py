"""The steps table (synthfactory/contract/steps.py) reaches every Param, and stays the one
declaration: a trigger's non-default value for each Param shows in the argv Airflow
renders for the flag that takes it; docs/steps.md is what the table generates; lineage
reads its folders from the table; check_params and the engine run the same rules.

Breaks that make these fail: dropping a Flag's ``param`` (or a DAG passing a flag by hand
with a literal value) fails the first test naming the Param; a DAG Param the table does
not name fails it too (its value is in no argv); editing a flag's help without
regenerating docs/steps.md fails the docs test.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from synthfactory.contract import steps
from tests.dags.test_argv_contract import context, rendered, run_params
from tests.support.paths import ROOT

# Per DAG: a non-default value for every Param, and how it shows in the argv (None: as
# str(value)). A Param the DAG gains without an entry here fails the test.
NON_DEFAULT = {
    "synthetic_rephrase": {
        "source": ("s3://seeds/corpus-x", None),
        "partition_template": ("{yyyy}/{mm}/{dd}", None),
        "output_root": ("s3://synth/out-x", None),
        "text_column": ("content_x", None), "id_column": ("doc_x", None),
        "quality_column": ("score_x", None), "min_quality": (0.35, "0.35"),
        "templates": (["qa", "faq"], "qa,faq"),
        "templates_url": ("s3://lab/templates", None),
        "routing": (True, "on"), "domain_column": ("domain_x", None),
        "styles_per_doc": (3, "3"), "shard_tokens": (16384, "16384"),
        "spark_master": ("k8s://https://kubernetes.default.svc", None),
        "spark_partitions": (64, "64"), "spark_executors": (7, "7"),
        "spark_executor_cores": (5, "5"), "spark_executor_memory": ("9g", None),
        "max_new_tokens": (512, "512"), "max_model_len": (4096, "4096"),
        "temperature": (0.15, "0.15"), "checkpoint_rows": (256, "256"),
        "repair": ("none", "none"), "max_attempts": (5, "5"),
        "replay": (False, "off"), "replay_from": ("s3://elsewhere/synthetic_rephrase", None),
        "benchmarks": ("s3://evals/benchmarks", None), "decontaminate_n": (11, "11"),
        "benchmark_columns": ("question,answer", None),
        "write_card": (False, None), "license": ("cc-by-4.0", None),
        "export_url": ("s3://exports/rephrased", None), "hub_repo_id": ("team/synth", None),
        "hub_conn_id": ("hf_team", None),
        "replicas": (4, "4"), "max_shard_groups": (11, "11"),
        "model": ("s3://models/Qwen2.5-7B-Instruct", None),
        "engine_args": ({"max_num_seqs": 64}, json.dumps({"max_num_seqs": 64})),
        "engine": ("endpoint", None),
        "endpoint_conn_id": ("team_llm", None),
        "catalog_uri": ("sqlite:////tmp/other-catalog.db", None),
        "catalog_conn_id": ("pg_catalog", None),
        "warehouse": ("s3://synth/warehouse-x", None),
        "include_rejected": (True, "true"), "table": ("synth.wrap_v2", None),
        "smoke_steps": (50, "50"),
    },
    "engine_sweep": {
        "shard": ("s3://b/run/prompts/shard-00003.parquet", None),
        "model": ("/models/m", None),
        "grid": ([{"max_num_seqs": 8}], json.dumps([{"max_num_seqs": 8}])),
        "sample_rows": (17, "17"), "max_new_tokens": (65, "65"),
        "gpu_hour_usd": (3.2, "3.2"), "safety_margin": (0.25, "0.25"),
        "apply": (False, None), "output_root": ("s3://synth/out-y", None),
        "engine": ("endpoint", None), "endpoint_conn_id": ("team_llm", None),
        "sweep_name": ("h200-week48", None),
    },
}
REQUIRED = {"engine_sweep": {"shard": "s3://b/run/prompts/shard-00000.parquet"}}
# Params a DAG folds into a run folder it hands every step (fixed in argv, not a flag)
IN_FOLDER = {"output_root", "sweep_name"}
# Params that switch a task on or off (operators/param_switch.py), not a flag: the task
SWITCHES = {"write_card": "write_card"}


@pytest.fixture(scope="module")
def dags():
    from airflow.dag_processing.dagbag import DagBag

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYNTHFACTORY_RUNNER", "local")
        bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    return bag.dags


def _argvs(dag, conf: dict) -> list[list[str]]:
    """Every task's rendered argv (plan's holds the options it passes to rephrase)."""
    params = run_params(dag, {**REQUIRED.get(dag.dag_id, {}), **conf})
    return [rendered(task, context(dag, params)) for task in dag.tasks
            if isinstance(getattr(task, "arguments", None), list)]


def _shows(argv: list[str], flag: steps.Flag, text: str) -> bool:
    if flag.action == "boolean":
        return (flag.name if text == "True" else "--no-" + flag.name[2:]) in argv
    pairs = zip(argv, argv[1:], strict=False)
    return f"{flag.name}={text}" in argv or (flag.name, text) in pairs


def _switched_off(task, name: str, value) -> bool:
    """The task's pre_execute hook skips it at ``value`` and lets it run at the default."""
    from airflow.sdk.exceptions import AirflowSkipException

    hook = task._pre_execute_hook
    try:
        hook({"params": {name: value}})
    except AirflowSkipException:
        hook({"params": {name: not value}})  # raises too: not a switch of this Param
        return True
    return False


def _missing(dag, values: dict) -> list[str]:
    """The Params of ``values`` whose value shows in no rendered argv, each triggered
    alone; a connection Param must show in none (it travels as environment)."""
    flags: dict[str, list[steps.Flag]] = {}
    for step in steps.STEPS.values():
        for flag in step.flags:
            if flag.param:
                flags.setdefault(flag.param, []).append(flag)
    missing = []
    for name, (value, text) in values.items():
        default = getattr(dag.params.get_param(name), "value", None)
        assert default != value, f"{name}: {value!r} is its default"
        text = text if text is not None else str(value)
        argvs = _argvs(dag, {name: value})
        if name in steps.ENVIRONMENT_PARAMS:
            if any(text in item for argv in argvs for item in argv):
                missing.append(f"{name}={value!r} (a connection, on argv)")
            continue
        if name in SWITCHES:
            found = _switched_off(dag.get_task(SWITCHES[name]), name, value)
        elif name in IN_FOLDER:
            found = any(text in item for argv in argvs for item in argv)
        else:
            found = any(_shows(argv, flag, text) for argv in argvs for flag in flags.get(name, []))
        if not found:
            missing.append(f"{name}={value!r}")
    return missing


@pytest.mark.parametrize("dag_id", NON_DEFAULT)
def test_every_params_non_default_value_reaches_the_flag_that_takes_it(dags, dag_id):
    dag = dags[dag_id]
    assert set(NON_DEFAULT[dag_id]) == set(dag.params), "a Param without a value here"
    assert _missing(dag, NON_DEFAULT[dag_id]) == [], dag_id


# A Param's default that differs from the default of a flag it feeds, on purpose: (dag,
# Param, flag) -> why. Anything else must agree (the DAG reads the table's default), so a
# trigger with the form's defaults runs the step as its command line does.
DIFFERENT_DEFAULTS = {
    # the form's budget is per row (auto); stitch's command line keeps its fixed 256, and
    # the sweep measures a fixed budget (its own Param, 128)
    ("synthetic_rephrase", "stitch", "--max-new-tokens"): "auto, per row, in the form",
    ("engine_sweep", "stitch", "--max-new-tokens"): "the sweep's own Param",
    ("engine_sweep", "rephrase", "--max-new-tokens"): "the sweep's own Param",
    ("synthetic_rephrase", "sweep", "--max-new-tokens"): "the run's budget, auto",
    # the form starts a new user on one style; the command line's empty list is every
    # shipped template (or, with --routing on, every template the table names)
    ("synthetic_rephrase", "stitch", "--templates"): "one style to start with",
}


def _flag_text(flag: steps.Flag, value) -> str:
    """A Param value as the flag reads it (a list comma-joined, a switch on/off)."""
    if isinstance(value, bool) and flag.choices == ("on", "off"):
        return "on" if value else "off"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def _different_defaults(dags) -> list[str]:
    found = []
    for dag_id, dag in sorted(dags.items()):
        for step in steps.STEPS.values():
            for flag in step.flags:
                if not flag.param or flag.param not in dag.params or flag.default is None:
                    continue
                default = dag.params.get_param(flag.param).value
                key = (dag_id, step.name, flag.name)
                if _flag_text(flag, default) != str(flag.default) and key not in \
                        DIFFERENT_DEFAULTS:
                    found.append(f"{dag_id} Param {flag.param}={default!r}, "
                                 f"{step.name} {flag.name} {flag.default!r}")
    return found


def test_a_params_default_is_the_default_of_the_flag_it_feeds(dags):
    """Seen failing: checkpoint_rows was 16 in the form and 64 on the command line."""
    assert _different_defaults(dags) == []


def _probes(schema: dict) -> list:
    """Numbers at and around a Param's bounds, and at the flag types' own edges."""
    edges = [-1, 0, 0.5, 1, 2, 8192, 8193]
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if key in schema:
            edges += [schema[key] - 1, schema[key], schema[key] + 1]
    return sorted(set(edges))


def _looser_bounds(dags) -> list[str]:
    """A Param value the form accepts and the flag it feeds refuses: the run would start
    and fail at that step, minutes later, instead of at the form."""
    from airflow.sdk.definitions.param import Param

    found = []
    for dag_id, dag in sorted(dags.items()):
        for step in steps.STEPS.values():
            for flag in step.flags:
                if not flag.param or flag.param not in dag.params or flag.type is None:
                    continue
                schema = dag.params.get_param(flag.param).schema
                kinds = schema.get("type")
                kinds = kinds if isinstance(kinds, list) else [kinds]
                if not {"integer", "number"} & set(kinds):
                    continue
                for value in _probes(schema):
                    if "number" not in kinds and not float(value).is_integer():
                        continue
                    value = int(value) if float(value).is_integer() else value
                    try:
                        Param(value, **schema).resolve()
                    except Exception:  # noqa: BLE001  the form refuses it: fine
                        continue
                    try:
                        flag.type(_flag_text(flag, value))
                    except Exception as exc:  # noqa: BLE001  argparse's type error
                        found.append(f"{dag_id} Param {flag.param}={value!r} is accepted; "
                                     f"{step.name} {flag.name} refuses it ({exc})")
    return found


def test_a_param_accepts_no_value_its_flag_refuses(dags):
    """Seen failing with smoke_steps' minimum 1 made 0: smoke's --steps refuses 0."""
    assert _looser_bounds(dags) == []


def test_the_check_sees_a_param_the_table_loses(monkeypatch):
    """The break: smoke's --steps no longer takes smoke_steps (a literal 10 instead), the
    DAG parsed again: the Param's value reaches no argv, and the check says so."""
    import dataclasses

    from airflow.dag_processing.dagbag import DagBag

    smoke = steps.STEPS["smoke"]
    lost = tuple(dataclasses.replace(f, param=None, value="10") if f.name == "--steps" else f
                 for f in smoke.flags)
    monkeypatch.setitem(steps.STEPS, "smoke", dataclasses.replace(smoke, flags=lost))
    monkeypatch.setenv("SYNTHFACTORY_RUNNER", "local")
    dag = DagBag(dag_folder=str(ROOT / "dags")).dags["synthetic_rephrase"]
    values = NON_DEFAULT["synthetic_rephrase"]
    assert _missing(dag, {"smoke_steps": values["smoke_steps"]}) == ["smoke_steps=50"]


def test_docs_steps_md_is_what_the_table_generates():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "steps_doc.py"), "--check"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_params_and_stitch_share_the_rule_functions():
    from synthfactory_airflow.operators import param_rules

    params = {"shard_tokens": 2048, "max_model_len": 4096, "templates": ["qa"],
              "styles_per_doc": 1, "min_quality": None}
    found = param_rules.problems(params, {}, params)
    assert found == ["shard_tokens=2048: below max_model_len=4096; one prompt plus its "
                     "output would not fit in a shard"]
    cli = steps.problems(["stitch"], params, steps.cli_name("stitch", params))
    assert cli == ["--shard-tokens 2048: below --max-model-len 4096; one prompt plus its "
                   "output would not fit in a shard"]


# Each step's run-folder datasets as lineage named them before the table (the old
# operators/lineage.py FOLDERS), written out here so a wrong table entry fails.
LINEAGE = {
    "stitch": (["manifest"], ["prompts"]),
    "plan": (["prompts"], []),
    "rephrase": (["prompts"], ["generated"]),
    "validate": (["prompts", "generated"], ["verdicts", "rejected"]),
    "join": (["prompts", "generated", "verdicts"], ["joined"]),
    "register": (["joined"], []),
    "audit": (["manifest", "prompts", "generated", "verdicts", "joined"], []),
    "smoke": (["joined"], []),
    "report": (["manifest", "prompts", "generated", "verdicts"], ["report"]),
}


def test_lineage_reads_each_steps_datasets_from_the_table():
    """The datasets of each step's argv, pinned (break: a step's reads or writes changed
    in the table), an old spelling of the run flag (rephrase --out, smoke --from-run), the
    run found from --shard when no run flag is given, crawl's and the table's flags."""
    from synthfactory_airflow.operators.lineage import step_datasets

    run = "s3://b/synthetic_rephrase/2026-11-29"
    folder = "synthetic_rephrase/2026-11-29"
    for name, (reads, writes) in LINEAGE.items():
        inputs, outputs = step_datasets([name, "--run", run])
        assert ([d.name for d in inputs], [d.name for d in outputs]) == (
            [f"{folder}/{p}" for p in reads], [f"{folder}/{p}" for p in writes]), name
    for argv in (["rephrase", "--out", run], ["smoke", "--from-run", run],
                 ["rephrase", "--shard", f"{run}/prompts/shard-00000.parquet"]):
        inputs, outputs = step_datasets(argv)
        assert [d.name for d in inputs] == [f"{folder}/prompts"] or argv[0] == "smoke"
        assert [d.name for d in inputs + outputs], argv
    inputs, outputs = step_datasets(["crawl", "--source", "s3://seeds/c", "--out",
                                     f"{run}/manifest"])
    assert ([d.name for d in inputs], [d.name for d in outputs]) == (["c"], [f"{folder}/manifest"])
    _, outputs = step_datasets(["register", "--run", run, "--table", "synth.wrap",
                                "--catalog", "lab"])
    assert (outputs[-1].namespace, outputs[-1].name) == ("iceberg://lab", "synth.wrap")
    inputs, _ = step_datasets(["audit", "--run", run, "--table=synth.wrap"])
    assert (inputs[-1].namespace, inputs[-1].name) == ("iceberg://synthfactory", "synth.wrap")
    # the card and the export name what they write; validate its benchmarks folder
    _, outputs = step_datasets(["card", "--run", run])
    assert [d.name for d in outputs] == [f"{folder}/card/README.md"]
    _, outputs = step_datasets(["export", "--run", run, "--out", "s3://exports/day"])
    assert [(d.namespace, d.name) for d in outputs] == [("s3://exports", "day")]
    inputs, _ = step_datasets(["validate", "--shard", f"{run}/prompts/shard-00000.parquet",
                               "--benchmarks=s3://evals/bench"])
    assert ("s3://evals", "bench") in [(d.namespace, d.name) for d in inputs]
