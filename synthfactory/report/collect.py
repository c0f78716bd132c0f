"""Gather what a run folder holds into the report's figures, whatever stage the run reached.

Reads only what the steps wrote (docs/contracts.md): the manifest summary, shards.json,
each shard's ``_COMMITTED.json`` (or, for a shard still running, its parts so far),
the quarantine parts, the validation stats and the quality gate's rejected rows.
Nothing is required: a missing piece becomes a line in ``missing`` and the figures it
would have fed stay empty, so a failed or running run still gets a report of what exists.

The JSON files are read by the contract's ``RunFolder`` (upgraded to the current shape
whatever engine wrote them) and turned into figures by ``synthfactory.report_figures``,
as the UI does for a run without a report; this module adds what
needs the parquet parts: rows of unfinished shards, reasons, lengths, examples, and one
rejected row per reason beside its source.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from synthfactory import storage
from synthfactory.contract import ReportJson, ReportShard, RunFiles, ShardFiles, paths
from synthfactory.contract.report_shapes import (
    ReportExample,
    ReportRejectedExample,
)
from synthfactory.contract.shapes import (
    ShardsJson,
)
from synthfactory.errors import SynthfactoryError
from synthfactory.layout import RunLayout
from synthfactory.quality.reasons import REASONS
from synthfactory.quality.source import source_of
from synthfactory.report_figures import build_report, count_kinds, shard_figures
from synthfactory.stitch.templates import load_used
from synthfactory.validate import length_stats  # the same statistics as validation/*.json

EXAMPLES = 3
EXCERPT_CHARS = 600
RANK = {reason: i for i, reason in enumerate(REASONS)}  # examples in the gate's order


@dataclass
class Lengths:
    """Token lengths behind the histograms (not stored in report.json, only summarised)."""

    prompt: list[int] = field(default_factory=list)
    output: list[int] = field(default_factory=list)


def _parts(folder: str) -> list[str]:
    return [u for u in storage.list_files(folder, ".parquet")
            if paths.PART_NAME.fullmatch(u.rsplit("/", 1)[-1])]


def _column(urls: list[str], name: str) -> list:
    values: list = []
    for url in urls:
        values += storage.read_table(url, columns=[name]).column(name).to_pylist()
    return values


def collect(run_url: str, gpu_hour_usd: float) -> tuple[ReportJson, Lengths]:
    folder = storage.run_folder(run_url)
    layout = RunLayout(folder.run_url)
    files = folder.read()
    plan = files.plan or {}
    lengths = Lengths()

    shards, rephrase_reasons = [], Counter()
    for shard in files.shards:
        figures, reasons = _shard(layout, shard, lengths)
        shards.append(figures)
        rephrase_reasons.update(reasons)
    for entry in plan.get("shards") or []:
        if storage.exists(entry["url"]):
            lengths.prompt += _column([entry["url"]], "prompt_tokens")
    stitch_reasons = None
    if plan.get("quarantine_reasons") is None:  # shards.json of an older stitch: count parts
        stitch_reasons = count_kinds(_column(_parts(layout.stitch_quarantine), "reason"))

    report = build_report(
        folder.run_url, files, shards,
        stitch_reasons=stitch_reasons,
        rephrase_reasons=dict(rephrase_reasons),
        prompt_tokens=sum(lengths.prompt),
        gpu_hour_usd=gpu_hour_usd,
        lengths={"prompt_tokens": length_stats(np.asarray(lengths.prompt)),
                 "output_tokens": length_stats(np.asarray(lengths.output))},
        examples=_examples(layout, plan),
        rejected_examples=_rejected_examples(layout, files),
    )
    report["storage_retries"] = storage_retries(folder.run_url)  # {} where none retried
    return report, lengths


def storage_retries(run_url: str) -> dict[str, dict[str, int]]:
    """{step: {cause: retries}} summed over the records the steps left in the run folder
    (cli.py: one per step process that retried a storage request, done or failed)."""
    folder = storage.join(run_url, paths.STORAGE_RETRIES)
    totals: dict[str, dict[str, int]] = {}
    for url in storage.list_files(folder, ".json"):
        record = storage.read_json(url)
        step = totals.setdefault(str(record.get("step", "?")), {})
        for cause, n in (record.get("retries") or {}).items():
            step[cause] = step.get(cause, 0) + int(n)
    return totals


def _shard(layout: RunLayout, shard: ShardFiles,
           lengths: Lengths) -> tuple[ReportShard, dict[str, int]]:
    """The shard's figures from its parquet parts: the committed ones, or for a shard
    still running or failed, the checkpoint parts written so far."""
    folder = layout.shard_output(shard.name)
    quarantine_folder = layout.rephrase_quarantine(shard.name)
    if shard.commit is not None:
        parts = [storage.join(folder, p["name"]) for p in shard.commit.get("parts", [])]
        quarantine_parts = [storage.join(quarantine_folder, p["name"])
                            for p in shard.commit.get("quarantine_parts", [])]
    else:
        parts, quarantine_parts = _parts(folder), _parts(quarantine_folder)
    output = _column(parts, "output_tokens")
    lengths.output += output  # the rows' outputs: the attempts each kept
    # the tokens generated: every attempt's (docs/adr/0141), as the commit counts them;
    # for a shard still running, its attempts parts so far (none before attempts)
    if shard.commit is not None:
        generated = int(shard.commit.get("output_tokens") or 0)
    else:
        tried = _column(_parts(layout.shard_attempts(shard.name)), "output_tokens")
        generated = sum(tried) if tried else sum(output)
    reasons = count_kinds(_column(quarantine_parts, "reason"))
    figures = shard_figures(shard, rows_generated=len(output),
                            rows_quarantined=sum(reasons.values()), output_tokens=generated)
    return figures, reasons


def _examples(layout: RunLayout, plan: ShardsJson) -> list[ReportExample]:
    """Three (source excerpt, rephrasing) pairs: one per template, topped up with other
    documents when the run used fewer than three templates."""
    templates = {t["id"] for t in plan.get("templates") or []}
    extra = max(0, EXAMPLES - len(templates))
    picked: list[dict] = []
    for entry in plan.get("shards") or []:
        for part in _parts(layout.shard_output(entry["name"])):
            rows = storage.read_table(part, columns=["id", "template_id", "row", "output_text"])
            for row in rows.to_pylist():
                seen_template = any(p["template_id"] == row["template_id"] for p in picked)
                if seen_template and (extra == 0 or any(p["id"] == row["id"] for p in picked)):
                    continue
                extra -= seen_template
                picked.append({**row, "shard": entry})
                if len(picked) == EXAMPLES:
                    return [_pair(p, layout) for p in picked]
    return [_pair(p, layout) for p in picked]


def _pair(row: dict, layout: RunLayout) -> ReportExample:
    shard = row.pop("shard")
    prompt = _prompt_row(shard["url"], row["row"])
    return {
        "template_id": row["template_id"],
        "style": prompt["style"],
        "document_id": row["id"],
        "shard": shard["name"],
        "source_excerpt": _excerpt(_source(prompt["user"], row["template_id"], layout)),
        "rephrasing": _excerpt(row["output_text"]),
    }


def _rejected_examples(layout: RunLayout, files: RunFiles) -> list[ReportRejectedExample]:
    """One rejected row per reason, in the order the gate lists reasons: a row rejected
    for that reason alone where there is one (it shows the reason best), else the first."""
    alone: dict[str, dict] = {}
    first: dict[str, dict] = {}
    for shard in files.shards:
        url = layout.shard_rejected(shard.name)
        # validated before the gate (quality None: contract/run_format.py), or not yet
        before_gate = shard.validation is not None and shard.validation["quality"] is None
        if before_gate or not storage.exists(url):
            continue
        entry = shard.entry
        rows = storage.read_table(url, columns=["row", "id", "template_id", "reasons"])
        for index, row in enumerate(rows.to_pylist()):  # output texts: of the picked only
            row = {**row, "shard": entry, "url": url, "index": index}
            for reason in row["reasons"]:
                first.setdefault(reason, row)
                if len(row["reasons"]) == 1:
                    alone.setdefault(reason, row)
    picked = {**first, **alone}  # first's order: a reason outside the vocabulary goes last
    return [_rejected(reason, picked[reason], layout)
            for reason in sorted(picked, key=lambda r: RANK.get(r, len(RANK)))]


def _rejected(reason: str, row: dict, layout: RunLayout) -> ReportRejectedExample:
    shard = row["shard"]
    user = _prompt_row(shard["url"], row["row"])["user"]
    output = storage.read_table(row["url"], columns=["output_text"]).column(0)[row["index"]]
    return {
        "reason": reason,
        "reasons": list(row["reasons"]),
        "template_id": row["template_id"],
        "document_id": row["id"],
        "shard": shard["name"],
        "row": row["row"],
        "source_excerpt": _excerpt(_source(user, row["template_id"], layout)),
        "output_excerpt": _excerpt(output.as_py() or ""),
    }


def _prompt_row(shard_url: str, row: int) -> dict:
    prompt = storage.read_table(shard_url, columns=["user", "style"]).slice(row, 1)
    return prompt.to_pylist()[0] if prompt.num_rows else {"user": "", "style": None}


def _source(user: str, template_id: str, layout: RunLayout) -> str:
    """The seed document inside the rendered prompt, as the quality gate compared it:
    the run's copy of the template, else the shipped one; a template found in neither
    (a folder of one's own, stitched before copies were kept): the text after "Text:"."""
    try:
        template = load_used(template_id, layout.prompt_templates)
    except SynthfactoryError:
        return user.split("Text:\n", 1)[-1]
    return source_of(user, template)


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS].rstrip() + " ..."
