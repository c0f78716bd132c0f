"""The steps table itself: one ``Step`` per ``synthfactory`` subcommand a DAG runs, with
its flags, paths and rules (docs/adr/0140). Kept whole: it is one declaration, read
top to bottom, and the flags shared by several steps sit beside the steps that share
them. ``synthfactory.contract.steps`` builds and reads argv from it and is the import
path its users keep. Standard library only."""

from __future__ import annotations

import argparse
from dataclasses import replace

from synthfactory.contract import engine_names, paths
from synthfactory.contract.flag_types import (
    AUTO,
    budget,
    column_names,
    context_window,
    fraction,
    non_negative_float,
    non_negative_int,
    number_or_unset,
    optional_text,
    positive_float,
    positive_int,
    price,
    probability,
    routing_switch,
    seed,
    temperature,
    token_count,
    yes_no,
)
from synthfactory.contract.names import (
    CATALOG_URI_ENV,
    DEFAULT_CATALOG_NAME,
    DEFAULT_GPU_HOUR_USD,
    GPU_HOUR_USD_ENV,
    MAX_KEYS_CAP,
)
from synthfactory.contract.step_model import (
    CATALOG,
    CPU,
    GPU,
    INPUT,
    OUTPUT,
    RUN,
    SHARD,
    SPARK_DRIVER,
    TABLE,
    Flag,
    Rule,
    Step,
)
from synthfactory.contract.step_rules import (
    engine_window_not_smaller,
    min_quality_needs_column,
    server_engine_takes_no_engine_args,
    shard_tokens_fit_window,
    styles_within_templates,
)

# The form's engine as the registry names it (a former value mapped: docs/adr/0144)
ENGINE_VALUE = engine_names.registry_template()

# -- flags shared by several steps ------------------------------------------------------

RUN_FLAG = Flag("--run", required=True, role=RUN, help="run URL: {root}/{pipeline}/{interval}")
CATALOG_FLAGS = (
    Flag("--catalog", default=DEFAULT_CATALOG_NAME, role=CATALOG,
         help=f"pyiceberg catalog name (default {DEFAULT_CATALOG_NAME!r})"),
    Flag("--catalog-uri", param="catalog_uri",
         # a connection's URI reaches the step as environment, never argv (docs/adr/0070)
         value="{{ '' if params.catalog_conn_id else params.catalog_uri }}",
         help="overrides the configured URI, e.g. sqlite:////abs/catalog.db or "
              "postgresql+psycopg2://user@host:5432/db; one with a password goes in "
              f"${CATALOG_URI_ENV}"),
    Flag("--warehouse", param="warehouse",
         help="overrides the configured warehouse (file:// or s3://)"),
)
TABLE_FLAG = Flag("--table", required=True, param="table", role=TABLE,
                  help="target table, NAMESPACE.TABLE")
AIRFLOW_RUN_ID = Flag("--airflow-run-id", value="{{ run_id }}",
                      help="the Airflow DAG run id, recorded with the run")

# -- the steps --------------------------------------------------------------------------

CRAWL = Step(
    "crawl", "list source partitions into a parquet manifest", "synthfactory.crawl.command",
    CPU, writes=(paths.MANIFEST,), flags=(
        Flag("--source", required=True, param="source", role=INPUT,
             help="s3://bucket/prefix or file:///folder"),
        Flag("--out", required=True, role=OUTPUT, help="manifest folder URL"),
        Flag("--interval-start", value="{{ data_interval_start.isoformat() }}",
             help="data interval start, ISO-8601 (inclusive)"),
        Flag("--interval-end", value="{{ data_interval_end.isoformat() }}",
             help="data interval end, ISO-8601 (exclusive)"),
        Flag("--partition-template", param="partition_template",
             help="partition path under the source, e.g. 'dt={ds}' or "
                  "'year={yyyy}/month={mm}/day={dd}' (placeholders ds, ds_nodash, yyyy, mm, "
                  "dd, hh)"),
        Flag("--scope", choices=("partition", "last-modified", "both"),
             help="how the interval selects objects: by partition value, by LastModified in "
                  "[start, end), or both (default: partition with a template, else "
                  "last-modified)"),
        Flag("--allow-missing-partition", action="store_true",
             help="an interval with no partition gives an empty manifest and a warning "
                  "(default: the crawl fails naming the partition it expected)"),
        Flag("--workers", type=positive_int, default=8, help="concurrent listings (default 8)"),
        Flag("--fanout-depth", type=non_negative_int, default=1,
             help="levels of delimiter listing to fan out over before listing flat "
                  "(default 1)"),
        Flag("--suffix", default=".parquet",
             help="only keys ending in this (default .parquet; '' for all)"),
        Flag("--max-keys", type=positive_int, default=MAX_KEYS_CAP,
             help=f"keys per request, capped at {MAX_KEYS_CAP}"),
        Flag("--rows-per-part", type=positive_int, default=100_000,
             help="manifest rows per part file (default 100000)"),
        Flag("--checkpoint-seconds", type=positive_float, default=30.0,
             help="write a part and a checkpoint at least this often (default 30)"),
        Flag("--retry-mode", choices=("standard", "adaptive"),
             help="botocore retry mode (default: AWS_RETRY_MODE, else adaptive)"),
        # not --max-attempts: that is rephrase's attempts per row (issue 51)
        Flag("--request-attempts", type=positive_int, aliases=("--max-attempts",),
             help="botocore attempts per S3 request, the first included (default: "
                  "AWS_MAX_ATTEMPTS, else 10)"),
    ))

STITCH = Step(
    "stitch", "Spark: stitch templates onto documents, cut shards",
    "synthfactory.stitch.command", SPARK_DRIVER,
    reads=(paths.MANIFEST,), writes=(paths.PROMPTS,),
    rules=(Rule(("shard_tokens", "max_model_len"), shard_tokens_fit_window),
           Rule(("min_quality", "quality_column"), min_quality_needs_column),
           Rule(("styles_per_doc", "templates", "routing"), styles_within_templates)),
    flags=(
        Flag("--manifest", required=True, help="manifest folder URL (crawl output)"),
        Flag("--run", required=True, role=RUN, aliases=("--out",),
             help="run URL; writes prompts/ and quarantine/"),
        # with routing the table's templates: --templates empty
        Flag("--templates", default="", param="templates",
             value="{{ '' if params.routing else params.templates | join(',') }}",
             help="ID[,ID...] of templates in --templates-url (default: shipped); with "
                  "--routing on, the templates the routes may use (empty: every template "
                  "the routing table names)"),
        Flag("--templates-url", type=optional_text, one_item=True, param="templates_url",
             role=INPUT,
             value="{{ params.templates_url or '' }}",  # empty: the shipped templates
             help="folder URL (file:// or s3://) of your own template JSON files; empty or "
                  "absent: the shipped templates (docs/templates.md)"),
        Flag("--routing", type=routing_switch, choices=("on", "off"), default="off",
             param="routing", value="{{ 'on' if params.routing else 'off' }}",
             help="on: each document draws its templates from its route in the routing "
                  "table (routing.json of --templates-url, else the shipped one) by its "
                  "domain and quality bucket (ADR 0139); off: from --templates, every "
                  "document alike"),
        Flag("--domain-column", type=optional_text, one_item=True, param="domain_column",
             value="{{ params.domain_column or '' }}",
             help="seed column naming each document's domain (web, code, math); absent or "
                  "empty: detected from the text"),
        Flag("--shard-tokens", type=positive_int, required=True, param="shard_tokens",
             help="token budget per shard (prompt + max new tokens)"),
        Flag("--styles-per-doc", type=positive_int, default=1, param="styles_per_doc",
             help="templates drawn per document"),
        Flag("--max-new-tokens", type=budget, default=256, param="max_new_tokens",
             help="tokens generated per row at most, or auto: the row's source tokens "
                  "times its template's max_ratio, plus a margin"),
        Flag("--max-model-len", type=context_window, default=2048, param="max_model_len",
             help="context window: a document whose prompt and budget do not fit it is "
                  "cut into chunks that do"),
        Flag("--text-column", default="text", param="text_column",
             help="the seed files' text column"),
        Flag("--id-column", default="id", param="id_column",
             help="the seed files' document id column"),
        # empty values mean unset: the DAG renders an optional Param as one --flag=VALUE
        Flag("--quality-column", type=optional_text, one_item=True, param="quality_column",
             value="{{ params.quality_column or '' }}",
             help="numeric column scoring each document (with --min-quality)"),
        Flag("--min-quality", type=number_or_unset, one_item=True, param="min_quality",
             value="{{ '' if params.min_quality is none else params.min_quality }}",
             help="stitch only documents whose --quality-column is >= this"),
        Flag("--seed", type=seed, default=0, help="seed of the styles drawn per document"),
        Flag("--model", param="model", help="model folder with tokenizer.json"),
        Flag("--master", default="local[*]", param="spark_master", help="Spark master URL"),
        Flag("--partitions", type=positive_int, default=8, param="spark_partitions",
             help="Spark partitions for reading, sorting and shuffles (scale out: about 2-3 "
                  "per executor core)"),
        Flag("--executors", type=positive_int, param="spark_executors",
             help="executors on a cluster master (spark://, k8s://); ignored locally"),
        Flag("--executor-cores", type=positive_int, param="spark_executor_cores",
             help="cores per executor"),
        Flag("--executor-memory", param="spark_executor_memory",
             help="JVM heap per executor, e.g. 4g"),
    ))

REPHRASE = Step(
    "rephrase", "vLLM: rephrase prompt shards, checkpointed", "synthfactory.rephrase.command",
    GPU, reads=(paths.PROMPTS,), writes=(paths.GENERATED,),
    rules=(Rule(("engine_args", "max_model_len"), engine_window_not_smaller),
           Rule(("engine", "engine_args"), server_engine_takes_no_engine_args)),
    flags=(
        Flag("--shard", action="append", required=True, role=SHARD,
             help="prompt shard URL; repeat for a shard group"),
        Flag("--run", role=RUN, aliases=("--out",),
             help="run URL (default: the shard's run); gets generated/, quarantine/"),
        Flag("--model", param="model", help="model folder or name"),
        Flag("--engine-args", param="engine_args", value="{{ params.engine_args | tojson }}",
             help="JSON object or @file for vllm.LLM"),
        # plan passes the window from prompts/shards.json: the one stitch cut for
        Flag("--max-model-len", type=context_window,
             help="the context window the shards were cut for (stitch's max_model_len; plan "
                  "passes it from prompts/shards.json): the engine's max_model_len, unless "
                  "--engine-args sets a larger one; an engine window smaller than it fails "
                  "the task before any generation. Default: the engine's own"),
        Flag("--max-new-tokens", type=budget, default=AUTO, param="max_new_tokens",
             help="one budget for every row; default (auto): each row's own, the shard's "
                  "max_new_tokens column"),
        Flag("--temperature", type=temperature, default=0.7, param="temperature",
             help="sampling temperature (0: greedy)"),
        Flag("--top-p", type=probability, default=0.95, help="nucleus sampling's top-p"),
        Flag("--checkpoint-rows", type=positive_int, default=64, param="checkpoint_rows",
             help="rows per checkpoint part"),
        Flag("--max-attempts", type=positive_int, default=3, param="max_attempts",
             help="attempts per row: a row the gate's per-row checks reject for a reason "
                  "another sample can fix is generated again, up to this many times "
                  "(1: never; docs/adr/0141)"),
        Flag("--repair", choices=("trim", "none"), default="trim", param="repair",
             help="trim: an output stopped at its budget is cut back to its longest whole-"
                  "sentence prefix that passes every check, marked trimmed (no GPU); none: "
                  "never (with --max-attempts 1, the behaviour before docs/adr/0141)"),
        # docs/adr/0150: an attempt is paid for once per request key
        Flag("--replay", choices=("on", "off"), default="on", param="replay",
             value="{{ 'on' if params.replay else 'off' }}",
             help="on: an attempt whose request key (request, template, model, engine "
                  "settings, sampling, attempt) matches one committed before is replayed "
                  "from that commit, not generated; off: every attempt is generated anew "
                  "(the run's attempts are still indexed for later runs)"),
        Flag("--replay-from", type=optional_text, one_item=True, param="replay_from",
             value="{{ params.replay_from or '' }}",
             help="replay from this folder's replay_index/ ({output_root}/{pipeline}) or "
                  "from this one run folder, instead of the run's own pipeline folder; "
                  "default: the run's own"),
        # 0 would never submit a request and spin forever, hence positive_int
        Flag("--max-in-flight", type=positive_int, default=256,
             help="requests queued in the engine at once"),
        Flag("--replicas", type=positive_int, default=1, param="replicas",
             help="engine replicas (Ray actors) pulling this task's shards; 1 without "
                  "--ray-address runs in this process, without Ray"),
        Flag("--gpus-per-replica", type=non_negative_float,
             help="GPUs per replica (tensor parallel size); default 1 on a GPU node, 0 on "
                  "the CPU build"),
        Flag("--ray-address", help="join this Ray cluster (\"auto\" inside a KubeRay RayJob)"),
        Flag("--replicas-per-node", type=positive_int,
             help="Ray: pin K replicas to each node (the first nodes with room for K); a "
                  "node that dies takes its replicas with it and their shards go to the "
                  "surviving nodes' replicas. Default: Ray places replicas by their "
                  "resources"),
        Flag("--max-shard-attempts", type=positive_int, default=3,
             help="Ray: times a shard is handed out again after its replica died"),
        Flag("--engine", param="engine", value=ENGINE_VALUE, defined_by="engine registry",
             help="the engine (vllm, endpoint, echo) and its own flags: the engine "
                  "registry's entries (docs/adr/0135)"),
        # named here for the orchestration dry runs' argv (operators/settings.py)
        Flag("--echo-delay-s", defined_by="engine registry",
             help="--engine echo: seconds each poll of the stand-in engine takes"),
    ))

# validate's options that take a Param. The mapped validate task's argv is plan's XCom,
# which Airflow does not template: plan takes them (without a lineage role: of the
# benchmarks it reads only their schemas, to refuse a bad file or column as validate
# would, before the rephrase wave) and puts them in each group's validate argv.
GATE_FLAGS = (
    Flag("--benchmarks", type=optional_text, one_item=True, param="benchmarks",
         value="{{ params.benchmarks or '' }}", role=INPUT,
         help="folder URL of benchmark files (*.parquet, *.jsonl: one benchmark per file, "
              "its text in columns of strings or lists of strings): a row whose output or "
              "source shares a word n-gram with one is rejected as contaminated "
              "(docs/decontamination.md); default: none"),
    # a named column missing from a file, or not text: a bad input (exit 3, one line
    # naming the file), reported by plan before the rephrase wave and by validate before
    # any row is gated (quality/decontaminate.py check_files)
    Flag("--benchmark-columns", type=column_names, one_item=True, param="benchmark_columns",
         value="{{ params.benchmark_columns or '' }}",
         help="the benchmark files' columns to read, comma-separated, each a column of "
              "strings or of lists of strings (each string a text of its own) in every "
              "file; default: every such column of each file"),
    # an int, not a checked type: n < 5 is a bad input (exit 3, one line), which plan and
    # validate report before any work (quality/decontaminate.py check_n)
    Flag("--decontaminate-n", type=int, default=13, param="decontaminate_n",
         help="words per n-gram of the decontamination check (at least 5)"),
)


PLAN = Step(
    "plan", "group shards for the rephrase wave and size the wave", "synthfactory.plan", CPU,
    reads=(paths.PROMPTS,), passes_on="rephrase", flags=(
        Flag("--run", required=True, role=RUN, help="run URL (reads prompts/shards.json)"),
        # the Param's name (issue 51); the old spelling stays a hidden alias
        Flag("--max-shard-groups", type=positive_int, required=True, param="max_shard_groups",
             aliases=("--max-groups",),
             help="at most this many rephrase tasks"),
        # the deployment's, not a Param: the DAG reads [core] max_map_length where it is
        # parsed and passes it (fixed); Airflow refuses a run that maps more
        Flag("--max-map-length", type=positive_int,
             help="Airflow's [core] max_map_length: more groups than this are merged into "
                  "this many, with one line saying so (default: no limit)"),
        *(replace(flag, role=None, help=f"passed on to every validate: {flag.help}")
          for flag in GATE_FLAGS),
        Flag("rephrase_options", nargs=argparse.REMAINDER,
             help="-- then options passed to every `synthfactory rephrase`"),
    ))

VALIDATE = Step(
    "validate", "per-shard token statistics and quality flags", "synthfactory.validate", CPU,
    reads=(paths.PROMPTS, paths.GENERATED), writes=(paths.VERDICTS, paths.REJECTED), flags=(
        Flag("--shard", action="append", required=True, role=SHARD, help="prompt shard URL"),
        Flag("--run", role=RUN, help="run URL (default: the shard's run)"),
        Flag("--max-repetition", type=fraction, default=0.5,
             help="flag outputs whose repeated 4-gram share exceeds this"),
        *GATE_FLAGS,
    ))

JOIN = Step(
    "join", "join each document's chunk outputs back, in order", "synthfactory.join", CPU,
    reads=(paths.PROMPTS, paths.GENERATED, paths.VERDICTS), writes=(paths.JOINED,),
    flags=(RUN_FLAG,))

REGISTER = Step(
    "register", "register committed shards in an Iceberg table",
    "synthfactory.catalog.command", CPU, reads=(paths.JOINED,), table="writes", flags=(
        RUN_FLAG, TABLE_FLAG, *CATALOG_FLAGS,
        Flag("--pipeline", help="pipeline name (default: from the run URL)"),
        Flag("--interval", value="{{ data_interval_start.isoformat() }}/"
                                 "{{ data_interval_end.isoformat() }}",
             help="data interval START/END (default: from the run URL)"),
        AIRFLOW_RUN_ID,
        Flag("--include-rejected", nargs="?", one_item=True, const=True, default=False, type=yes_no,
             metavar="true|false", param="include_rejected",
             value="{{ params.include_rejected | lower }}",
             help="register every generated row, the quality gate's rejected ones too "
                  "(their usable column is false); default: usable rows only"),
    ))

AUDIT = Step(
    "audit", "check a run end to end: nothing lost, duplicated or stale", "synthfactory.audit",
    CPU, reads=(paths.MANIFEST, paths.PROMPTS, paths.GENERATED, paths.VERDICTS, paths.JOINED),
    table="reads", flags=(
        RUN_FLAG,
        Flag("--table", param="table", role=TABLE,
             help="NAMESPACE.TABLE the run was registered into; with it the catalog rows "
                  "are checked too"),
        # the seeds' ids, as stitch read them
        Flag("--id-column", default="id", param="id_column",
             help="document id column of the seeds"),
        *CATALOG_FLAGS,
    ))

LICENSE_FLAG = Flag("--license", default="other", param="license",
                    help="the data's license on the card: an SPDX id (apache-2.0, "
                         "cc-by-4.0, odc-by-1.0, ...) or other")
DAG_ID = Flag("--dag-id", value="{{ dag.dag_id }}", help="recorded in the report")

CARD = Step(
    "card", "write the run's dataset card (Hugging Face format)",
    "synthfactory.export.card_command", CPU,
    reads=(paths.MANIFEST, paths.PROMPTS, paths.GENERATED, paths.VERDICTS, paths.JOINED),
    writes=(paths.CARD,), flags=(
        RUN_FLAG, LICENSE_FLAG,
        Flag("--out", role=OUTPUT,
             help=f"where to write the card (default {{run}}/{paths.CARD})"),
        replace(DAG_ID, help="recorded on the card"), AIRFLOW_RUN_ID,
    ))

EXPORT = Step(
    "export", "export the usable rows as Parquet with the dataset card (and to the Hub)",
    "synthfactory.export.command", CPU,
    reads=(paths.MANIFEST, paths.PROMPTS, paths.GENERATED, paths.VERDICTS, paths.JOINED),
    flags=(
        RUN_FLAG,
        Flag("--out", required=True, param="export_url", role=OUTPUT,
             value="{{ params.export_url or '' }}",
             help="folder URL (file:// or s3://): data/train-NNNNN.parquet and README.md"),
        LICENSE_FLAG,
        Flag("--max-file-mb", type=positive_float, default=256.0,
             help="most row data per Parquet file, in MiB"),
        Flag("--hub-repo", type=optional_text, one_item=True, param="hub_repo_id",
             value="{{ params.hub_repo_id or '' }}",
             help="also push the folder to this Hugging Face dataset repo (OWNER/NAME); the "
                  "token is $HF_TOKEN (hub_conn_id). Default: no push"),
        replace(DAG_ID, help="recorded on the card"), AIRFLOW_RUN_ID,
    ))

SMOKE = Step(
    "smoke", "train a tiny model on synthetic lengths", "synthfactory.training.smoke_command",
    GPU, reads=(paths.JOINED,), flags=(
        Flag("--spec", group="source", help="length spec JSON file (URL or path)"),
        Flag("--run", group="source", role=RUN, aliases=("--from-run",),
             help="run URL: lengths (or tokens) of its joined rows"),
        Flag("--steps", type=positive_int, default=10, param="smoke_steps",
             help="training steps"),
        Flag("--real-tokens", action="store_true",
             help="with --run: train on the tokenized output_text"),
        Flag("--tokenizer", help="model folder holding tokenizer.json"),
        Flag("--vocab-size", type=positive_int, help="default: the tokenizer's, else 49152"),
        Flag("--token", choices=("random", "constant"), default="random",
             help="synthetic tokens; constant is unfit for MoE routing tests"),
        Flag("--seq-len", type=positive_int, default=128, help="tokens per training sequence"),
        Flag("--batch-size", type=positive_int, default=4, help="sequences per step"),
        Flag("--lr", type=positive_float, default=3e-3, help="learning rate"),
        Flag("--seed", type=seed, default=0, help="seed of the synthetic tokens and the model"),
        Flag("--dp", type=positive_int, default=1, help="data-parallel ranks (for sharding)"),
        Flag("--dp-rank", type=non_negative_int, default=0, help="this rank"),
        Flag("--overlong", choices=("drop", "truncate"), default="drop",
             help="a document longer than --seq-len: dropped or cut"),
        Flag("--packing", choices=("first_fit", "best_fit", "concat_then_split"),
             default="first_fit", help="how documents are packed into sequences"),
        Flag("--num-packing-bins", type=positive_int, default=16,
             help="open bins of the first- and best-fit packers"),
        Flag("--d-model", type=positive_int, default=64, help="the tiny model's width"),
        Flag("--layers", type=positive_int, default=2, help="the tiny model's layers"),
        Flag("--heads", type=positive_int, default=4, help="the tiny model's heads"),
        Flag("--device", choices=("auto", "cpu", "cuda"), default="auto",
             help="where to train"),
        Flag("--output", help="also write the summary JSON here (URL or path)"),
    ))

REPORT = Step(
    "report", "write a run's report.json and figures", "synthfactory.report.command", CPU,
    reads=(paths.MANIFEST, paths.PROMPTS, paths.GENERATED, paths.VERDICTS),
    writes=(paths.REPORT,), flags=(
        Flag("--run", required=True, role=RUN, help="run folder URL (file:// or s3://)"),
        Flag("--gpu-hour-usd", type=price, aliases=("--gpu-hour-price",),
             help=f"USD per device hour for the cost figure (default ${GPU_HOUR_USD_ENV} or "
                  f"{DEFAULT_GPU_HOUR_USD})"),
        DAG_ID, AIRFLOW_RUN_ID,
    ))

SWEEP = Step(
    "sweep", "grid-search vLLM engine arguments", "synthfactory.sweep.command", GPU, flags=(
        Flag("--shard", required=True, param="shard", role=INPUT,
             help="prompt shard URL (stitch output)"),
        Flag("--model", param="model", help="model folder (default: the embedded one)"),
        Flag("--grid", required=True, param="grid", value="{{ params.grid | tojson }}",
             help="JSON/YAML file or URL, or inline JSON: a list of engine-argument objects "
                  "or a {param: [values]} product"),
        Flag("--out", required=True, role=OUTPUT,
             help="sweep folder URL (results, PNG, winner)"),
        Flag("--gpu-hour-usd", type=price, aliases=("--gpu-hour-cost",), param="gpu_hour_usd",
             help="USD per device-hour, for cost per billion output tokens"),
        Flag("--sample-rows", type=positive_int, default=32, param="sample_rows",
             help="prompt rows measured per trial (spread over the shard)"),
        Flag("--max-new-tokens", type=token_count, default=128, param="max_new_tokens",
             help="tokens generated per row"),
        Flag("--warmup-rows", type=non_negative_int, default=4,
             help="short requests run before the timed sample"),
        Flag("--safety-margin", type=float, default=0.1, param="safety_margin",
             help="fraction each grid entry's batch and memory knobs are scaled down by "
                  "before it is measured"),
        Flag("--rounds", type=int, default=3,
             help="rounds the finalist and the defaults are measured, alternating (at least "
                  "3); the halving may add more"),
        Flag("--temperature", type=temperature, default=0.7, help="sampling temperature"),
        Flag("--top-p", type=probability, default=0.95, help="nucleus sampling's top-p"),
        Flag("--ignore-eos", action="boolean", default=True,
             help="generate exactly --max-new-tokens per row, so every configuration does "
                  "the same work (default: on)"),
        Flag("--apply", action="boolean", default=True, param="apply",
             help="write the decision to {model}/synthfactory-engine.json"),
        Flag("--retry-failed", action="store_true",
             help="rerun trials that failed in an earlier run"),
        Flag("--trial-timeout", type=positive_float, default=1800,
             help="seconds one trial may take"),
        Flag("--engine", param="engine", value=ENGINE_VALUE, defined_by="engine registry",
             help="the engine measured (vllm or endpoint) and its own flags: the engine "
                  "registry's entries (docs/adr/0135)"),
    ))

STEPS: dict[str, Step] = {step.name: step for step in (
    CRAWL, STITCH, PLAN, REPHRASE, VALIDATE, JOIN, REGISTER, AUDIT, CARD, EXPORT, SMOKE,
    REPORT, SWEEP)}
# Params that reach a step as environment, never argv (a connection's secrets)
ENVIRONMENT_PARAMS = {"catalog_conn_id": "register, audit: the catalog URI",
                      "endpoint_conn_id": "rephrase, sweep: the endpoint's URL, model and key",
                      "hub_conn_id": "export: the Hugging Face token ($HF_TOKEN)"}
