"""What the run made of its seeds (the token yield) and of its attempts."""

from __future__ import annotations

from collections import Counter

from synthfactory.contract.report_shapes import (
    ReportAttempts,
    ReportReplay,
    ReportTokenYield,
)
from synthfactory.contract.run_folder import RunFiles
from synthfactory.report_figures.counts import share


def token_yield_figures(plan: dict, joined: dict | None) -> ReportTokenYield:
    """Seed documents and tokens in, what the prompts covered, and the usable synthetic
    tokens the join counted out: yield = usable tokens / seed tokens. A run stitched
    before seed tokens were counted has None for them (and for the yield)."""
    seed, covered = plan.get("seed_tokens"), plan.get("covered_tokens")
    usable = joined["usable_output_tokens"] if joined else None
    return {
        "seed_documents": plan.get("rows_in"),
        "seed_tokens": seed,
        "chunked_documents": plan.get("chunked_documents"),
        "chunks": plan.get("chunks"),
        "covered_tokens": covered,
        "covered_share": share(covered, seed) if seed and covered is not None else None,
        "joined_rows": joined["joined"] if joined else None,
        "usable_rows": joined["usable"] if joined else None,
        "usable_tokens": usable,
        "yield": share(usable, seed) if seed and usable is not None else None,
    }


def attempts_figures(files: RunFiles) -> ReportAttempts:
    """Attempts per row, usable share after each attempt and generated tokens per usable
    token, from the commits (what the engine made) and the join (what was kept). A
    commit from before attempts were kept (``attempts`` None: contract/run_format.py)
    made one attempt a row."""
    commits = [s.commit for s in files.shards if s.commit]
    rows = sum(c.get("rows_in") or 0 for c in commits)
    made, chosen, limits = 0, Counter(), []
    for c in commits:
        a = c["attempts"]
        if a is None:
            made += c.get("rows_in") or 0
            chosen["1"] += c.get("rows_generated") or 0
            continue
        made += a["made"]
        chosen.update(a["chosen_at"])
        limits.append(a["max_attempts"])
    generated = sum(c.get("output_tokens") or 0 for c in commits)
    joined = files.joined
    after: dict[str, float | None] = {}
    if joined:
        usable_at = {int(k): n for k, n in joined["usable_at_attempt"].items()}
        last = max([*usable_at, *limits, 1])
        running = 0
        for k in range(1, last + 1):
            running += usable_at.get(k, 0)
            after[str(k)] = share(running, joined["joined"])
    usable = joined["usable_output_tokens"] if joined else None
    return {
        "max_attempts": max(limits) if limits else (1 if commits else None),
        "rows": rows, "made": made, "per_row": round(made / rows, 4) if rows else None,
        "chosen_at": dict(sorted(chosen.items(), key=lambda kv: int(kv[0]))),
        "usable_share_after": after,
        "chunked_usable": joined["chunked_usable"] if joined else None,
        "chunked_saved": joined["chunked_saved"] if joined else None,
        "trimmed": joined["trimmed"] if joined else None,
        "generated_tokens": generated,
        "usable_tokens": usable,
        "generated_per_usable": round(generated / usable, 4) if usable else None,
    }


def replay_figures(files: RunFiles) -> ReportReplay:
    """Rows, attempts and tokens the committed shards replayed from earlier commits, and
    what they generated; a commit from before replay (``replay`` None) replayed nothing."""
    commits = [s.commit for s in files.shards if s.commit]
    replays = [c["replay"] or {} for c in commits]
    tokens = sum(r.get("tokens", 0) for r in replays)
    generated = sum(c.get("output_tokens") or 0 for c in commits)
    return {
        "rows": sum(r.get("rows", 0) for r in replays),
        "attempts": sum(r.get("attempts", 0) for r in replays),
        "tokens": tokens, "generated_tokens": generated,
        "replayed_share": share(tokens, tokens + generated) if tokens + generated else None,
        "shards_looked_up": sum(1 for r in replays if r.get("lookup")),
        "lookup_s": round(sum(r.get("lookup_s", 0.0) for r in replays), 4),
    }
