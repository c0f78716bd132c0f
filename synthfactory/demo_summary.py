"""The summary ``make demo`` ends with: what went in, what came out, where to look."""

from __future__ import annotations

import argparse
import textwrap

from synthfactory import hardware, storage
from synthfactory.contract import ReportJson, build_report, shard_figures
from synthfactory.layout import RunLayout

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
    first = commits[0]
    part = storage.read_table(storage.join(layout.shard_output(files.shards[0].name),
                                           first["parts"][0]["name"]))
    example = part.slice(0, 1).to_pylist()[0]
    prompts = storage.read_table(files.shards[0].entry["url"])
    prompt = prompts.slice(example["row"], 1).to_pylist()[0]
    source = prompt["user"].split("Text:\n", 1)[-1]

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
    print(f"catalog table           {args.table}: {arrow.num_rows} rows of this run "
          f"({catalog.properties.get('uri')})")
    print("query it with           .venv-worker/bin/synthfactory catalog show "
          f"{args.table} --catalog-uri {args.catalog_uri} --warehouse {args.warehouse}")
    print(f"\nexample ({example['template_id']} style), source document {example['id']}:")
    print(_wrap(source))
    print("rephrased:")
    print(_wrap(example["output_text"]))
    print("=" * 72)


if __name__ == "__main__":
    main()
