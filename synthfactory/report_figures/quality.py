"""The quality gate's counts over the gated shards, and the join's yields by template
and by domain."""

from __future__ import annotations

from collections import Counter

from synthfactory.contract.report_shapes import (
    ReportDomainYield,
    ReportQuality,
    ReportRejectedExample,
)
from synthfactory.contract.run_folder import RunFiles
from synthfactory.report_figures.counts import per_second, share


def quality_figures(files: RunFiles,
                    examples: list[ReportRejectedExample] | None = None
                    ) -> tuple[ReportQuality | None, float]:
    """The gate's counts over the shards whose validation holds them, and the
    device-seconds of those shards (for the cost per usable token). None when no shard
    was gated (a validation file from before the gate has ``quality`` None, and its
    ``missing`` line in ``files.outdated``: contract/run_format.py)."""
    gated = [s for s in files.shards if s.validation and s.validation["quality"] is not None]
    if not gated:
        return None, 0.0
    reasons: Counter = Counter()
    contaminated_by: Counter = Counter()
    by_template: dict[str, Counter] = {}
    usable = rejected = tokens = 0
    generation_s = device_s = 0.0
    for shard in gated:
        quality = shard.validation["quality"]
        usable += quality["usable"]
        rejected += quality["rejected"]
        tokens += quality["usable_output_tokens"]
        reasons.update(quality["reasons"])  # every reason, zeros too
        contaminated_by.update(quality["contaminated_by"])
        for template, counts in quality["by_template"].items():
            by_template.setdefault(template, Counter()).update(counts)
        commit = shard.commit or {}
        generation_s += (commit.get("timings") or {}).get("generation_s") or 0
        device_s += commit.get("device_seconds") or 0
    report: ReportQuality = {
        "shards_gated": len(gated),
        "rows": usable + rejected,
        "usable": usable,
        "rejected": rejected,
        "yield": share(usable, usable + rejected),
        "reasons": dict(reasons),
        "contaminated_by": dict(sorted(contaminated_by.items())),
        "by_template": {t: {"generated": c["generated"], "usable": c["usable"],
                            "yield": share(c["usable"], c["generated"]),
                            **template_token_yield(files.joined, t)}
                        for t, c in sorted(by_template.items())},
        "by_domain": domain_token_yield(files.joined),
        "usable_output_tokens": tokens,
        "usable_tokens_per_s": per_second(tokens, generation_s),
        "usable_tokens_per_device_s": per_second(tokens, device_s),
        "examples": examples or [],
        "grounding": files.joined["grounding"] if files.joined else None,
    }
    return report, device_s


def template_token_yield(joined: dict | None, template: str) -> dict:
    """A template's joined rows, their seed tokens, the usable ones' output tokens and
    the ratio of the two; None before the join (the chunks' counts are not documents)."""
    t = joined["by_template"].get(template) if joined else None
    if t is None:
        return {"joined": None, "source_tokens": None, "usable_tokens": None,
                "token_yield": None}
    return {"joined": t["rows"], "source_tokens": t["source_tokens"],
            "usable_tokens": t["usable_output_tokens"],
            "token_yield": share(t["usable_output_tokens"], t["source_tokens"])}


def domain_token_yield(joined: dict | None) -> dict[str, ReportDomainYield]:
    """The join's counts by the documents' domain: joined and usable rows, their yield,
    seed tokens, usable output tokens and the token yield; {} before the join (a join
    from before domains reads as one with none: contract/run_format.py)."""
    return {d: {"joined": g["rows"], "usable": g["usable"],
                "yield": share(g["usable"], g["rows"]),
                "source_tokens": g["source_tokens"], "usable_tokens": g["usable_output_tokens"],
                "token_yield": share(g["usable_output_tokens"], g["source_tokens"])}
            for d, g in sorted((joined["by_domain"] if joined else {}).items())}
