"""``synthfactory stitch``: the Spark prompt-stitching step."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time

from synthfactory import storage
from synthfactory.contract import steps
from synthfactory.errors import PermanentError, RetryableError, SynthfactoryError
from synthfactory.layout import RunLayout
from synthfactory.model import default_model_dir
from synthfactory.stitch.inputs import fingerprint, manifest_entries
from synthfactory.stitch.job import StitchConfig, stitch
from synthfactory.stitch.reader import check_first_file
from synthfactory.stitch.routing import load_routing
from synthfactory.stitch.spark_conf import session_conf
from synthfactory.stitch.spark_errors import (
    check_master,
    quiet_task_logs,
    spark_failure,
    spark_reason,
)
from synthfactory.stitch.spark_session import spark_session
from synthfactory.stitch.templates import load_folder, load_templates
from synthfactory.stitch.tokens import tokenizer_json

log = logging.getLogger(__name__)


def manifest_files(manifest_url: str) -> list[str]:
    parts = [u for u in storage.list_files(manifest_url, suffix=".parquet")
             if u.rsplit("/", 1)[-1].startswith("part-")]
    if not parts:
        raise SynthfactoryError(f"{manifest_url}: no manifest part-*.parquet files")
    keys: list[str] = []
    for part in parts:
        table = storage.read_table(part)
        if "key" not in table.column_names:
            raise SynthfactoryError(f"{part}: missing column 'key'")
        keys += table.column("key").to_pylist()
    for key in keys[:1]:
        if "://" not in key:
            raise SynthfactoryError(f"{manifest_url}: key {key!r} is not a URL")
    return sorted(set(keys))


def run(args: argparse.Namespace) -> dict:
    # the rules the trigger form's check_params runs too (the steps table's)
    values = steps.cli_values("stitch", args)
    found = steps.problems(["stitch"], values, steps.cli_name("stitch", values))
    if found:
        raise PermanentError("; ".join(found))
    names = [n.strip() for n in args.templates.split(",") if n.strip()]
    folder = args.templates_url or None  # the DAG sends "" for shipped
    routing = None
    if args.routing == "on":
        if names:
            load_templates(names, folder)  # an unknown name: the line it always was
        routing = load_routing(folder, load_folder(folder), names or None)
        templates = load_templates(routing.template_ids(), folder)
        widest = routing.widest()
        if not 1 <= args.styles_per_doc <= widest:
            raise SynthfactoryError(
                f"--styles-per-doc {args.styles_per_doc}: must be between 1 and {widest}, "
                f"the most templates one route of {routing.source} allows")
    else:
        templates = load_templates(names, folder)
        if not 1 <= args.styles_per_doc <= len(templates):
            raise SynthfactoryError(
                f"--styles-per-doc {args.styles_per_doc}: must be between 1 and the "
                f"{len(templates)} template(s) given"
            )
    files = manifest_files(args.manifest)
    check_first_file(files[0], [args.id_column, args.text_column, args.quality_column,
                                args.domain_column])
    cfg = StitchConfig(
        files=files, run=RunLayout(storage.normalize(args.run)), templates=templates,
        model_dir=str(args.model or default_model_dir()), shard_tokens=args.shard_tokens,
        styles_per_doc=args.styles_per_doc, max_new_tokens=args.max_new_tokens,
        max_model_len=args.max_model_len, text_column=args.text_column,
        id_column=args.id_column, quality_column=args.quality_column,
        min_quality=args.min_quality, domain_column=args.domain_column, routing=routing,
        seed=args.seed, master=args.master,
        partitions=args.partitions,
    )
    check_master(args.master)
    started = time.monotonic()
    # a missing tokenizer fails here, not after Spark starts
    cfg = dataclasses.replace(cfg, inputs=fingerprint(
        cfg, manifest_entries(args.manifest), tokenizer_json(cfg.model_dir)))
    done = _stitched(cfg)
    if done is not None:
        log.info("%s is stitched from these inputs (%s): nothing to do",
                 cfg.run.shards_json, cfg.inputs)
        return {**_summary(cfg, done, started), "status": "already stitched"}
    conf = session_conf(args.master, args.executors, args.executor_cores, args.executor_memory)
    try:
        spark = spark_session(args.master, conf=conf)
    except Exception as exc:  # no Java, no cluster: Spark's own words, on one line
        # retried: a cluster out of reach is the usual cause (a missing Java is not, but
        # the two are not told apart here)
        raise RetryableError(
            f"--master {args.master}: Spark did not start ({spark_reason(exc)})") from exc
    try:
        quiet_task_logs(spark)
        plan = stitch(cfg, spark)
    except SynthfactoryError:
        raise
    except Exception as exc:  # Spark wraps worker errors: ours by its record, else the cause
        raise spark_failure(exc, args.manifest) from exc
    finally:
        spark.stop()
    log.info("stitched %d rows into %d shards (%d quarantined)",
             plan["prompt_rows"], len(plan["shards"]), plan["quarantined"])
    return {**_summary(cfg, plan, started), "status": "stitched"}


def _stitched(cfg: StitchConfig) -> dict | None:
    """The run's shards.json when it was written from ``cfg.inputs`` and every shard it
    names is there, else None (none yet, another stitch's, one from before the inputs
    were recorded, unreadable, or a shard deleted since: then it is stitched again).
    The shards are seen in one listing of the prompts folder (a thousand keys a request
    on S3), not a request per shard."""
    try:
        done = storage.read_json_or_none(cfg.run.shards_json)
    except (SynthfactoryError, ValueError) as exc:
        log.warning("%s: unreadable (%s); stitching again", cfg.run.shards_json, exc)
        return None
    if not isinstance(done, dict) or done.get("inputs") != cfg.inputs:
        return None
    there = {storage.normalize(u) for u in storage.list_files(cfg.run.prompts, ".parquet")}
    missing = [s["url"] for s in done.get("shards", []) if storage.normalize(s["url"])
               not in there]
    if missing:
        log.warning("%s: %d shard(s) it names are gone (%s ...); stitching again",
                    cfg.run.shards_json, len(missing), missing[0])
        return None
    return done


def _summary(cfg: StitchConfig, plan: dict, started: float) -> dict:
    return {
        "run": cfg.run.run_url, "shards_json": cfg.run.shards_json,
        "shards": len(plan["shards"]), "rows_in": plan["rows_in"],
        "prompt_rows": plan["prompt_rows"], "quarantined": plan["quarantined"],
        "chunked_documents": plan["chunked_documents"], "chunks": plan["chunks"],
        "tokens": sum(s["tokens"] for s in plan["shards"]),
        "seconds": round(time.monotonic() - started, 1),
    }
