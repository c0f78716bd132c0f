"""synthetic_rephrase: seed documents in, rephrased documents registered in a catalog out.

Thin by design: every step is a ``synthfactory`` engine subcommand launched by the
runner (``SYNTHFACTORY_RUNNER=local|kubernetes``, ``SYNTHFACTORY_REPHRASE_MODE=kuberay``:
operators/runners/); nothing heavy is imported here.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Asset, Param, chain
from airflow.sdk.configuration import conf
from airflow.timetables.interval import CronDataIntervalTimetable

from synthfactory.contract import NO_PASSWORD_PATTERN, STYLES, engine_names, paths, steps
from synthfactory.contract.routing_form import routes_line
from synthfactory_airflow.operators.param_rules import check_params_task
from synthfactory_airflow.operators.param_switch import run_if_param
from synthfactory_airflow.operators.runners import runner_for
from synthfactory_airflow.operators.settings import Settings
from synthfactory_airflow.plugins.capacity.sensor import WaveCapacitySensor

SETTINGS = Settings()
RUNNER = runner_for(SETTINGS)  # local, kubernetes or kuberay: the DAG never asks which
Step = RUNNER.step_class()
CATALOG_TABLE = "synthetic.rephrased"
CATALOG_ASSET = Asset(f"iceberg://synthfactory/{CATALOG_TABLE}", group="synthfactory")
# the deployment's limit on a mapped task's instances (the API server refuses a plan
# XCom longer than this): plan merges shards to fit it, one line saying so
MAX_MAP_LENGTH = conf.getint("core", "max_map_length", fallback=1024)

# One prefix per data interval: a backfill of the same interval rewrites the same keys.
RUN = "{{ params.output_root }}/synthetic_rephrase/{{ data_interval_start | ds }}"

DOC = """
### synthetic_rephrase

Rephrases the seed documents of one data interval with an LLM (WRAP / BeyondWeb style)
and registers the result as an Iceberg table.

`check_params` (rules between fields) → `crawl_metadata` → `stitch_prompts` (Spark) →
`plan_shards` → `wait_for_capacity` →
`shard[i]` = `shard.rephrase` (GPU pool, vLLM or an endpoint, checkpointed) →
`shard.validate` (CPU pool), one mapped task group per shard group →
`join_chunks` (each document's chunk outputs joined back in order: one row per document
and template) → `register_catalog` (Iceberg + Asset event) → `audit_run` → `smoke_test_training` →
`write_card` (the dataset card; Param write_card) and `export_dataset` (Parquet + card, and
the Hub: Params export_url, hub_repo_id) → `write_report`.

`write_report` is a teardown: it runs once every task before it has ended, failed runs
too, and writes `report.json` and its figures into the run folder (the Run report view);
its own state does not change the DAG run's (docs/adr/0101).

Output lands under `{output_root}/synthetic_rephrase/{interval start}/` (manifest,
prompts, generated, quarantine, validation, joined, report). A rerun of an interval resumes:
committed shards are skipped, partial shards continue from their last checkpoint.
The runner (`SYNTHFACTORY_RUNNER`) is `local` (subprocesses of `.venv-worker`) or
`kubernetes` (KubernetesPodOperator with the worker image; same argv). With
`SYNTHFACTORY_REPHRASE_MODE=kuberay` (kubernetes only) the `kuberay` runner replaces the
`shard` group by one RayJob for the whole wave, `rephrase_wave` (a head and one GPU
worker per shard group), then a mapped `validate` pod task per group (docs/adr/0057).
"""

GROUPS = "{{ ti.xcom_pull(task_ids='plan_shards') | length }}"  # wave size = shard groups


# The trigger form's sections, in the order a new user fills them.
DATA, PROMPTS, MODEL, GATE, CATALOG, SMOKE, EXPORT = (
    "Data", "Prompts and shards", "Model and engine", "Quality gate", "Catalog", "Smoke test",
    "Card and export")
URL_PATTERN = r"^(file|s3)://\S+$"  # a bare path would resolve against the worker's cwd

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
    # Your own corpus: its columns by name. A name the seed files lack fails stitch,
    # listing the columns there.
    "text_column": Param("text", type="string", minLength=1, section=DATA,
                         description="column of the seed files holding each document's text"),
    "id_column": Param("id", type="string", minLength=1, section=DATA,
                       description="column holding each document's unique id (stitch and "
                                   "the audit read it)"),
    # null allowed: an emptied text field reaches the run as null (see catalog_conn_id)
    "quality_column": Param(None, type=["null", "string"], minLength=1, section=DATA,
                            description="numeric column scoring each document (e.g. a quality "
                                        "classifier's score); empty: no selection"),
    "min_quality": Param(None, type=["null", "number"], section=DATA,
                         description="stitch only documents whose quality_column is at least "
                                     "this (needs quality_column); empty: every document"),
    # `examples` makes the form a multi-select of the shipped styles; no `items.enum`:
    # a templates_url folder has ids of its own, which check_params looks up (ADR 0114).
    # The pattern keeps an id a file name that survives the comma-joined argv.
    "templates": Param(["encyclopedic"], type="array", minItems=1, uniqueItems=True,
                       examples=list(STYLES),
                       items={"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"},
                       section=PROMPTS,
                       description="rephrase styles: template ids to draw from, the shipped "
                                   "ones or those in templates_url"),
    "templates_url": Param(None, type=["null", "string"], pattern=URL_PATTERN, section=PROMPTS,
                           description="folder (file://... or s3://...) of your own template "
                                       "JSON files, one per id (docs/templates.md); empty: "
                                       "the shipped templates"),
    # Routing (ADR 0139): off by default, so a run draws from `templates` as before.
    "routing": Param(False, type="boolean", section=PROMPTS,
                     description="on: each document gets templates its route names, by its "
                                 "domain (web, code, math: domain_column, else detected from "
                                 "the text) and its quality bucket (quality_column); "
                                 "templates is then not used. A routing.json in "
                                 "templates_url replaces the shipped table, which is: "
                                 + routes_line()),
    "domain_column": Param(None, type=["null", "string"], minLength=1, section=DATA,
                           description="column naming each document's domain (web, code or "
                                       "math); empty: detected from the text (code fences "
                                       "and indentation, math markup)"),
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
    # "auto": each row's budget from its source's length and its template's max_ratio
    # (docs/quality.md); a number caps every row alike. The form may send the number as
    # text, hence the pattern.
    "max_new_tokens": Param("auto", type=["integer", "string"], minimum=1, maximum=8192,
                            pattern="^(auto|[1-9][0-9]{0,3})$", section=MODEL,
                            description="most tokens generated per rephrasing: auto (sized "
                                        "to each source and template) or a number"),
    "max_model_len": Param(2048, type="integer", minimum=256, section=MODEL,
                           description="context window of one sequence (prompt plus new "
                                       "tokens): stitch cuts the prompts for it and every "
                                       "rephrase engine runs with it (plan passes it on; "
                                       "engine_args may set a larger one, never a smaller)"),
    "temperature": Param(0.7, type="number", minimum=0, maximum=2, section=MODEL,
                         description="sampling temperature (0 = greedy)"),
    # the table's default: the form and the command line checkpoint alike
    "checkpoint_rows": Param(steps.REPHRASE.flag("--checkpoint-rows").default, type="integer",
                             minimum=1, section=MODEL,
                             description="rows per checkpoint part (max work lost on a crash)"),
    "max_attempts": Param(3, type="integer", minimum=1, section=MODEL,
                          description="attempts per row: a row the quality gate rejects for "
                                      "a reason another sample can fix (truncated, "
                                      "repetition, too long, ...) is generated again, up to "
                                      "this many times; 1: never"),
    "repair": Param("trim", type="string", enum=["trim", "none"], section=MODEL,
                    description="trim: an output that ran to its budget is cut back to its "
                                "longest whole-sentence prefix that passes every check and "
                                "marked trimmed, costing no GPU; none: never"),
    # docs/adr/0150: an attempt is paid for once per request key
    "replay": Param(True, type="boolean", section=MODEL,
                    description="on: a row's attempt whose request (text, template, model, "
                                "engine settings, sampling, attempt) matches one an earlier "
                                "run of this pipeline committed is taken from that run, not "
                                "generated again; off: every attempt sampled anew"),
    # null allowed, as benchmarks: the form sends an emptied field as null
    "replay_from": Param(None, type=["null", "string"], pattern=URL_PATTERN, section=MODEL,
                         description="replay from another pipeline folder "
                                     "({output_root}/{pipeline}, with its replay_index/) or "
                                     "one run folder (file://... or s3://...); empty: this "
                                     "pipeline's own runs"),
    # null allowed, as quality_column: the form sends an emptied field as null
    "benchmarks": Param(None, type=["null", "string"], pattern=URL_PATTERN, section=GATE,
                        description="folder (file://... or s3://...) of your benchmark files "
                                    "(*.parquet or *.jsonl, one benchmark per file, as it "
                                    "comes: question, answer, choices...): a row whose output "
                                    "or source shares a word n-gram with one is rejected as "
                                    "contaminated, naming it; empty: no decontamination"),
    # null allowed, as benchmarks; each comma-separated name holds a non-space character
    "benchmark_columns": Param(None, type=["null", "string"],
                               pattern=r"^[^,]*[^,\s][^,]*(,[^,]*[^,\s][^,]*)*$",
                               section=GATE,
                               description="the benchmark files' columns to read, comma-"
                                           "separated (e.g. question,answer,choices), each a "
                                           "column of strings or lists of strings in every "
                                           "file; empty: every such column of each file"),
    "decontaminate_n": Param(13, type="integer", minimum=5, maximum=64, section=GATE,
                             description="words per n-gram of the decontamination check "
                                         "(13, as datatrove and NeMo Curator)"),
    # rephrase --replicas (a saved conf's former gpus_per_task still works: param_names.py)
    "replicas": Param(steps.REPHRASE.flag("--replicas").default, type="integer", minimum=1,
                      maximum=16, section=MODEL,
                      description="engine replicas per rephrase task, each on a GPU of its "
                                  "own, pulling the task's shards (Ray when > 1; the pod asks "
                                  "that many GPUs; on the CPU build: replicas pinned to one "
                                  "core each). Formerly gpus_per_task"),
    "max_shard_groups": Param(2, type="integer", minimum=1, section=PROMPTS,
                              description="at most this many rephrase tasks (shards are "
                                          "grouped to fit; never more than the "
                                          "deployment's max_map_length, "
                                          f"{MAX_MAP_LENGTH} here: plan merges to fit)"),
    "model": Param(str(SETTINGS.home) + "/var/models/SmolLM2-135M-Instruct", type="string",
                   minLength=1, section=MODEL, description="model folder (or name) for vLLM"),
    "engine_args": Param({}, type="object", section=MODEL,
                         description="vllm.LLM arguments over the tuned defaults (vllm "
                                     "engine only)"),
    "engine": Param(engine_names.VLLM, type="string", enum=engine_names.form_choices(),
                    values_display=engine_names.form_labels(), section=MODEL,
                    description="vllm: vLLM inside each rephrase task (model loaded per "
                                "task); endpoint: an OpenAI-compatible server you run (vllm "
                                "serve, SGLang, a gateway), named by endpoint_conn_id"),
    # null allowed, as catalog_conn_id: the form sends an emptied field as null
    "endpoint_conn_id": Param(None, type=["null", "string"], section=MODEL,
                              description="engine = endpoint: Airflow connection of the "
                                          "server (host = its URL, password = API key, extra "
                                          "{\"model\": NAME}); reaches the step as "
                                          "environment, never argv. Kubernetes: the worker "
                                          "Secret's SYNTHFACTORY_ENDPOINT_* instead"),
    # On Kubernetes the worker Secret's SYNTHFACTORY_CATALOG_URI is the default catalog.
    # A URI with a password (user:pw@ or ?password=) is refused before the run exists:
    # the run's conf is stored and shown; passwords travel through catalog_conn_id
    # (ADR 0070). The pattern is the contract's, the engine's has_password negated.
    "catalog_uri": Param(RUNNER.default_catalog_uri, type="string", section=CATALOG,
                         pattern=NO_PASSWORD_PATTERN,
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
    "include_rejected": Param(False, type="boolean", section=CATALOG,
                              description="register the rows the quality gate rejected too "
                                          "(column usable = false); default: usable rows only "
                                          "(docs/quality.md)"),
    "table": Param(CATALOG_TABLE, type="string", pattern=r"^[A-Za-z0-9_]+\.[A-Za-z0-9_]+$",
                   section=CATALOG, description="Iceberg table as namespace.name"),
    "smoke_steps": Param(10, type="integer", minimum=1, maximum=10000, section=SMOKE,
                         description="training steps of the smoke test"),
    "write_card": Param(True, type="boolean", section=EXPORT,
                        description="write the run's dataset card (card/README.md, the "
                                    "Hugging Face format), linked from the Run report"),
    "license": Param("other", type="string", minLength=1, section=EXPORT,
                     description="the data's license on the card: an SPDX id (apache-2.0, "
                                 "cc-by-4.0, odc-by-1.0, ...) or other"),
    "export_url": Param(None, type=["null", "string"], pattern=URL_PATTERN, section=EXPORT,
                        description="export the usable rows as Parquet files with the card "
                                    "(README.md) to this folder (file://... or s3://...); "
                                    "datasets.load_dataset reads it. Empty: no export"),
    "hub_repo_id": Param(None, type=["null", "string"], pattern=r"^[\w.-]+/[\w.-]+$",
                         section=EXPORT,
                         description="with export_url: also push the export to this Hugging "
                                     "Face dataset repo (OWNER/NAME). Empty: no push"),
    "hub_conn_id": Param(None, type=["null", "string"], section=EXPORT,
                         description="Airflow connection whose password is the Hugging Face "
                                     "token of the push; reaches the step as environment "
                                     "($HF_TOKEN), never argv. Kubernetes: the worker "
                                     "Secret's HF_TOKEN instead"),
}

with DAG(
    dag_id="synthetic_rephrase",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=SETTINGS.max_active_runs,  # days overlap; pools bound the GPUs
    params=params,
    doc_md=DOC,
    tags=["synthfactory"],
    default_args={"owner": "synthfactory"},
) as dag:
    # Rules between fields and unknown conf keys fail the run before any work starts.
    check = check_params_task(params)
    # Each task's argv is rendered from the steps table (synthfactory/contract/steps.py):
    # every flag that takes a Param is there; `fixed` holds this DAG's own choices.
    crawl = Step(
        task_id="crawl_metadata",
        arguments=steps.argv("crawl", {"--out": RUN + "/manifest"}),
        **RUNNER.step_kwargs(steps.CRAWL.kind, "crawl_metadata"),
    )
    stitch = RUNNER.spark_driver_class()(
        task_id="stitch_prompts",
        arguments=steps.argv("stitch", {"--manifest": RUN + "/manifest", "--run": RUN}),
        **RUNNER.spark_driver_kwargs("stitch_prompts"),
    )
    plan = Step(
        task_id="plan_shards",
        # after the --: every rephrase task's options that take a Param (plan adds the
        # shards, the run and the window); the dry-run engine last, so its --engine wins
        arguments=[*steps.argv("plan", {"--run": RUN, "--max-map-length": str(MAX_MAP_LENGTH)}),
                   "--", *steps.passed_on("rephrase"),
                   *SETTINGS.dry_run_rephrase_options()],
        **RUNNER.step_kwargs(steps.PLAN.kind, "plan_shards"),
    )
    wait = WaveCapacitySensor(  # the whole wave (pods, or the RayJob's head and workers)
        task_id="wait_for_capacity",
        **RUNNER.capacity_kwargs(GROUPS),
        poke_interval=30,
        timeout=6 * 3600,
        mode="reschedule",
    )
    # shard[i] = shard.rephrase >> shard.validate mapped over the plan; under kuberay one
    # RayJob (rephrase_wave) over every group, then a mapped validate
    shards = RUNNER.shard_groups(plan, GROUPS)
    # after every group: a long document's chunks may sit in any group (docs/adr/0136)
    join = Step(
        task_id="join_chunks",
        arguments=steps.argv("join", {"--run": RUN}),
        **RUNNER.step_kwargs(steps.JOIN.kind, "join_chunks"),
    )
    register = Step(
        task_id="register_catalog",
        arguments=steps.argv("register", {"--run": RUN, "--pipeline": "synthetic_rephrase"}),
        outlets=[CATALOG_ASSET],
        **RUNNER.step_kwargs(steps.REGISTER.kind, "register_catalog"), **RUNNER.catalog_kwargs(),
    )
    # Reads what every step wrote, not their summaries: nothing lost, duplicated or
    # stale from the manifest to the catalog rows (docs/audit.md).
    audit = Step(
        task_id="audit_run",
        arguments=steps.argv("audit", {"--run": RUN}),
        # a retry reads the same
        **{**RUNNER.step_kwargs(steps.AUDIT.kind, "audit_run"), "retries": 0},
        **RUNNER.catalog_kwargs(),
    )
    smoke = Step(
        task_id="smoke_test_training",
        # outputs sized to their sources (max_new_tokens auto) may be longer than the
        # smoke model's context: cut them, as a training job's loader would
        arguments=steps.argv("smoke", {"--run": RUN, "--overlong": "truncate",
                                       "--output": RUN + "/" + paths.SMOKE_SUMMARY}),
        **RUNNER.step_kwargs(steps.SMOKE.kind, "smoke_test_training"),
    )
    # Each when its Param asks for it (skipped, not failed, otherwise): the run's dataset
    # card, after the smoke test whose result it gives; the export of the usable rows
    # with a card of their own, and its push to the Hub (docs/export.md)
    card = Step(
        task_id="write_card",
        arguments=steps.argv("card", {"--run": RUN}),
        pre_execute=run_if_param("write_card"),
        **RUNNER.step_kwargs(steps.CARD.kind, "write_card"),
    )
    export = Step(
        task_id="export_dataset",
        arguments=steps.argv("export", {"--run": RUN}),
        pre_execute=run_if_param("export_url"),
        **RUNNER.step_kwargs(steps.EXPORT.kind, "export_dataset"), **RUNNER.hub_kwargs(),
    )
    # Last, whatever happened before (failed runs too): report.json + figures in the run
    # folder, shown by plugins/run_report. A teardown, so a report written for a failed
    # run does not turn the DAG run green (docs/adr/0101).
    report = Step(
        task_id="write_report",
        arguments=steps.argv("report", {"--run": RUN}),
        **RUNNER.step_kwargs(steps.REPORT.kind, "write_report"),
    ).as_teardown()
    chain(crawl, stitch, plan, wait, *shards, join, register, audit, smoke, [card, export],
          report)
    check >> crawl
