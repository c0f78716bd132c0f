"""The summary ``make demo`` ends with: what went in, what came out, where to look."""

from __future__ import annotations

import argparse
import textwrap

from synthfactory import hardware, storage
from synthfactory.contract import ReportJson, paths
from synthfactory.layout import RunLayout
from synthfactory.quality.reasons import GROUNDING
from synthfactory.report_figures import build_report, shard_figures

LABEL = 24  # the width of the first column


def _wrap(text: str, width: int = 88, limit: int = 600) -> str:
    text = " ".join(text.split())
    text = text if len(text) <= limit else text[:limit] + " ..."
    return textwrap.indent(textwrap.fill(text, width), "    ")


def quality_lines(report: ReportJson) -> list[str]:
    """Usable rows and tokens/s, and the truncated share, as report.json has them."""
    quality, truncated = report["quality"], report["rephrase"]["truncated_share"]
    lines = []
    if quality is None:
        lines.append("usable rows".ljust(LABEL) + "n/a (no quality verdicts: validated "
                     "before the quality gate)")
    else:
        reasons = sorted((-n, r) for r, n in quality["reasons"].items() if n)  # most first
        why = ", ".join(f"{r} {-n}" for n, r in reasons)
        lines.append("usable rows".ljust(LABEL) + f"{quality['usable']} of {quality['rows']} "
                     f"({_pct(quality['yield'])}); rejected {quality['rejected']}"
                     + (f" ({why})" if why else ""))
    if truncated is not None:
        lines.append("truncated share".ljust(LABEL) + f"{_pct(truncated)} of rows stopped at "
                     f"their token budget ({report['rephrase']['rows_truncated']} truncated)")
    if quality is not None:
        tps = quality["usable_tokens_per_s"]
        lines.append("usable tokens".ljust(LABEL) + f"{quality['usable_output_tokens']} = "
                     + (f"{tps:.1f} usable tokens/s" if tps is not None else "n/a tokens/s"))
    return lines


def yield_lines(report: ReportJson) -> list[str]:
    """The corpus in, chunks joined back, and the usable tokens out, per template and per
    domain too."""
    y = report["token_yield"]
    lines = []
    if y["chunked_documents"]:
        lines.append("chunked documents".ljust(LABEL) + f"{y['chunked_documents']} longer than "
                     f"the window, cut into {y['chunks']} chunks and joined back")
    if y["seed_tokens"] is not None:
        lines.append("seed tokens".ljust(LABEL) + f"{y['seed_tokens']}, {y['covered_tokens']} "
                     f"of them in prompt rows ({_pct(y['covered_share'])})")
    if y["yield"] is not None:
        per = ", ".join(f"{t} {_ratio(f['token_yield'])}"
                        for t, f in sorted(((report["quality"] or {}).get("by_template")
                                            or {}).items()))
        lines.append("token yield".ljust(LABEL) + f"{y['usable_tokens']} usable tokens / "
                     f"{y['seed_tokens']} seed tokens = {_ratio(y['yield'])}"
                     + (f" (by template: {per})" if per else ""))
        domains = ((report["quality"] or {}).get("by_domain") or {})
        if domains:  # ADR 0139: the same yield by the documents' domain
            lines.append("by domain".ljust(LABEL) + ", ".join(
                f"{d} {f['usable_tokens']}/{f['source_tokens']} = {_ratio(f['token_yield'])}"
                f" ({f['usable']}/{f['joined']} rows)" for d, f in domains.items()))
    return lines


def attempt_lines(report: ReportJson) -> list[str]:
    """What a usable token cost: attempts per row, usable share after each attempt,
    generated tokens per usable token (docs/adr/0141)."""
    a = report.get("attempts")
    if not a or not a["rows"]:
        return []
    after = ", ".join(f"{k}: {_pct(v)}" for k, v in a["usable_share_after"].items())
    lines = ["attempts".ljust(LABEL) + f"{a['made']} for {a['rows']} prompt rows = "
             f"{a['per_row']:.2f} a row (at most {a['max_attempts']})"]
    if after:
        lines.append("usable after attempt".ljust(LABEL) + after + " of joined rows"
                     + (f"; {a['chunked_saved']} chunked document(s) saved by a later "
                        "attempt" if a["chunked_saved"] else "")
                     + (f"; {a['trimmed']} with a trimmed chunk" if a["trimmed"] else ""))
    if a["generated_per_usable"] is not None:
        lines.append("cost of a usable token".ljust(LABEL) + f"{a['generated_tokens']} "
                     f"generated / {a['usable_tokens']} usable = "
                     f"{a['generated_per_usable']:.2f} generated tokens per usable token")
    return lines


def grounding_lines(report: ReportJson) -> list[str]:
    """How grounded the usable rows are (docs/adr/0148): rows per band of their grounded
    score, rows rejected per grounding reason, and the medians of the rows that stopped
    by themselves and of the trimmed ones."""
    quality = report["quality"] or {}
    g = quality.get("grounding")
    if not g:
        return []
    bands = ", ".join(f"{name} {n}" for name, n in g["bands"].items())
    rejected = ", ".join(f"{r} {quality['reasons'].get(r, 0)}" for r in GROUNDING)
    lines = ["grounded usable rows".ljust(LABEL) + f"{bands} (share of each row's content "
             "its source has)",
             "rejected for grounding".ljust(LABEL) + rejected]
    for ending, f in g["by_ending"].items():
        if f["rows"]:
            lines.append(f"usable, {ending}".ljust(LABEL) + f"{f['rows']} rows: median "
                         f"output/source words {_ratio(f['output_source_ratio'])}, source "
                         f"content kept {_ratio(f['content_kept'])}, grounded "
                         f"{_ratio(f['grounded'])}")
    return lines


def showcase(run_url: str) -> dict | None:
    """The demo's example: the usable joined row whose content its source has most of
    (``grounded``; the first in prompt order of equals), said as such beside the bands:
    the first usable row of a small model's run is as likely as not a loose one, and an
    example that says what it is and how the others compare tells more than a draw."""
    joined = storage.run_folder(run_url).joined() or {}
    best = None
    for part in joined.get("parts") or []:
        rows = storage.read_table(storage.join(run_url, "joined", part["name"])).to_pylist()
        for row in rows:
            if row["usable"] and (best is None or (row.get("grounded") or 0)
                                  > (best.get("grounded") or 0)):
                best = row
    return best


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def joined_example(run_url: str) -> list[str]:
    """A chunked document's joined row: its source's first lines and each chunk output's
    first line, in order (empty when no document was cut)."""
    joined = storage.run_folder(run_url).joined() or {}
    for part in joined.get("parts") or []:
        rows = storage.read_table(storage.join(run_url, "joined", part["name"]))
        chunked = [r for r in rows.to_pylist() if (r.get("chunk_count") or 1) > 1]
        if not chunked:
            continue
        row = chunked[0]
        lines = [f"joined example ({row['template_id']} style), document {row['id']} in "
                 f"{row['chunk_count']} chunks ({'usable' if row['usable'] else 'rejected'}):"]
        source = _first_source(run_url, row["id"])
        lines += ["  source: " + line[:100]
                  for line in [ln for ln in source.splitlines() if ln.strip()][:3]]
        text, starts = row["output_text"], row["chunk_offsets"]
        for i, (start, end) in enumerate(zip(starts, [*starts[1:], len(text)], strict=True)):
            first = next((ln for ln in text[start:end].splitlines() if ln.strip()), "")
            lines.append(f"  chunk {i}: {first[:100]}")
        return lines
    return []


def _first_source(run_url: str, doc_id: str) -> str:
    """The document's first chunk's text, as its prompt row holds it (after the
    shipped templates' ``Text:`` line): the shards are searched in order by their keys
    alone, and only the first that has it is read for its text."""
    plan = storage.run_folder(run_url).shards_plan() or {}
    for shard in plan.get("shards") or []:
        keys = storage.read_table(shard["url"], columns=["doc_id", "chunk_index"])
        for i, (doc, chunk) in enumerate(zip(keys.column("doc_id").to_pylist(),
                                             keys.column("chunk_index").to_pylist(),
                                             strict=True)):
            if doc == doc_id and chunk == 0:
                user = storage.read_table(shard["url"], columns=["user"]).column("user")[i]
                return user.as_py().split("Text:\n", 1)[-1]
    return ""


def engine_lines(report: ReportJson) -> list[str]:
    """The engine's dtype and why, as each commit recorded it."""
    return ["engine".ljust(LABEL) + f"{e['dtype_reason']}; engine core {e['engine_core']}"
            + (f"; sweep winner: {e['tuned']}" if e.get("tuned") not in (None, "none") else "")
            for e in report["tokens"].get("engines") or []]


def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{share:.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", required=True)
    parser.add_argument("--catalog-uri", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--wall-seconds", type=int, default=None)
    args = parser.parse_args()

    folder = storage.run_folder(args.run)
    layout = RunLayout(folder.run_url)
    files = folder.read()
    plan, manifest = files.plan, files.manifest
    commits = [shard.commit for shard in files.shards]
    if plan is None or manifest is None or not commits or None in commits:
        raise SystemExit(f"--run {layout.run_url}: not a finished run ({'; '.join(files.missing)})")
    rows = sum(c["rows_generated"] for c in commits)
    quarantined = sum(c["rows_quarantined"] for c in commits)
    out_tokens = sum(c["output_tokens"] for c in commits)
    gen_s = sum(c["timings"]["generation_s"] for c in commits)
    report = build_report(layout.run_url, files, [shard_figures(s) for s in files.shards])

    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("synthfactory", uri=args.catalog_uri, warehouse=args.warehouse)
    table = catalog.load_table(args.table)
    arrow = table.scan(row_filter=f"run_url == '{layout.run_url}'").to_arrow()
    example = showcase(layout.run_url)

    print()
    print("=" * 72)
    print("synthfactory demo: synthetic_rephrase, one daily run")
    print("=" * 72)
    if args.wall_seconds is not None:
        print(f"wall time (DAG run)     {args.wall_seconds} s")
    print(f"run folder              {layout.run_url}")
    print(f"documents in            {plan['rows_in']} (manifest: {manifest['objects']} files)")
    print(f"quarantined at stitch   {plan['quarantined']}")
    print(f"prompt rows / shards    {plan['prompt_rows']} in {len(plan['shards'])} shards "
          f"of <= {plan['shard_tokens']} tokens")
    print(f"rows generated          {rows} (+{quarantined} quarantined)")
    tps = f"{out_tokens / gen_s:.1f}" if gen_s else "n/a"
    print(f"output tokens           {out_tokens} in {gen_s:.1f} s of generation = {tps} tokens/s "
          f"(CPU: {hardware.isa()})")
    print("\n".join(engine_lines(report)))
    print("\n".join(quality_lines(report)))
    print("\n".join(yield_lines(report)))
    print("\n".join(attempt_lines(report)))
    print("\n".join(grounding_lines(report)))
    print(f"catalog table           {args.table}: {arrow.num_rows} rows of this run "
          f"({catalog.properties.get('uri')})")
    print("query it with           .venv-worker/bin/synthfactory catalog show "
          f"{args.table} --catalog-uri {args.catalog_uri} --warehouse {args.warehouse}")
    card = storage.join(layout.run_url, paths.CARD)
    if storage.exists(card):  # write_card (docs/export.md)
        print(f"dataset card            {card}")
        print(f"export it with          .venv-worker/bin/synthfactory export --run "
              f"{layout.run_url} --out file:///tmp/synthfactory-export")
    if example is None:
        print("\nexample                 none: no row of this run is usable")
    else:
        ended = "trimmed" if example.get("trimmed_chunks") else "stopped by itself"
        print(f"\nexample: the best-grounded usable row (the bands above place the rest), "
              f"template {example['template_id']}, document {example['id']} ({ended}); "
              f"grounded {_ratio(example.get('grounded'))}, source content kept "
              f"{_ratio(example.get('content_kept'))}")
        print(_wrap(_first_source(layout.run_url, example["id"])))
        print("rephrased:")
        print(_wrap(example["clean_text"] or example["output_text"]))
    joined = joined_example(layout.run_url)
    if joined:
        print()
        print("\n".join(joined))
    print("=" * 72)


if __name__ == "__main__":
    main()
