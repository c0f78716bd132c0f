"""The stitch Spark job: documents x templates -> right-sized prompt shards + quarantine."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from functools import partial

import pyarrow as pa

from synthfactory import storage
from synthfactory.cli_types import AUTO
from synthfactory.contract import ShardsJson, paths
from synthfactory.errors import SynthfactoryError
from synthfactory.faults import pause_point
from synthfactory.layout import RunLayout
from synthfactory.stitch import budget, reader, sharding, tokens
from synthfactory.stitch.templates import PLACEHOLDER, PromptTemplate, write_copies

log = logging.getLogger(__name__)

READER_DDL = "id string, text string, quality double, source string, source_row long, reason string"
SHARD_COLUMNS = ["id", "template_id", "template_version", "template_hash", "style", "system",
                 "user", "prompt_tokens", "max_new_tokens"]
ORDER = ["source", "source_row", "template_id"]


@dataclass(frozen=True)
class StitchConfig:
    files: list[str]
    run: RunLayout
    templates: list[PromptTemplate]
    model_dir: str
    shard_tokens: int
    styles_per_doc: int = 1
    max_new_tokens: int | str = 256  # or "auto": per row (stitch/budget.py)
    max_model_len: int = 2048
    text_column: str = "text"
    id_column: str = "id"
    quality_column: str | None = None
    min_quality: float | None = None
    seed: int = 0
    master: str = "local[*]"
    partitions: int = 8  # read, range and shuffle partitions; raise it with the executors


def _too_long_reason(prompt: int, new: int, limit: int) -> str:
    return f"too long for the context window ({prompt} prompt + {new} new tokens > {limit})"


def stitch(cfg: StitchConfig, spark) -> ShardsJson:
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.types import LongType, StructField, StructType

    spark.conf.set("spark.sql.shuffle.partitions", str(cfg.partitions))
    tok_json = tokens.tokenizer_json(cfg.model_dir)
    bc_tok = spark.sparkContext.broadcast(tok_json)

    @pandas_udf("long")
    def doc_tokens(text):  # a pandas Series in, one Rust batch call per Arrow batch
        import pandas as pd

        return pd.Series(tokens.count_tokens(bc_tok.value, text.fillna("").tolist()))

    files = spark.createDataFrame([(u,) for u in cfg.files], "url string")
    files = files.repartition(max(1, min(len(cfg.files), cfg.partitions)))
    rows = files.mapInArrow(
        partial(reader.read_files, id_column=cfg.id_column, text_column=cfg.text_column,
                quality_column=cfg.quality_column),
        READER_DDL,
    )
    # A repeated id would make (id, template) ambiguous downstream: keep the first.
    first = Window.partitionBy("id").orderBy("source", "source_row")
    rows = rows.withColumn(
        "reason",
        F.when(F.col("reason").isNotNull(), F.col("reason"))
        .when(F.row_number().over(first) > 1, F.lit("duplicate id")),
    )
    if cfg.min_quality is not None:
        rows = rows.withColumn(
            "reason",
            F.when(F.col("reason").isNotNull(), F.col("reason"))
            .when(F.col("quality").isNull(), F.lit("quality missing"))
            .when(F.col("quality") < cfg.min_quality,
                  F.lit(f"quality below threshold {cfg.min_quality}")),
        )
    rows = rows.persist()

    good = rows.filter(F.col("reason").isNull()).withColumn("doc_tokens", doc_tokens("text"))
    templates = spark.createDataFrame(
        [
            (t.id, t.version, t.hash, t.style, t.system, t.user,
             tokens.template_overhead(tok_json, t.system, t.render_user("")),
             budget.budget_ratio(t))
            for t in cfg.templates
        ],
        "template_id string, template_version int, template_hash string, style string, "
        "system string, user_template string, overhead long, budget_ratio double",
    )
    # K styles per document, chosen by a hash of (id, seed, template): stable on rerun.
    pick = Window.partitionBy("id").orderBy(
        F.xxhash64("id", F.lit(cfg.seed), "template_id"), "template_id")
    selected = (
        good.crossJoin(F.broadcast(templates))
        .withColumn("pick", F.row_number().over(pick))
        .filter(F.col("pick") <= cfg.styles_per_doc)
        .withColumn("prompt_tokens", F.col("doc_tokens") + F.col("overhead"))
        .persist()  # read twice (prompts and the too-long check): tokenise once
    )
    auto = cfg.max_new_tokens == AUTO
    least_new = budget.MIN_NEW_TOKENS if auto else cfg.max_new_tokens
    if auto:  # sized to the source, capped by what the context window has left
        new_tokens = F.least(
            F.ceil(F.col("doc_tokens") * F.col("budget_ratio")).cast("long") + budget.MARGIN,
            F.lit(cfg.max_model_len) - F.col("prompt_tokens"))
    else:
        new_tokens = F.lit(cfg.max_new_tokens)
    per_doc = selected.groupBy("id").agg(F.max("prompt_tokens").alias("longest"))
    too_long = per_doc.filter(F.col("longest") > cfg.max_model_len - least_new)
    too_long_udf = F.udf(lambda n: _too_long_reason(n, least_new, cfg.max_model_len))
    prompts = (
        selected.join(too_long.select("id"), "id", "left_anti")
        .withColumn("user", F.expr(f"replace(user_template, '{{{PLACEHOLDER}}}', text)"))
        .withColumn("max_new_tokens", new_tokens.cast("int"))
        .withColumn("cost_tokens", F.col("prompt_tokens") + F.col("max_new_tokens"))
        .select(*SHARD_COLUMNS, "source", "source_row", "cost_tokens")
    )
    ordered = (prompts.repartitionByRange(cfg.partitions, *ORDER)
               .sortWithinPartitions(*ORDER).persist())
    totals = {r["partition"]: r["tokens"] for r in ordered.mapInArrow(
        sharding.partition_totals, "partition int, tokens long").collect()}
    offsets = sharding.prefix_offsets(totals, ordered.rdd.getNumPartitions())
    with_shard = ordered.mapInArrow(
        partial(sharding.assign_shards, offsets=offsets, budget=cfg.shard_tokens),
        StructType([*ordered.schema.fields, StructField("shard", LongType())]),
    ).persist()
    shard_ids = sorted(r["shard"] for r in with_shard.select("shard").distinct().collect())
    dense = {raw: i for i, raw in enumerate(shard_ids)}  # oversized rows can skip an id

    storage.delete(cfg.run.prompts)  # a rerun rewrites the same names with the same rows
    write_copies(cfg.templates, cfg.run.prompt_templates)  # validate's gate reads them
    def write_shard(table: pa.Table) -> pa.Table:  # PySpark 4.3 needs hints, not a partial
        return _write_shard(table, cfg.run, dense)

    written = with_shard.groupBy("shard").applyInArrow(
        write_shard,
        "name string, url string, rows long, tokens long",
    ).collect()
    shards = sorted((r.asDict() for r in written), key=lambda s: s["name"])

    quarantine = (
        rows.filter(F.col("reason").isNotNull()).select("id", "source", "source_row", "reason")
        .unionByName(
            # usable rows only: a duplicate of a too-long document is already quarantined
            rows.filter(F.col("reason").isNull()).join(too_long, "id").select(
                "id", "source", "source_row", too_long_udf(F.col("longest")).alias("reason"))
        )
        .repartitionByRange(cfg.partitions, "source", "source_row")
        .sortWithinPartitions("source", "source_row")
    )
    quarantine_dir = cfg.run.stitch_quarantine
    storage.delete(quarantine_dir)
    # written per partition by the executors: the driver only sees counts per reason
    reasons = Counter({r["reason"]: r["rows"] for r in quarantine.mapInArrow(
        partial(_write_quarantine, folder=quarantine_dir), "reason string, rows long",
    ).groupBy("reason").agg(F.sum("rows").alias("rows")).collect()})
    quarantined = sum(reasons.values())

    rows_in = rows.count()
    prompt_rows = sum(s["rows"] for s in shards)
    if prompt_rows != (rows_in - quarantined) * cfg.styles_per_doc:
        raise SynthfactoryError(
            f"stitch accounting failed: {rows_in} rows in, {quarantined} quarantined, "
            f"{prompt_rows} prompt rows for {cfg.styles_per_doc} styles per document"
        )
    plan: ShardsJson = {
        "shards": shards,
        "templates": [{"id": t.id, "version": t.version, "style": t.style, "hash": t.hash}
                      for t in cfg.templates],
        "rows_in": rows_in,
        "prompt_rows": prompt_rows,
        "quarantined": quarantined,
        "quarantine_reasons": dict(sorted(reasons.items())),
        "quarantine_url": quarantine_dir if quarantined else None,
        "styles_per_doc": cfg.styles_per_doc,
        "shard_tokens": cfg.shard_tokens,
        "max_new_tokens": cfg.max_new_tokens,
        "max_model_len": cfg.max_model_len,
        "seed": cfg.seed,
        "files": len(cfg.files),
    }
    pause_point("stitch:before-shards-json")
    storage.write_json(cfg.run.shards_json, plan)
    for frame in (rows, selected, ordered, with_shard):
        frame.unpersist()
    return plan


def _write_quarantine(batches, folder: str):
    """``mapInArrow`` body: this partition's quarantine rows -> ``part-{partition}``."""
    from pyspark import TaskContext

    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    name = f"part-{TaskContext.get().partitionId():05d}.parquet"
    storage.write_table(table, storage.join(folder, name))
    counts = Counter(table.column("reason").to_pylist())
    yield pa.RecordBatch.from_arrays(
        [pa.array(list(counts), pa.string()), pa.array(list(counts.values()), pa.int64())],
        names=["reason", "rows"],
    )


def _write_shard(table: pa.Table, run: RunLayout, dense: dict[int, int]) -> pa.Table:
    """``applyInArrow`` body: one shard's rows -> one deterministically named file."""
    index = dense[table.column("shard")[0].as_py()]
    table = table.sort_by([(c, "ascending") for c in ORDER])
    url = run.prompt_shard(index)
    storage.write_table(table.select(SHARD_COLUMNS), url)
    tokens_sum = int(pa.compute.sum(table.column("cost_tokens")).as_py())
    return pa.table({"name": [paths.shard_name(index)], "url": [url], "rows": [table.num_rows],
                     "tokens": [tokens_sum]})
