"""Gather what a run folder holds into the report's figures, whatever stage the run reached.

Reads only what the steps wrote (docs/contracts.md): the manifest summary, shards.json,
each shard's ``_COMMITTED.json`` (or, for a shard still running, its parts so far),
the quarantine parts and the validation stats. Nothing is required: a missing piece
becomes a line in ``missing`` and the figures it would have fed stay empty, so a failed
or running run still gets a report of what exists.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from synthfactory import storage
from synthfactory.catalog.run_reader import COMMITTED
from synthfactory.layout import RunLayout
from synthfactory.validate import length_stats  # the same statistics as validation/*.json

EXAMPLES = 3
EXCERPT_CHARS = 600
_PART = re.compile(r"/part-\d{5}\.parquet$")


@dataclass
class Lengths:
    """Token lengths behind the histograms (not stored in report.json, only summarised)."""

    prompt: list[int] = field(default_factory=list)
    output: list[int] = field(default_factory=list)


def reason_kind(reason: str) -> str:
    """``too long for the context window (900 prompt + ...)`` -> ``too long for the context
    window``: reasons carry per-row detail after ``(`` or ``:``; the report counts kinds."""
    return re.split(r"\s*[(:]", reason or "unknown", maxsplit=1)[0].strip() or "unknown"


def _json_or_none(url: str):
    return storage.read_json(url) if storage.exists(url) else None


def _parts(folder: str) -> list[str]:
    return [u for u in storage.list_files(folder, ".parquet") if _PART.search(u)]


def _column(urls: list[str], name: str) -> list:
    values: list = []
    for url in urls:
        values += storage.read_table(url, columns=[name]).column(name).to_pylist()
    return values


def collect(run_url: str, gpu_hour_usd: float) -> tuple[dict, Lengths]:
    layout = RunLayout(storage.normalize(run_url).rstrip("/"))
    missing: list[str] = []
    lengths = Lengths()

    manifest = _json_or_none(storage.join(layout.manifest, "_SUMMARY.json"))
    if manifest is None:
        missing.append("manifest/_SUMMARY.json: not written (crawl_metadata has not finished)")
    plan = _json_or_none(layout.shards_json)
    if plan is None:
        missing.append("prompts/shards.json: not written (stitch_prompts has not finished)")
        plan = {}

    stitch = _stitch(layout, plan)
    shards = [_shard(layout, entry, lengths, missing) for entry in plan.get("shards") or []]
    for entry in plan.get("shards") or []:
        if storage.exists(entry["url"]):
            lengths.prompt += _column([entry["url"]], "prompt_tokens")
    committed = [s for s in shards if s["committed"]]
    output_tokens = sum(s["output_tokens"] for s in shards)
    generation_s = sum(s["generation_s"] or 0 for s in committed)
    device_s = sum(s["device_seconds"] or 0 for s in committed)
    quarantine_reasons: Counter = Counter()
    for s in shards:
        quarantine_reasons.update(s.pop("quarantine_reasons"))

    report = {
        "run_url": layout.run_url,
        "complete": not missing,
        "missing": missing,
        "documents_in": plan.get("rows_in"),
        "manifest": None if manifest is None else {
            k: manifest.get(k) for k in ("objects", "bytes", "partitions", "source",
                                         "interval_start", "interval_end")},
        "prompts": {
            "rows": plan.get("prompt_rows"),
            "shards": len(plan.get("shards") or []),
            "shard_tokens": plan.get("shard_tokens"),
            "styles_per_doc": plan.get("styles_per_doc"),
            "templates": [t["id"] for t in plan.get("templates") or []],
        },
        "stitch": stitch,
        "rephrase": {
            "shards_committed": len(committed),
            "rows_in": sum(s["rows_in"] or 0 for s in shards),
            "rows_generated": sum(s["rows_generated"] for s in shards),
            "rows_quarantined": sum(quarantine_reasons.values()),
            "quarantined_by_reason": dict(sorted(quarantine_reasons.items())),
            "rows_flagged": sum(s["rows_flagged"] or 0 for s in shards),
        },
        "tokens": {
            "prompt": sum(lengths.prompt),
            "output": output_tokens,
            "generation_s": round(generation_s, 3),
            "tokens_per_s": round(output_tokens / generation_s, 2) if generation_s else None,
            "device_seconds": round(device_s, 3),
            "devices": sorted({s["device"] for s in committed if s["device"]}),
        },
        "cost": _cost(device_s, sum(s["output_tokens"] for s in committed), gpu_hour_usd),
        "shards": shards,
        "lengths": {"prompt_tokens": length_stats(np.asarray(lengths.prompt)),
                    "output_tokens": length_stats(np.asarray(lengths.output))},
        "examples": _examples(layout, plan),
    }
    return report, lengths


def _stitch(layout: RunLayout, plan: dict) -> dict:
    reasons = plan.get("quarantine_reasons")
    if reasons is None:  # shards.json of an older stitch: count the quarantine parts
        parts = _parts(storage.join(layout.quarantine, "stitch"))
        reasons = Counter(reason_kind(r) for r in _column(parts, "reason"))
    else:
        kinds: Counter = Counter()
        for reason, rows in reasons.items():
            kinds[reason_kind(reason)] += int(rows)
        reasons = kinds
    return {
        "documents_in": plan.get("rows_in"),
        "documents_quarantined": plan.get("quarantined"),
        "quarantined_by_reason": dict(sorted(reasons.items())),
        "prompt_rows": plan.get("prompt_rows"),
    }


def _shard(layout: RunLayout, entry: dict, lengths: Lengths, missing: list[str]) -> dict:
    name = entry["name"]
    folder = storage.join(layout.generated, name)
    commit = _json_or_none(storage.join(folder, COMMITTED))
    quarantine_folder = storage.join(layout.quarantine, "rephrase", name)
    if commit is not None:
        parts = [storage.join(folder, p["name"]) for p in commit.get("parts", [])]
        quarantine_parts = [storage.join(quarantine_folder, p["name"])
                            for p in commit.get("quarantine_parts", [])]
    else:  # still running or failed: the checkpoint parts written so far
        missing.append(f"generated/{name}/{COMMITTED}: not written "
                       "(shard.rephrase is running or failed)")
        parts, quarantine_parts = _parts(folder), _parts(quarantine_folder)
    output = _column(parts, "output_tokens")
    lengths.output += output
    reasons = Counter(reason_kind(r) for r in _column(quarantine_parts, "reason"))
    validation = _json_or_none(storage.join(layout.validation, f"{name}.json"))
    if validation is None:
        missing.append(f"validation/{name}.json: not written (shard.validate has not finished)")
    timings = (commit or {}).get("timings") or {}
    generation_s = timings.get("generation_s")
    out_tokens = sum(output)
    return {
        "name": name,
        "committed": commit is not None,
        "rows_in": (commit or {}).get("rows_in", entry.get("rows")),
        "rows_generated": len(output),
        "rows_quarantined": sum(reasons.values()),
        "quarantine_reasons": reasons,
        "output_tokens": out_tokens,
        "generation_s": generation_s,
        "tokens_per_s": round(out_tokens / generation_s, 2) if generation_s else None,
        "device_seconds": (commit or {}).get("device_seconds"),
        "device": (commit or {}).get("device"),
        "rows_flagged": (validation or {}).get("rows_flagged"),
        "flags": (validation or {}).get("flags"),
    }


def _cost(device_seconds: float, output_tokens: int, gpu_hour_usd: float) -> dict:
    hours = device_seconds / 3600
    usd = hours * gpu_hour_usd
    return {
        "gpu_hour_usd": gpu_hour_usd,
        "device_hours": round(hours, 6),
        "usd": round(usd, 6),
        "usd_per_1b_output_tokens": round(usd / output_tokens * 1e9, 2) if output_tokens else None,
    }


def _examples(layout: RunLayout, plan: dict) -> list[dict]:
    """Three (source excerpt, rephrasing) pairs: one per template, topped up with other
    documents when the run used fewer than three templates."""
    templates = {t["id"] for t in plan.get("templates") or []}
    extra = max(0, EXAMPLES - len(templates))
    picked: list[dict] = []
    for entry in plan.get("shards") or []:
        for part in _parts(storage.join(layout.generated, entry["name"])):
            rows = storage.read_table(part, columns=["id", "template_id", "row", "output_text"])
            for row in rows.to_pylist():
                seen_template = any(p["template_id"] == row["template_id"] for p in picked)
                if seen_template and (extra == 0 or any(p["id"] == row["id"] for p in picked)):
                    continue
                extra -= seen_template
                picked.append({**row, "shard": entry})
                if len(picked) == EXAMPLES:
                    return [_pair(p) for p in picked]
    return [_pair(p) for p in picked]


def _pair(row: dict) -> dict:
    shard = row.pop("shard")
    prompt = storage.read_table(shard["url"], columns=["user", "style"]).slice(row["row"], 1)
    prompt_row = prompt.to_pylist()[0] if prompt.num_rows else {"user": "", "style": None}
    source = prompt_row["user"].split("Text:\n", 1)[-1]
    return {
        "template_id": row["template_id"],
        "style": prompt_row["style"],
        "document_id": row["id"],
        "shard": shard["name"],
        "source_excerpt": _excerpt(source),
        "rephrasing": _excerpt(row["output_text"]),
    }


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS].rstrip() + " ..."
