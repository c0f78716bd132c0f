"""OpenLineage of the steps (operators/lineage.py): what a lineage tool shows for each
task, asked the way the provider's listener asks (its ExtractorManager), for the DAG's
own rendered argv under both runners; the run facet from a step's summary or from the
run folder; no secret in an event; and nothing breaks without the provider."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap

import pendulum
import pytest

from synthfactory_airflow.operators.lineage import FACET_NAME, StepLineageMixin
from tests.support.events import OutletEvents
from tests.support.paths import AIRFLOW_PYTHON, DAGS, ROOT

RUN = "s3://lake/out/synthetic_rephrase/2026-11-29"
SHARD = f"{RUN}/prompts/shard-00001.parquet"
PASSWORD = "pw-canary-51f0"


def _extract(task, state: str = "running"):
    """What the provider's listener gets from ``task`` when its task instance is
    running (START), succeeded (COMPLETE) or failed (FAIL): its own extractor choice."""
    from airflow.providers.openlineage.extractors.manager import ExtractorManager

    manager = ExtractorManager()
    assert manager.get_extractor_class(task).__name__ == "DefaultExtractor"
    extractor = manager._get_extractor(task)
    return {"running": extractor.extract,
            "success": lambda: extractor.extract_on_complete(None),
            "failed": lambda: extractor.extract_on_failure(None)}[state]()


def _names(datasets) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]


def _event_json(lineage) -> str:
    """The lineage in an event, as the client serializes it for a transport."""
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.serde import Serde

    return Serde.to_json(RunEvent(
        eventType=RunState.COMPLETE, eventTime="2026-11-30T00:00:00+00:00",
        run=Run(runId="01931f4a-0000-7000-8000-000000000000", facets=lineage.run_facets),
        job=Job(namespace="test", name="synthetic_rephrase.task"),
        inputs=lineage.inputs, outputs=lineage.outputs))


def _local(task_id: str, argv: list[str], worker="/nonexistent/synthfactory", **kwargs):
    from synthfactory_airflow.operators.local import LocalStepOperator

    return LocalStepOperator(task_id=task_id, arguments=argv, worker_bin=str(worker), **kwargs)


def _pod(task_id: str, argv: list[str]):
    from synthfactory_airflow.operators.kubernetes import SynthfactoryPodOperator

    return SynthfactoryPodOperator(task_id=task_id, arguments=argv, image="worker:test",
                                   cmds=["synthfactory"])


# -- the datasets of each step -------------------------------------------------------------

@pytest.fixture(scope="module")
def dag_argvs():
    """{runner: {task_id: rendered argv}} of synthetic_rephrase, default Params plus an
    S3 source and output root; the mapped shard tasks get the argv plan_shards builds."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk import ParamsDict

    out = {}
    for runner in ("local", "kubernetes"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SYNTHFACTORY_RUNNER", runner)
            mp.setenv("SYNTHFACTORY_REPHRASE_MODE", "pods")
            bag = DagBag(dag_folder=str(DAGS))
        assert bag.import_errors == {}
        dag = bag.dags["synthetic_rephrase"]
        params = ParamsDict(copy.deepcopy(dag.params))
        params["source"], params["output_root"] = "s3://seeds/corpus", "s3://lake/out"
        start = pendulum.datetime(2026, 11, 29, tz="UTC")
        context = {"dag": dag, "params": params.validate(), "run_id": "manual__1",
                   "data_interval_start": start, "data_interval_end": start.add(days=1),
                   "ds": start.to_date_string(), "logical_date": start}
        argvs, tasks = {}, {}
        for task in dag.tasks:
            if isinstance(getattr(task, "arguments", None), list):
                task = copy.copy(task)
                task.render_template_fields(dict(context))
                argvs[task.task_id], tasks[task.task_id] = task.arguments, task
        argvs["shard.rephrase"] = ["rephrase", "--shard", SHARD, "--run", RUN, "--model", "m"]
        argvs["shard.validate"] = ["validate", "--shard", SHARD, "--run", RUN]
        out[runner] = (argvs, tasks)
    return out


@pytest.mark.parametrize("runner", ["local", "kubernetes"])
def test_every_step_of_the_dag_names_what_it_reads_and_writes(dag_argvs, runner):
    argvs, tasks = dag_argvs[runner]
    step = type(tasks["crawl_metadata"])
    assert issubclass(step, StepLineageMixin)  # both runners' operators: one mixin
    seen = {}
    for task_id, argv in argvs.items():
        task = copy.copy(tasks.get(task_id, tasks["crawl_metadata"]))
        task.arguments = argv
        lineage = _extract(task)
        seen[task_id] = (_names(lineage.inputs), _names(lineage.outputs))
    folder = "out/synthetic_rephrase/2026-11-29"
    lake = "s3://lake"
    assert seen["crawl_metadata"] == ([("s3://seeds", "corpus")], [(lake, f"{folder}/manifest")])
    assert seen["stitch_prompts"] == ([(lake, f"{folder}/manifest")],
                                      [(lake, f"{folder}/prompts")])
    assert seen["shard.rephrase"] == ([(lake, f"{folder}/prompts")],
                                      [(lake, f"{folder}/generated")])
    assert seen["shard.validate"] == (
        [(lake, f"{folder}/prompts"), (lake, f"{folder}/generated")],
        [(lake, f"{folder}/verdicts"), (lake, f"{folder}/rejected")])
    assert seen["join_chunks"] == (
        [(lake, f"{folder}/prompts"), (lake, f"{folder}/generated"),
         (lake, f"{folder}/verdicts")], [(lake, f"{folder}/joined")])
    assert seen["register_catalog"] == (
        [(lake, f"{folder}/joined")], [("iceberg://synthfactory", "synthetic.rephrased")])
    assert ("iceberg://synthfactory", "synthetic.rephrased") in seen["audit_run"][0]
    assert seen["write_report"][1] == [(lake, f"{folder}/report")]
    # every step of the DAG gives lineage: a new step must be added to operators/lineage.py
    assert {t for t, (ins, outs) in seen.items() if not ins and not outs} == set()


def test_file_urls_name_the_path_in_the_file_namespace():
    task = _local("crawl_metadata", ["crawl", "--source", "file:///data/corpus/", "--out",
                                     "file:///data/run/manifest", "--interval-start", "x"])
    lineage = _extract(task)
    assert _names(lineage.inputs) == [("file", "/data/corpus")]
    assert _names(lineage.outputs) == [("file", "/data/run/manifest")]


@pytest.mark.parametrize("flag", [["--templates-url", "s3://prompts/lab/v3"],
                                  ["--templates-url=s3://prompts/lab/v3"]])
def test_your_own_templates_folder_is_an_input_of_stitch(flag):
    base = ["stitch", "--manifest", f"{RUN}/manifest", "--run", RUN]
    lineage = _extract(_local("stitch_prompts", base + flag))
    assert _names(lineage.inputs) == [("s3://prompts", "lab/v3"),
                                      ("s3://lake", "out/synthetic_rephrase/2026-11-29/manifest")]
    # the DAG's empty default (the shipped templates) names no folder
    shipped = _extract(_local("stitch_prompts", base + ["--templates-url="]))
    assert len(shipped.inputs) == 1


FOLDER = "out/synthetic_rephrase/2026-11-29"


@pytest.mark.parametrize(("task_id", "argv", "expected"), [
    # the shard's run is elsewhere: only --out can name this run folder
    ("shard.rephrase", ["rephrase", "--shard", "s3://other/run/prompts/shard-00001.parquet",
                        "--out", RUN, "--model", "m"],
     ([("s3://lake", f"{FOLDER}/prompts")], [("s3://lake", f"{FOLDER}/generated")])),
    ("stitch_prompts", ["stitch", "--manifest", f"{RUN}/manifest", "--out", RUN],
     ([("s3://lake", f"{FOLDER}/manifest")], [("s3://lake", f"{FOLDER}/prompts")])),
    ("smoke_test_training", ["smoke", "--from-run", RUN, "--steps", "5"],
     ([("s3://lake", f"{FOLDER}/joined")], [])),
])
def test_argv_rendered_with_a_former_run_flag_still_names_the_run(task_id, argv, expected):
    """A plan's XCom or a task in flight across the rename (docs/adr/0137) says --out or
    --from-run: the lineage still finds its run folder."""
    lineage = _extract(_local(task_id, argv))
    assert (_names(lineage.inputs), _names(lineage.outputs)) == expected


# -- the run facet -------------------------------------------------------------------------

def _write(path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@pytest.fixture
def run_folder(tmp_path):
    """A run folder's JSON files as stitch, rephrase and validate write them."""
    run = tmp_path / "run"
    _write(run / "prompts" / "shards.json", {
        "shards": [{"name": "shard-00000", "url": f"file://{run}/prompts/shard-00000.parquet",
                    "rows": 6, "tokens": 100},
                   {"name": "shard-00001", "url": f"file://{run}/prompts/shard-00001.parquet",
                    "rows": 4, "tokens": 90}],
        "templates": [{"id": "qa", "version": 2, "style": "qa", "hash": "sha256:0a1b"},
                      {"id": "summary", "version": 1, "style": "summary"}]})
    for name, quarantined, usable, rejected in (("shard-00000", 1, 4, 1),
                                                ("shard-00001", 0, 3, 1)):
        _write(run / "generated" / name / "_COMMITTED.json",
               {"shard": name, "model": "/models/SmolLM2", "rows_quarantined": quarantined})
        _write(run / "validation" / f"{name}.json",
               {"shard": name, "rows_quarantined": quarantined,
                "quality": {"usable": usable, "rejected": rejected}})
    return f"file://{run}"


def _complete(task, summary):
    task._keep_for_lineage(summary)  # as execute does
    return _extract(task, "success")


def test_validate_facet_counts_its_own_shards_from_summary_and_run_folder(run_folder):
    task = _local("validate", ["validate", "--shard", f"{run_folder}/prompts/shard-00001.parquet",
                               "--run", run_folder])
    lineage = _complete(task, {"shards": ["shard-00001"], "usable": 3, "rejected": 1})
    facet = json.loads(_event_json(lineage))["run"]["facets"][FACET_NAME]
    assert facet["step"] == "validate" and facet["model"] == "/models/SmolLM2"
    assert facet["rows"] == {"usable": 3, "rejected": 1, "quarantined": 0}
    assert [(t["id"], t["hash"], t["hashKind"]) for t in facet["templates"]] == [
        ("qa", "sha256:0a1b", "content"), ("summary", "summary@1", "id@version")]


def test_register_facet_from_its_summary_and_the_catalog_it_used(run_folder):
    task = _local("register_catalog", ["register", "--run", run_folder, "--table", "syn.t",
                                       "--catalog-uri", "", "--warehouse", "s3://lake/wh"])
    summary = {"table": "syn.t", "catalog": "prod", "rows": 7, "rows_usable": 7,
               "rows_rejected": 2, "rows_quarantined": 1, "model": "Qwen2.5-7B",
               "templates": [{"id": "qa", "version": 2, "hash": "sha256:0a1b"}],
               # what register's summary also holds, never to be copied into an event
               "catalog_uri": f"postgresql+psycopg2://sf:{PASSWORD}@db:5432/cat",
               "query_hint": {"pyiceberg": f"load_catalog('prod', uri='...:{PASSWORD}@db')"}}
    lineage = _complete(task, summary)
    assert _names(lineage.outputs) == [("iceberg://prod", "syn.t")]
    facet = json.loads(_event_json(lineage))["run"]["facets"][FACET_NAME]
    assert facet["model"] == "Qwen2.5-7B"
    assert facet["rows"] == {"usable": 7, "rejected": 2, "quarantined": 1}
    assert facet["templates"][0]["hash"] == "sha256:0a1b"
    assert PASSWORD not in _event_json(lineage)


def test_register_facet_without_a_summary_reads_the_run_folder(run_folder):
    task = _local("register_catalog", ["register", "--run", run_folder, "--table", "syn.t"])
    facet = json.loads(_event_json(_complete(task, None)))["run"]["facets"][FACET_NAME]
    assert facet["rows"] == {"usable": 7, "rejected": 2, "quarantined": 1}
    assert {t["id"] for t in facet["templates"]} == {"qa", "summary"}


def test_a_run_folder_that_cannot_be_read_still_gives_the_datasets():
    task = _local("shard.rephrase", ["rephrase", "--shard", "file:///nowhere/prompts/"
                                     "shard-00000.parquet", "--run", "file:///nowhere",
                                     "--model", "/models/m"])
    lineage = _complete(task, None)
    assert _names(lineage.outputs) == [("file", "/nowhere/generated")]
    assert lineage.run_facets[FACET_NAME].model == "/models/m"  # from its argv


def test_start_and_failure_events_carry_datasets_but_no_run_facet(run_folder):
    task = _local("register_catalog", ["register", "--run", run_folder, "--table", "syn.t"])
    for state in ("running", "failed"):
        lineage = _extract(task, state)
        assert _names(lineage.outputs) == [("iceberg://synthfactory", "syn.t")]
        assert lineage.run_facets == {}


def test_no_password_of_a_url_reaches_a_dataset():
    task = _local("crawl_metadata", ["crawl", "--source", f"s3://key:{PASSWORD}@seeds/c?x=1",
                                     "--out", f"{RUN}/manifest"])
    lineage = _extract(task)
    assert _names(lineage.inputs) == [("s3://seeds", "c")]
    assert PASSWORD not in _event_json(lineage)


# -- the operators ---------------------------------------------------------------------

@pytest.fixture
def fake_worker(tmp_path):
    script = tmp_path / "synthfactory"
    script.write_text(textwrap.dedent("""\
        #!/usr/bin/env python3
        import json, os
        summary = {"shards": ["shard-00001"], "usable": 5, "rejected": 2}
        open(os.environ["SYNTHFACTORY_RESULT_FILE"], "w").write(json.dumps(summary))
    """))
    script.chmod(0o755)
    return script


def test_the_local_step_keeps_its_summary_for_the_complete_event(fake_worker):
    task = _local("validate", ["validate", "--shard", SHARD, "--run", "file:///nowhere"],
                  worker=fake_worker)
    task.execute(context={"outlet_events": OutletEvents()})
    facet = _extract(task, "success").run_facets[FACET_NAME]
    assert facet.rows == {"usable": 5, "rejected": 2}


def test_the_pod_step_gives_the_same_lineage_as_the_local_step(monkeypatch):
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    argv = ["validate", "--shard", SHARD, "--run", "file:///nowhere"]
    pod, local = _pod("validate", argv), _local("validate", argv)
    assert _names(_extract(pod).inputs) == _names(_extract(local).inputs)
    assert _names(_extract(pod).outputs) == _names(_extract(local).outputs)
    monkeypatch.setattr(KubernetesPodOperator, "execute",
                        lambda self, context: {"usable": 1, "rejected": 0})
    pod.execute({"outlet_events": OutletEvents()})
    assert _extract(pod, "success").run_facets[FACET_NAME].rows == {
        "usable": 1, "rejected": 0}


# The openlineage client and the provider's code cannot be imported (its package
# metadata stays, or Airflow's provider discovery itself would fail).
NO_PROVIDER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0] == "openlineage"
        provider = name.startswith("airflow.providers.openlineage.") and not name.endswith(
            ".get_provider_info")
        if top or provider:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Block())
import json
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
assert bag.import_errors == {}, bag.import_errors
from synthfactory_airflow.operators.local import LocalStepOperator
task = LocalStepOperator(task_id="validate", arguments=["validate", "--run", "file:///x"],
                         worker_bin=sys.argv[2])
class Events(dict):
    def __missing__(self, key):
        return type("E", (), {"extra": {}})()
print(json.dumps({"summary": task.execute({"outlet_events": Events()}),
                  "dags": sorted(bag.dags)}))
"""


def test_without_the_provider_the_dags_parse_and_steps_run(fake_worker):
    done = subprocess.run([str(AIRFLOW_PYTHON), "-c", NO_PROVIDER, str(DAGS), str(fake_worker)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["summary"]["usable"] == 5 and "synthetic_rephrase" in result["dags"]


def test_parsing_the_dags_imports_no_openlineage():
    code = ("import sys; from airflow.dag_processing.dagbag import DagBag; "
            f"b = DagBag(dag_folder={str(DAGS)!r}); "
            "assert not b.import_errors, b.import_errors; "
            "print(sorted(m for m in sys.modules if m.startswith('openlineage')))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__OPENLINEAGE__")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
