"""synthetic_rephrase: seed documents in, rephrased documents registered in a catalog out.

Thin by design: every step is a ``synthfactory`` engine subcommand launched by the
runner (``SYNTHFACTORY_RUNNER=local|kubernetes``); nothing heavy is imported here.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Asset, Param, chain, task_group
from airflow.timetables.interval import CronDataIntervalTimetable

from operators.param_rules import check_params_task
from operators.settings import Settings
from operators.steps import (
    catalog_arguments,
    catalog_kwargs,
    step_kwargs,
    step_operator_class,
    wave_count,
    wave_requests,
)
from plugins.capacity.sensor import WaveCapacitySensor

SETTINGS = Settings()
Step = step_operator_class(SETTINGS)
CATALOG_TABLE = "synthetic.rephrased"
CATALOG_ASSET = Asset(f"iceberg://synthfactory/{CATALOG_TABLE}", group="synthfactory")
MAX_MAP_LENGTH = 1024  # Airflow's default [core] max_map_length

# One prefix per data interval: a backfill of the same interval rewrites the same keys.
RUN = "{{ params.output_root }}/synthetic_rephrase/{{ data_interval_start | ds }}"

DOC = """
### synthetic_rephrase

Rephrases the seed documents of one data interval with an LLM (WRAP / BeyondWeb style)
and registers the result as an Iceberg table.

`check_params` (rules between fields) → `crawl_metadata` → `stitch_prompts` (Spark) →
`plan_shards` → `wait_for_capacity` →
`shard[i]` = `shard.rephrase` (GPU pool, vLLM, checkpointed) → `shard.validate` (CPU pool),
one mapped task group per shard group →
`register_catalog` (Iceberg + Asset event) → `audit_run` → `smoke_test_training`.

Output lands under `{output_root}/synthetic_rephrase/{interval start}/` (manifest,
prompts, generated, quarantine, validation). A rerun of an interval resumes: committed
shards are skipped, partial shards continue from their last checkpoint.
The runner (`SYNTHFACTORY_RUNNER`) is `local` (subprocesses of `.venv-worker`) or
`kubernetes` (KubernetesPodOperator with the worker image; same argv).
"""

GROUPS = "{{ ti.xcom_pull(task_ids='plan_shards') | length }}"  # wave size = shard groups


def validate_argv(group: dict) -> list[str]:
    return group["validate"]


def shard_argvs(group: dict) -> dict[str, list[str]]:
    """One plan entry -> the arguments of one ``shard`` task group (expand_kwargs)."""
    return {"rephrase_argv": group["rephrase"], "validate_argv": group["validate"]}


@task_group(group_id="shard")
def shard(rephrase_argv: list[str], validate_argv: list[str]) -> None:
    """One shard group: its validation starts as soon as its own rephrase ends."""
    rephrase = Step(task_id="rephrase", arguments=rephrase_argv,  # one Kueue gang per wave
                    **step_kwargs("gpu", SETTINGS, "rephrase", gang_size=GROUPS))
    validate = Step(task_id="validate", arguments=validate_argv,
                    **step_kwargs("cpu", SETTINGS, "validate"))
    rephrase >> validate


# The trigger form's sections, in the order a new user fills them.
DATA, PROMPTS, MODEL, CATALOG, SMOKE = (
    "Data", "Prompts and shards", "Model and engine", "Catalog", "Smoke test")
STYLES = ("encyclopedic", "easy", "qa", "tutorial", "summary", "faq")  # synthfactory/templates
URL_PATTERN = r"^(file|s3)://\S+$"  # a bare path would resolve against the worker's cwd
# A URI with a password (user:pw@ or ?password=) is refused before the run exists: the
# run's conf is stored and shown; passwords travel through catalog_conn_id (ADR 0070).
NO_PASSWORD_PATTERN = r"^(?![^:/?#]+://[^/?#@]*:[^/?#@]+@)(?!.*[?&](password|passwd|pwd)=[^&])"

params = {
    "source": Param(SETTINGS.url("var", "corpus"), type="string", pattern=URL_PATTERN,
                    section=DATA,
                    description="seed corpus URL (file://... or s3://...) holding one "
                                "partition per day, e.g. dt=YYYY-MM-DD/*.parquet"),
    "partition_template": Param("dt={ds}", type="string", minLength=1, section=DATA,
                                description="partition path under source that the run's "
                                            "data interval selects ({ds}, {yyyy}/{mm}/{dd}, "
                                            "{hh})"),
    "output_root": Param(SETTINGS.url("var", "data"), type="string", pattern=URL_PATTERN,
                         section=DATA,
                         description="where run folders are written (file://... or s3://...)"),
    # `examples` makes the form a multi-select of the shipped styles; `items.enum`
    # makes the schema refuse any other name.
    "templates": Param(["encyclopedic"], type="array", minItems=1, uniqueItems=True,
                       examples=list(STYLES), items={"type": "string", "enum": list(STYLES)},
                       section=PROMPTS,
                       description="rephrase styles: the shipped prompt templates to draw "
                                   "from"),
    "styles_per_doc": Param(1, type="integer", minimum=1, maximum=len(STYLES),
                            section=PROMPTS,
                            description="styles drawn per document (at most the number of "
                                        "templates chosen)"),
    "shard_tokens": Param(8192, type="integer", minimum=2048, section=PROMPTS,
                          description="token budget of one shard, prompts plus new tokens "
                                      "(at least max_model_len)"),
    "spark_master": Param("local[*]", type="string", minLength=1, section=PROMPTS,
                          description="Spark master of the stitch job (k8s://https://... "
                                      "to run executors as pods; docs/stitch.md)"),
    "spark_partitions": Param(8, type="integer", minimum=1, section=PROMPTS,
                              description="Spark partitions of the stitch job"),
    "spark_executors": Param(2, type="integer", minimum=1, section=PROMPTS,
                             description="Spark executors (executor pods on k8s://; "
                                         "ignored by local[*])"),
    "spark_executor_cores": Param(2, type="integer", minimum=1, section=PROMPTS,
                                  description="cores per Spark executor"),
    "spark_executor_memory": Param("4g", type="string", pattern=r"^[1-9][0-9]*[mg]$",
                                   section=PROMPTS,
                                   description="JVM heap per Spark executor, e.g. 4g"),
    "max_new_tokens": Param(128, type="integer", minimum=1, maximum=8192, section=MODEL,
                            description="most tokens generated per rephrasing"),
    "max_model_len": Param(2048, type="integer", minimum=256, section=MODEL,
                           description="vLLM context window: prompt plus new tokens of one "
                                       "sequence"),
    "temperature": Param(0.7, type="number", minimum=0, maximum=2, section=MODEL,
                         description="sampling temperature (0 = greedy)"),
    "checkpoint_rows": Param(16, type="integer", minimum=1, section=MODEL,
                             description="rows per checkpoint part (max work lost on a crash)"),
    "gpus_per_task": Param(1, type="integer", minimum=1, maximum=16, section=MODEL,
                           description="GPUs per rephrase pod, one vLLM replica per GPU "
                                       "pulling the task's shards (Ray when > 1; on the CPU "
                                       "build: replicas pinned to one core each)"),
    "max_shard_groups": Param(2, type="integer", minimum=1, maximum=MAX_MAP_LENGTH,
                              section=PROMPTS,
                              description="at most this many rephrase tasks (shards are "
                                          "grouped to fit)"),
    "model": Param(str(SETTINGS.home) + "/var/models/SmolLM2-135M-Instruct", type="string",
                   minLength=1, section=MODEL, description="model folder (or name) for vLLM"),
    "engine_args": Param({}, type="object", section=MODEL,
                         description="vllm.LLM arguments over the tuned defaults"),
    # On Kubernetes the worker Secret's SYNTHFACTORY_CATALOG_URI is the default catalog.
    "catalog_uri": Param("" if SETTINGS.runner == "kubernetes"
                         else f"sqlite:///{SETTINGS.home}/var/catalog/catalog.db",
                         type="string", section=CATALOG, pattern=NO_PASSWORD_PATTERN,
                         description="pyiceberg SQL catalog URI without a password (SQLite); "
                                     "a database with a password: catalog_conn_id"),
    # null allowed: the trigger form sends an emptied text field as null, and refuses
    # a string Param without it as "required"
    "catalog_conn_id": Param(SETTINGS.catalog_conn_id or None, type=["null", "string"],
                             section=CATALOG,
                             description="Airflow connection of the catalog database (e.g. "
                                         "postgres); when set it replaces catalog_uri and "
                                         "reaches the step as environment, never argv. "
                                         "Kubernetes: the worker Secret instead"),
    "warehouse": Param(SETTINGS.url("var", "warehouse"), type="string", pattern=URL_PATTERN,
                       section=CATALOG,
                       description="where the table's data files are written (file://... "
                                   "or s3://...)"),
    "table": Param(CATALOG_TABLE, type="string", pattern=r"^[A-Za-z0-9_]+\.[A-Za-z0-9_]+$",
                   section=CATALOG, description="Iceberg table as namespace.name"),
    "smoke_steps": Param(10, type="integer", minimum=1, maximum=10000, section=SMOKE,
                         description="training steps of the smoke test"),
}

with DAG(
    dag_id="synthetic_rephrase",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params=params,
    doc_md=DOC,
    tags=["synthfactory"],
    default_args={"owner": "synthfactory"},
) as dag:
    # Rules between fields and unknown conf keys fail the run before any work starts.
    check = check_params_task(params)
    crawl = Step(
        task_id="crawl_metadata",
        arguments=["crawl", "--source", "{{ params.source }}", "--out", RUN + "/manifest",
                   "--interval-start", "{{ data_interval_start.isoformat() }}",
                   "--interval-end", "{{ data_interval_end.isoformat() }}",
                   "--partition-template", "{{ params.partition_template }}"],
        **step_kwargs("cpu", SETTINGS, "crawl_metadata"),
    )
    stitch = step_operator_class(SETTINGS, spark_driver=True)(
        task_id="stitch_prompts",
        arguments=["stitch", "--manifest", RUN + "/manifest", "--out", RUN,
                   "--templates", "{{ params.templates | join(',') }}",
                   "--styles-per-doc", "{{ params.styles_per_doc }}",
                   "--shard-tokens", "{{ params.shard_tokens }}",
                   "--max-new-tokens", "{{ params.max_new_tokens }}",
                   "--max-model-len", "{{ params.max_model_len }}",
                   "--model", "{{ params.model }}",
                   "--master", "{{ params.spark_master }}",
                   "--partitions", "{{ params.spark_partitions }}",
                   "--executors", "{{ params.spark_executors }}",
                   "--executor-cores", "{{ params.spark_executor_cores }}",
                   "--executor-memory", "{{ params.spark_executor_memory }}"],
        **step_kwargs("cpu", SETTINGS, "stitch_prompts", spark_driver=True),
    )
    plan = Step(
        task_id="plan_shards",
        arguments=["plan", "--run", RUN, "--max-groups", "{{ params.max_shard_groups }}", "--",
                   "--model", "{{ params.model }}",
                   "--engine-args", "{{ params.engine_args | tojson }}",
                   "--max-new-tokens", "{{ params.max_new_tokens }}",
                   "--temperature", "{{ params.temperature }}",
                   "--checkpoint-rows", "{{ params.checkpoint_rows }}",
                   "--replicas", "{{ params.gpus_per_task }}"],
        **step_kwargs("cpu", SETTINGS, "plan_shards"),
    )
    kuberay = SETTINGS.rephrase_mode == "kuberay"
    if kuberay:  # the head and every worker of the wave's RayJob, admitted together
        from operators.rayjob import rayjob_wave_template

        wave = rayjob_wave_template(GROUPS)
    else:
        wave = [{"pool": kind, "count": wave_count(SETTINGS, GROUPS),
                 **wave_requests(kind, SETTINGS)} for kind in ("gpu", "cpu")]
    wait = WaveCapacitySensor(
        task_id="wait_for_capacity",
        wave=wave,
        cluster="kubernetes" if SETTINGS.runner == "kubernetes" else "local",
        namespace=SETTINGS.namespace,
        kubernetes_conn_id=SETTINGS.kubernetes_conn_id,
        # CPU and GPU pools may live in two clusters: one poke reads both
        pool_connections={kind: SETTINGS.kubernetes_conn_for(kind) for kind in ("gpu", "cpu")},
        poke_interval=30,
        timeout=6 * 3600,
        mode="reschedule",
    )
    if kuberay:  # one RayJob over every shard group, then each group's validation
        from operators.rayjob_operator import RayJobWaveOperator

        rephrase_wave = RayJobWaveOperator(
            task_id="rephrase_wave", kubernetes_conn_id=SETTINGS.kubernetes_conn_for("gpu"),
            namespace=SETTINGS.namespace, image=SETTINGS.worker_image, workers=GROUPS,
            gpus_per_worker="{{ params.gpus_per_task }}", secret_name=SETTINGS.secret_name,
            kueue_queue=SETTINGS.kueue_queue, priority_class=SETTINGS.priority_class,
            retries=3, retry_delay=timedelta(minutes=1), retry_exponential_backoff=True,
            pool=SETTINGS.gpu_pool)
        validates = Step.partial(task_id="validate", **step_kwargs("cpu", SETTINGS, "validate"),
                                 ).expand(arguments=plan.output.map(validate_argv))
        shards = [rephrase_wave, validates]
    else:
        shards = shard.expand_kwargs(plan.output.map(shard_argvs))
    register = Step(
        task_id="register_catalog",
        arguments=["register", "--run", RUN, "--table", "{{ params.table }}",
                   *catalog_arguments(),
                   "--pipeline", "synthetic_rephrase",
                   "--interval", "{{ data_interval_start.isoformat() }}/"
                                 "{{ data_interval_end.isoformat() }}",
                   "--airflow-run-id", "{{ run_id }}"],
        outlets=[CATALOG_ASSET],
        **step_kwargs("cpu", SETTINGS, "register_catalog"), **catalog_kwargs(SETTINGS),
    )
    # Reads what every step wrote, not their summaries: nothing lost, duplicated or
    # stale from the manifest to the catalog rows (docs/audit.md).
    audit = Step(
        task_id="audit_run",
        arguments=["audit", "--run", RUN, "--table", "{{ params.table }}",
                   *catalog_arguments()],
        **{**step_kwargs("cpu", SETTINGS, "audit_run"), "retries": 0},  # a retry reads the same
        **catalog_kwargs(SETTINGS),
    )
    smoke = Step(
        task_id="smoke_test_training",
        arguments=["smoke", "--from-run", RUN, "--steps", "{{ params.smoke_steps }}"],
        **step_kwargs("gpu", SETTINGS, "smoke_test_training"),
    )
    # Last, whatever happened before (failed runs too): report.json + figures in the run
    # folder, shown by plugins/run_report. A teardown, so a report written for a failed
    # run does not turn the DAG run green (docs/adr/0101).
    report = Step(
        task_id="write_report",
        arguments=["report", "--run", RUN, "--dag-id", "{{ dag.dag_id }}",
                   "--airflow-run-id", "{{ run_id }}"],
        **step_kwargs("cpu", SETTINGS, "write_report"),
    ).as_teardown()
    if kuberay:
        chain(crawl, stitch, plan, wait, *shards, register, audit, smoke, report)
    else:
        chain(crawl, stitch, plan, wait, shards, register, audit, smoke, report)
    check >> crawl
