"""The stitch Spark job: documents x templates -> right-sized prompt shards + quarantine.

The plan is here, whole; what runs on the executors for it is beside it: the chunk pass
(chunk_pass.py) and the shard and quarantine files (shard_files.py)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections import Counter
from functools import partial

import pyarrow as pa

from synthfactory import storage
from synthfactory.contract import DEBUG_ENV, RUN_FORMAT, ShardsJson
from synthfactory.contract.flag_types import AUTO
from synthfactory.errors import SynthfactoryError
from synthfactory.faults import pause_point
from synthfactory.stitch import budget, chunk_pass, chunks, reader, shard_files, sharding, tokens
from synthfactory.stitch.config import StitchConfig
from synthfactory.stitch.routing import RoutingTable
from synthfactory.stitch.templates import PLACEHOLDER, write_copies

log = logging.getLogger(__name__)

READER_DDL = ("id string, text string, quality double, source string, source_row long, "
              "reason string, domain string")


def broadcast(spark, value):
    """``sparkContext.broadcast(value)``, without the traceback pyspark prints to stderr
    when the value cannot be written to its local folder (a full disk): the failure is
    still raised, and the command says it in one line (spark_errors.spark_failure)."""
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stderr(quiet):
            return spark.sparkContext.broadcast(value)
    except Exception:
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            sys.stderr.write(quiet.getvalue())
        raise


def stitch(cfg: StitchConfig, spark) -> ShardsJson:
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.types import LongType, StructField, StructType

    spark.conf.set("spark.sql.shuffle.partitions", str(cfg.partitions))
    tok_json = tokens.tokenizer_json(cfg.model_dir)
    bc_tok = broadcast(spark, tok_json)

    @pandas_udf("long")
    def doc_tokens(text):  # a pandas Series in, one Rust batch call per Arrow batch
        import pandas as pd

        return pd.Series(tokens.count_tokens(bc_tok.value, text.fillna("").tolist()))

    files = spark.createDataFrame([(u,) for u in cfg.files], "url string")
    files = files.repartition(max(1, min(len(cfg.files), cfg.partitions)))
    rows = files.mapInArrow(
        partial(reader.read_files, id_column=cfg.id_column, text_column=cfg.text_column,
                quality_column=cfg.quality_column, domain_column=cfg.domain_column),
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
    if cfg.routing is not None and cfg.quality_column and cfg.min_quality is None:
        rows = rows.withColumn(  # a document without a score has no bucket
            "reason",
            F.when(F.col("reason").isNotNull(), F.col("reason"))
            .when(F.col("quality").isNull(), F.lit("quality missing")))
    rows = rows.persist()

    good = rows.filter(F.col("reason").isNull()).withColumn("doc_tokens", doc_tokens("text"))
    if cfg.routing is not None:
        good = good.withColumn("bucket", _bucket(cfg.routing, bool(cfg.quality_column)))
    auto = cfg.max_new_tokens == AUTO
    reserve = chunks.context_reserve(partial(tokens.count_tokens, tok_json))
    template_rows = []
    for t in cfg.templates:
        overhead = tokens.template_overhead(tok_json, t.system, t.render_user(""))
        ratio = budget.budget_ratio(t)
        template_rows.append((t.id, t.version, t.hash, t.style, t.system, t.user, overhead,
                              ratio, chunk_pass.chunk_limit(cfg, overhead + reserve, ratio)))
    templates = spark.createDataFrame(
        template_rows,
        "template_id string, template_version int, template_hash string, style string, "
        "system string, user_template string, overhead long, budget_ratio double, "
        "chunk_limit long",
    )

    def new_tokens(source_tokens):  # the full budget, never capped: what does not fit is cut
        if auto:  # sized to the source (stitch/budget.py)
            return F.ceil(source_tokens * F.col("budget_ratio")).cast("long") + budget.MARGIN
        return F.lit(cfg.max_new_tokens).cast("long")

    # K styles per document, chosen by a hash of (id, seed, template): stable on rerun.
    pick = Window.partitionBy("id").orderBy(
        F.xxhash64("id", F.lit(cfg.seed), "template_id"), "template_id")
    if cfg.routing is None:  # every document draws from every template
        candidates = good.crossJoin(F.broadcast(templates))
    else:  # from its route's templates only: the same hash, so the same pick among them
        routes = spark.createDataFrame(cfg.routing.pairs(),
                                       "domain string, bucket string, template_id string")
        candidates = good.join(F.broadcast(routes.join(templates, "template_id")),
                               ["domain", "bucket"])
    selected = (
        candidates
        .withColumn("pick", F.row_number().over(pick))
        .filter(F.col("pick") <= cfg.styles_per_doc)
        .withColumn("prompt_tokens", F.col("doc_tokens") + F.col("overhead"))
        .withColumn("max_new_tokens", new_tokens(F.col("doc_tokens")))
        .persist()  # read three times (whole rows, chunk rows, the fit check): tokenise once
    )
    # A document fits when each of its K prompts and that row's full budget fit the window;
    # one that does not is cut into chunks sized for the tightest of its K templates.
    cost = F.col("prompt_tokens") + F.col("max_new_tokens")
    per_doc = selected.groupBy("id").agg(
        F.max(cost).alias("longest"),
        F.min("chunk_limit").alias("chunk_limit"),
        F.max("doc_tokens").alias("doc_tokens"),  # the same in each of its K rows
        F.count(F.lit(1)).alias("k"),  # its styles: styles_per_doc, or fewer on a route
        *([] if cfg.chunking else [F.max_by(F.struct("prompt_tokens", "max_new_tokens"),
                                            cost).alias("worst")]))
    fits = F.col("longest") <= cfg.max_model_len
    too_long = per_doc.filter(~fits).select("id", "chunk_limit")
    # Seed tokens, each document once, and how many documents do not fit (aggregates
    # only: three numbers reach the driver): every document read and tokenised, those kept
    # whole. A corpus with nothing too long skips everything below that handles it.
    seed = per_doc.agg(F.sum("doc_tokens").alias("seed"),
                       F.sum(F.when(fits, F.col("doc_tokens"))).alias("whole"),
                       F.count(F.when(~fits, F.lit(1))).alias("too_long"),
                       F.sum(F.when(fits, F.col("k"))).alias("whole_rows")).first()
    seed_tokens, whole_tokens = int(seed["seed"] or 0), int(seed["whole"] or 0)
    too_long_documents = int(seed["too_long"])
    expected_rows = int(seed["whole_rows"] or 0)  # prompt rows: K per whole document, ...
    chunked = parts = set_aside = None  # set_aside: documents quarantined for their length
    chunked_documents = chunk_rows = chunk_tokens = 0
    if cfg.chunking and too_long_documents:
        chunked = (
            selected.filter(F.col("pick") == 1).select("id", "text", "source", "source_row")
            .join(too_long, "id")
            .mapInArrow(partial(chunk_pass.chunk_documents, tok=bc_tok, window=cfg.max_model_len),
                        chunk_pass.CHUNK_DDL)
            .persist()
        )
        made = chunked.agg(
            F.countDistinct(F.when(F.col("reason").isNull(), F.col("id"))).alias("documents"),
            F.count(F.when(F.col("reason").isNull(), F.lit(1))).alias("chunks"),
            F.sum(F.when(F.col("reason").isNull(), F.col("chunk_tokens"))).alias("tokens"),
            F.count(F.when(F.col("reason").isNotNull(), F.lit(1))).alias("unsplittable"),
        ).first()
        chunked_documents, chunk_rows = int(made["documents"]), int(made["chunks"])
        chunk_tokens = int(made["tokens"] or 0)
        if chunk_rows:  # ... and K per chunk of a document cut into chunks
            expected_rows += int(
                chunked.filter(F.col("reason").isNull()).select("id")
                .join(per_doc.select("id", "k"), "id").agg(F.sum("k")).first()[0] or 0)
        if made["unsplittable"]:  # a unit no split can fit: the whole document, once
            set_aside = chunked.filter(F.col("reason").isNotNull()).select(
                "id", "source", "source_row", "reason")
    elif too_long_documents:  # chunking off: set aside as before chunks, whole and once
        set_aside = (
            selected.filter(F.col("pick") == 1).select("id", "source", "source_row")
            .join(per_doc.filter(~fits), "id")
            .select("id", "source", "source_row",
                    chunk_pass.too_long_reason(F.col("worst"), cfg.max_model_len).alias("reason")))
    # The seed tokens the prompt rows rephrase, each document once: its own count when
    # whole, the sum of its chunks' counts when cut (each chunk is counted alone, so a cut
    # can shift the sum from the document's count by a token or two). Exactly the sum of
    # source_tokens over one style's prompt rows.
    covered_tokens = whole_tokens + chunk_tokens
    whole = (
        (selected.join(too_long.select("id"), "id", "left_anti") if too_long_documents
         else selected)
        .withColumn("doc_id", F.col("id"))
        .withColumn("chunk_index", F.lit(0))
        .withColumn("chunk_count", F.lit(1))
        .withColumn("title", F.lit(None).cast("string"))
        .withColumn("heading_path", F.lit(None).cast("array<string>"))
        .withColumn("source_tokens", F.col("doc_tokens"))
    )
    if chunk_rows:
        parts = (
            chunked.filter(F.col("reason").isNull())
            .select("id", "chunk_index", "chunk_count", "text", "chunk_tokens", "title",
                    "heading_path", "context", "context_tokens")
            .join(selected.drop("text", "prompt_tokens", "max_new_tokens"), "id")
            .withColumn("doc_id", F.col("id"))
            .withColumn("id", F.concat_ws(chunk_pass.CHUNK_ID_SEPARATOR, "id",
                                          F.col("chunk_index").cast("string")))
            .withColumn("system", F.concat("system", "context"))  # which part, of what
            .withColumn("prompt_tokens",
                        F.col("chunk_tokens") + F.col("overhead") + F.col("context_tokens"))
            .withColumn("max_new_tokens", new_tokens(F.col("chunk_tokens")))
            .withColumn("source_tokens", F.col("chunk_tokens"))
        )
        chunk_pass.check_chunk_ids(parts, rows)
    row_columns = [c for c in shard_files.SHARD_COLUMNS if c != "user"] + [
        "user_template", "text", "source", "source_row"]
    prompt_rows_frame = whole.select(*row_columns)
    if parts is not None:
        prompt_rows_frame = prompt_rows_frame.unionByName(parts.select(*row_columns))
    prompts = (
        prompt_rows_frame
        .withColumn("user", F.expr(f"replace(user_template, '{{{PLACEHOLDER}}}', text)"))
        .withColumn("max_new_tokens", F.col("max_new_tokens").cast("int"))
        .withColumn("cost_tokens", F.col("prompt_tokens") + F.col("max_new_tokens"))
        .select(*shard_files.SHARD_COLUMNS, "source", "source_row", "cost_tokens")
    )
    ordered = (prompts.repartitionByRange(cfg.partitions, *shard_files.ORDER)
               .sortWithinPartitions(*shard_files.ORDER).persist())
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
        return shard_files.write_shard(table, cfg.run, dense)

    written = with_shard.groupBy("shard").applyInArrow(
        write_shard,
        "name string, url string, rows long, tokens long",
    ).collect()
    shards = sorted((r.asDict() for r in written), key=lambda s: s["name"])

    quarantine = rows.filter(F.col("reason").isNotNull()).select(
        "id", "source", "source_row", "reason")
    if set_aside is not None:
        quarantine = quarantine.unionByName(set_aside)
    quarantine = (
        quarantine
        .repartitionByRange(cfg.partitions, "source", "source_row")
        .sortWithinPartitions("source", "source_row")
    )
    quarantine_dir = cfg.run.stitch_quarantine
    storage.delete(quarantine_dir)
    # written per partition by the executors: the driver only sees counts per reason
    reasons = Counter({r["reason"]: r["rows"] for r in quarantine.mapInArrow(
        partial(shard_files.write_quarantine, folder=quarantine_dir), "reason string, rows long",
    ).groupBy("reason").agg(F.sum("rows").alias("rows")).collect()})
    quarantined = sum(reasons.values())

    rows_in = rows.count()
    prompt_rows = sum(s["rows"] for s in shards)
    # each document kept is one prompt per style, a chunked one a prompt per chunk and style;
    # without routing K is styles_per_doc for every document, with it at most that
    if prompt_rows != expected_rows or (cfg.routing is None and prompt_rows != (
            rows_in - quarantined - chunked_documents + chunk_rows) * cfg.styles_per_doc):
        raise SynthfactoryError(
            f"stitch accounting failed: {rows_in} rows in, {quarantined} quarantined, "
            f"{chunked_documents} cut into {chunk_rows} chunks, {prompt_rows} prompt rows for "
            f"{cfg.styles_per_doc} styles per document"
        )
    plan: ShardsJson = {
        "shards": shards,
        "templates": [{"id": t.id, "version": t.version, "style": t.style, "hash": t.hash}
                      for t in cfg.templates],
        "routing": None if cfg.routing is None else {
            "url": cfg.routing.source, "hash": cfg.routing.hash,
            "table": cfg.routing.document()},
        "rows_in": rows_in,
        "prompt_rows": prompt_rows,
        "quarantined": quarantined,
        "quarantine_reasons": dict(sorted(reasons.items())),
        "quarantine_url": quarantine_dir if quarantined else None,
        "chunked_documents": chunked_documents,
        "chunks": chunk_rows,
        "seed_tokens": seed_tokens,
        "covered_tokens": covered_tokens,
        "styles_per_doc": cfg.styles_per_doc,
        "shard_tokens": cfg.shard_tokens,
        "max_new_tokens": cfg.max_new_tokens,
        "max_model_len": cfg.max_model_len,
        "seed": cfg.seed,
        "files": len(cfg.files),
        "run_format": RUN_FORMAT,  # what the folder's readers upgrade from (run_format.py)
    }
    if cfg.inputs is not None:  # a stitch from the same inputs finds it and has nothing to do
        plan["inputs"] = cfg.inputs
    pause_point("stitch:before-shards-json")
    storage.write_json(cfg.run.shards_json, plan)
    for frame in (rows, selected, chunked, ordered, with_shard):
        if frame is not None:
            frame.unpersist()
    return plan


def _bucket(table: RoutingTable, scored: bool):
    """A document's quality bucket as a Spark column: the first bucket whose upper edge
    its quality is below, the last at or above the last edge; ``unscored`` without a
    quality column."""
    from pyspark.sql import functions as F

    if not scored:
        return F.lit(table.unscored)
    column = F.lit(table.names[-1])
    for name, edge in reversed(list(zip(table.names, table.edges, strict=False))):
        column = F.when(F.col("quality") < edge, F.lit(name)).otherwise(column)
    return column

