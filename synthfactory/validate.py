"""``synthfactory validate``: per generated shard, token-length statistics and the quality
gate's verdict of every row (verdicts/, rejected/), with counts that must add up against
the shard's ``_COMMITTED.json``. Its flags (empty, truncated, repetition, refusal) are
the gate's reasons of those names, counted from the same verdicts: one count each."""

from __future__ import annotations

import argparse
import logging
from collections import Counter

import numpy as np
import pyarrow as pa

from synthfactory import storage
from synthfactory.contract import QualityCounts, ValidationJson, paths
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.faults import pause_point
from synthfactory.layout import RunLayout, run_url_of_shard, shard_name
from synthfactory.quality import decontaminate
from synthfactory.quality.gate import verdict_columns
from synthfactory.quality.reasons import REASONS
from synthfactory.quality.repair import TRIMMED
from synthfactory.quality.table import QA_PAIRS, SCORE_FIELDS

log = logging.getLogger(__name__)

# the gate's reasons a row is flagged for (the others judge the rephrasing, not the engine)
FLAGS = ("empty", "truncated", "repetition", "refusal")


def flag_counts(reasons: list[list[str]]) -> tuple[dict[str, int], int]:
    """The count of each flag, and of rows with any, from the gate's reasons of each row."""
    return ({flag: sum(flag in why for why in reasons) for flag in FLAGS},
            sum(any(flag in why for flag in FLAGS) for why in reasons))


def length_stats(lengths: np.ndarray) -> dict:
    if lengths.size == 0:
        return {"count": 0, "min": 0, "p50": 0, "p90": 0, "p99": 0, "max": 0, "mean": 0.0}
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    return {"count": int(lengths.size), "min": int(lengths.min()), "p50": float(p50),
            "p90": float(p90), "p99": float(p99), "max": int(lengths.max()),
            "mean": round(float(lengths.mean()), 2)}


def shard_index(shard_url: str) -> int:
    """``.../shard-00003.parquet`` -> 3; any other name is not a prompt shard."""
    match = paths.SHARD_NAME.fullmatch(shard_name(shard_url))
    if match is None:
        raise PermanentError(f"--shard {shard_url}: not a prompt shard name (expected "
                             "{run}/prompts/shard-NNNNN.parquet, as stitch writes them)")
    return int(match.group(1))


def validate_shard(shard_url: str, run_url: str, max_repetition: float,
                   benchmarks: decontaminate.BenchmarkIndex | None = None) -> ValidationJson:
    name, index = shard_name(shard_url), shard_index(shard_url)
    layout = RunLayout(run_url)
    out = layout.generated_shard(index)
    commit = storage.run_folder(run_url).commit(paths.shard_name(index))
    if commit is None:
        raise SynthfactoryError(f"{out}: shard is not committed (no {paths.COMMITTED})")
    tables = [storage.read_table(storage.join(out, p["name"])) for p in commit["parts"]]
    table = pa.concat_tables(tables) if tables else None
    rows = table.num_rows if table is not None else 0
    if rows != commit["rows_generated"]:
        raise SynthfactoryError(
            f"{out}: parts hold {rows} rows but {paths.COMMITTED} says {commit['rows_generated']}")
    lengths = table.column("output_tokens").to_numpy() if rows else np.array([], dtype=np.int64)
    quality, reasons = _gate(shard_url, table, layout, name, max_repetition, benchmarks)
    flags, flagged = flag_counts(reasons)
    report: ValidationJson = {
        "shard": name, "rows": rows, "rows_in": commit["rows_in"],
        "rows_quarantined": commit["rows_quarantined"],
        "output_tokens": length_stats(lengths),
        "flags": flags,
        "rows_flagged": flagged,
        "quality": quality,
    }
    if benchmarks is not None:
        report["decontamination"] = benchmarks.described()
    pause_point("validate:before-write")
    storage.write_json(layout.shard_validation(name), report)
    return report


VERDICT_SCHEMA = pa.schema([
    ("row", pa.int64()), ("id", pa.string()), ("template_id", pa.string()),
    ("usable", pa.bool_()), ("reasons", pa.list_(pa.string())), ("clean_text", pa.string()),
    ("output_tokens", pa.int64()),  # the tokens the row keeps (a trimmed output's part)
    ("qa_pairs", QA_PAIRS),  # a qa_pairs template's parsed pairs; null for the others
    # the worker's chosen attempt (null: generated before attempts were kept) and whether
    # its output was trimmed (docs/adr/0141)
    ("attempt", pa.int32()), ("trimmed", pa.bool_()),
    # the benchmarks the row shares an n-gram with (reason contaminated; [] otherwise)
    ("contaminated_by", pa.list_(pa.string())),
    # the grounding scores and word counts (quality/grounding.py; docs/adr/0148)
    *SCORE_FIELDS])


def _gate(shard_url: str, table: pa.Table | None, layout: RunLayout, name: str,
          max_repetition: float, benchmarks: decontaminate.BenchmarkIndex | None = None
          ) -> tuple[QualityCounts, list[list[str]]]:
    """The quality gate over the shard's rows, against their sources in the prompt shard:
    verdicts/{shard}.parquet for every row, rejected/{shard}.parquet for the rejected.
    The generated parts stay as committed. Returns the counts and each row's reasons."""
    rows = (table.sort_by("row").to_pylist() if table is not None else [])
    users = storage.read_table(shard_url, columns=["user"]).column(0).to_pylist()
    verdicts = verdict_columns(
        [(users[r["row"]], r["output_text"], r["finish_reason"], r["template_id"])
         for r in rows], max_repetition=max_repetition, run_templates=layout.prompt_templates,
        benchmarks=benchmarks)
    columns = {"row": [r["row"] for r in rows], "id": [r["id"] for r in rows],
               "template_id": [r["template_id"] for r in rows], **verdicts,
               "output_tokens": [int(r["kept_tokens"] if r.get("kept_tokens") is not None
                                     else r["output_tokens"] or 0) for r in rows],
               "attempt": [r.get("attempt") for r in rows],
               "trimmed": [r["finish_reason"] == TRIMMED for r in rows]}
    storage.write_table(pa.table(columns, schema=VERDICT_SCHEMA), layout.shard_verdicts(name))
    rejected = [i for i, ok in enumerate(verdicts["usable"]) if not ok]
    storage.write_table(pa.table({
        "row": [rows[i]["row"] for i in rejected], "id": [rows[i]["id"] for i in rejected],
        "template_id": [rows[i]["template_id"] for i in rejected],
        "reasons": [verdicts["reasons"][i] for i in rejected],
        "output_text": [rows[i]["output_text"] for i in rejected],
        "contaminated_by": [verdicts["contaminated_by"][i] for i in rejected],
        **{f.name: [verdicts[f.name][i] for i in rejected] for f in SCORE_FIELDS},
    }, schema=pa.schema([("row", pa.int64()), ("id", pa.string()), ("template_id", pa.string()),
                         ("reasons", pa.list_(pa.string())), ("output_text", pa.string()),
                         ("contaminated_by", pa.list_(pa.string())), *SCORE_FIELDS])),
        layout.shard_rejected(name))
    return quality_counts(columns), verdicts["reasons"]


def quality_counts(columns: dict[str, list]) -> QualityCounts:
    reasons = dict.fromkeys(REASONS, 0)
    by_template: dict[str, dict[str, int]] = {}
    for template, usable, why in zip(columns["template_id"], columns["usable"],
                                     columns["reasons"], strict=True):
        counts = by_template.setdefault(template, {"generated": 0, "usable": 0})
        counts["generated"] += 1
        counts["usable"] += int(usable)
        for reason in why:
            reasons[reason] += 1
    usable = sum(columns["usable"])
    contaminated_by: Counter = Counter()
    for names in columns.get("contaminated_by") or []:
        contaminated_by.update(names)
    return {"usable": usable, "rejected": len(columns["usable"]) - usable, "reasons": reasons,
            "contaminated_by": dict(sorted(contaminated_by.items())),
            "usable_output_tokens": sum(n for n, ok in zip(columns["output_tokens"],
                                                           columns["usable"], strict=True) if ok),
            "by_template": dict(sorted(by_template.items()))}


def run(args: argparse.Namespace) -> dict:
    for url in args.shard:  # every name first: nothing written for a half-valid group
        shard_index(url)
    decontaminate.check_n(args.decontaminate_n)
    # built once for the task's shards; a bad benchmark file (unreadable, a named column
    # missing or not text, no text at all) fails here, before any work
    benchmarks = (decontaminate.build(args.benchmarks, args.decontaminate_n,
                                      decontaminate.named_columns(args.benchmark_columns))
                  if args.benchmarks else None)
    if benchmarks is not None and benchmarks.stats is not None:
        log.info("%s", benchmarks.stats.line(args.benchmarks, args.decontaminate_n))
    reports = [
        validate_shard(storage.normalize(url),
                       storage.normalize(args.run) if args.run else run_url_of_shard(url),
                       args.max_repetition, benchmarks)
        for url in args.shard
    ]
    totals = Counter()
    for report in reports:
        totals.update(report["flags"])
    reasons = Counter()
    for report in reports:
        reasons.update(report["quality"]["reasons"])
    return {
        "shards": [r["shard"] for r in reports],
        "rows": sum(r["rows"] for r in reports),
        "rows_flagged": sum(r["rows_flagged"] for r in reports),
        "flags": {flag: totals.get(flag, 0) for flag in FLAGS},
        "usable": sum(r["quality"]["usable"] for r in reports),
        "rejected": sum(r["quality"]["rejected"] for r in reports),
        "reasons": {reason: reasons.get(reason, 0) for reason in REASONS},
        "contaminated_by": dict(sorted(sum(
            (Counter(r["quality"].get("contaminated_by") or {}) for r in reports),
            Counter()).items())),
    }
