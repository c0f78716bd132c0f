"""What a run folder shows before its report.json exists (run in progress, or failed
before ``write_report``): the steps' own JSON files, shaped like report.json's figures.

Only JSON is read (docs/contracts.md): the manifest summary, prompts/shards.json, each
shard's ``_COMMITTED.json`` and validation file. Figures that need the parquet parts
(quarantine reasons at rephrase, length histograms, examples) wait for the report.
"""

from __future__ import annotations

from plugins.run_report import run_files

COMMITTED = "_COMMITTED.json"


def load_report(run_url: str) -> dict:
    """report.json when the engine wrote it, else what exists so far (``so_far: True``)."""
    report = run_files.read_json(run_files.join(run_url, "report", "report.json"))
    if report is not None:
        return {**report, "so_far": False}
    return so_far(run_url)


def so_far(run_url: str) -> dict:
    missing: list[str] = [
        "report/report.json: not written (the run is in progress, or failed before "
        "write_report)"]
    manifest = run_files.read_json(run_files.join(run_url, "manifest", "_SUMMARY.json"))
    if manifest is None:
        missing.append("manifest/_SUMMARY.json: not written (crawl_metadata has not finished)")
    plan = run_files.read_json(run_files.join(run_url, "prompts", "shards.json"))
    if plan is None:
        missing.append("prompts/shards.json: not written (stitch_prompts has not finished)")
        plan = {}
    shards = []
    for entry in plan.get("shards") or []:
        name = entry["name"]
        commit = run_files.read_json(run_files.join(run_url, "generated", name, COMMITTED))
        validation = run_files.read_json(run_files.join(run_url, "validation", f"{name}.json"))
        if commit is None:
            missing.append(f"generated/{name}/{COMMITTED}: not written "
                           "(shard.rephrase is running or failed)")
        if validation is None:
            missing.append(f"validation/{name}.json: not written")
        shards.append(_shard(name, entry, commit or {}, validation or {}))
    committed = [s for s in shards if s["committed"]]
    output = sum(s["output_tokens"] for s in committed)
    generation_s = sum(s["generation_s"] or 0 for s in committed)
    reasons: dict[str, int] = {}
    for reason, rows in (plan.get("quarantine_reasons") or {}).items():
        kind = reason.split("(")[0].split(":")[0].strip() or "unknown"
        reasons[kind] = reasons.get(kind, 0) + int(rows)
    return {
        "run_url": run_url,
        "so_far": True,
        "complete": False,
        "missing": missing,
        "documents_in": plan.get("rows_in"),
        "manifest": manifest and {k: manifest.get(k) for k in ("objects", "bytes", "partitions",
                                                              "source")},
        "prompts": {"rows": plan.get("prompt_rows"), "shards": len(plan.get("shards") or []),
                    "shard_tokens": plan.get("shard_tokens"),
                    "styles_per_doc": plan.get("styles_per_doc"),
                    "templates": [t["id"] for t in plan.get("templates") or []]},
        "stitch": {"documents_in": plan.get("rows_in"),
                   "documents_quarantined": plan.get("quarantined"),
                   "quarantined_by_reason": dict(sorted(reasons.items())),
                   "prompt_rows": plan.get("prompt_rows")},
        "rephrase": {"shards_committed": len(committed),
                     "rows_in": sum(s["rows_in"] or 0 for s in shards),
                     "rows_generated": sum(s["rows_generated"] for s in committed),
                     "rows_quarantined": sum(s["rows_quarantined"] for s in committed),
                     "quarantined_by_reason": {},
                     "rows_flagged": sum(s["rows_flagged"] or 0 for s in shards)},
        "tokens": {"output": output, "generation_s": round(generation_s, 3),
                   "tokens_per_s": round(output / generation_s, 2) if generation_s else None,
                   "device_seconds": round(sum(s["device_seconds"] or 0 for s in committed), 3)},
        "cost": None,
        "shards": shards,
        "lengths": None,
        "examples": [],
        "figures": {},
    }


def _shard(name: str, entry: dict, commit: dict, validation: dict) -> dict:
    generation_s = (commit.get("timings") or {}).get("generation_s")
    output = int(commit.get("output_tokens") or 0)
    return {
        "name": name,
        "committed": bool(commit),
        "rows_in": commit.get("rows_in", entry.get("rows")),
        "rows_generated": int(commit.get("rows_generated") or 0),
        "rows_quarantined": int(commit.get("rows_quarantined") or 0),
        "output_tokens": output,
        "generation_s": generation_s,
        "tokens_per_s": round(output / generation_s, 2) if generation_s else None,
        "device_seconds": commit.get("device_seconds"),
        "device": commit.get("device"),
        "rows_flagged": validation.get("rows_flagged"),
    }
