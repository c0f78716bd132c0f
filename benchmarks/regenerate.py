"""Rejection sampling (docs/adr/0141): ``--max-attempts`` 1 against 3 on the same prompt
rows, with one loaded vLLM engine.

The prompt rows are the demo's day: ``synthfactory corpus`` (64 documents and one long
one, as ``make demo`` makes them), crawled and stitched with the steps' defaults (the
DAG's Params: template encyclopedic, budgets ``auto``, window 2,048), so the long
document is cut into chunks. The prompts are copied into two run folders; each is
rephrased by ``synthfactory rephrase`` as the DAG runs it (its own command, in this
process, the engine built once and shared), validated and joined. The first figure of
each pair is ``--max-attempts 1 --repair none`` (the behaviour before attempts), the
second the defaults, ``--max-attempts 3 --repair trim``; ``--trim-alone`` (on by default)
also runs ``--max-attempts 1 --repair trim`` and prints its line, not in the RESULT.

    .venv-worker/bin/python benchmarks/regenerate.py [--docs 64 --long-docs 1]

Last line:
``RESULT regenerate rows=N usable_share_1=a usable_share_3=b chunked_docs=D
docs_usable_1=x docs_usable_3=y generated_per_usable_1=g1 generated_per_usable_3=g3
isa=...``: usable verdicts / prompt rows; usable joined rows of chunked documents (of
D); every attempt's generated tokens / the usable joined rows' kept tokens (lower is
cheaper). Above it, per run: token yield, usable share after each attempt, documents
saved by a later attempt, and each chunked document's chunks' verdicts at each attempt.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from machine import print_machine, result_line  # this folder is on sys.path

from synthfactory import storage
from synthfactory.cli import build_parser
from synthfactory.join import join_run
from synthfactory.layout import RunLayout
from synthfactory.rephrase import command as rephrase_command
from synthfactory.rephrase.engine_spec import EngineSpec
from synthfactory.validate import validate_shard

DAY = dt.date(2026, 1, 1)


def _cli(*argv: str) -> None:
    done = subprocess.run([sys.executable, "-m", "synthfactory.cli", *argv],
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"synthfactory {argv[0]} failed: {done.stderr.strip().splitlines()[-1:]}")


def prepare(tmp: Path, docs: int, long_docs: int) -> Path:
    """The demo's day, crawled and stitched into ``tmp/prompts-run``."""
    corpus, run = tmp / "corpus", tmp / "prompts-run"
    _cli("corpus", "--out", f"file://{corpus}", "--days", "1", "--docs-per-day", str(docs),
         "--long-docs-per-day", str(long_docs), "--end-date", DAY.isoformat())
    start = dt.datetime.combine(DAY, dt.time(), dt.UTC)
    _cli("crawl", "--source", f"file://{corpus}", "--out", f"file://{run}/manifest",
         "--interval-start", start.isoformat(),
         "--interval-end", (start + dt.timedelta(days=1)).isoformat(),
         "--partition-template", "dt={ds}")
    _cli("stitch", "--manifest", f"file://{run}/manifest", "--run", f"file://{run}",
         "--templates", "encyclopedic", "--shard-tokens", "8192", "--max-new-tokens", "auto",
         "--master", "local[2]")
    return run


class SharedEngine:
    """``EngineSpec.build`` loading the engine once: both runs share it (one start-up)."""

    def __init__(self):
        self.engine = None
        self.original = EngineSpec.build

    def __call__(self, spec):
        if self.engine is None:
            self.engine = self.original(spec)
        return self.engine


def rephrase_run(prompts_run: Path, run: Path, attempts: int, repair: str) -> dict:
    shutil.copytree(prompts_run, run)
    plan = storage.read_json(f"file://{run}/prompts/shards.json")
    shards = [s["url"].replace(str(prompts_run), str(run)) for s in plan["shards"]]
    argv = [a for s in shards for a in ("--shard", s)]
    args = build_parser("rephrase").parse_args([*argv, "--max-new-tokens", "auto",
                                                "--max-attempts", str(attempts),
                                                "--repair", repair])
    started = time.monotonic()
    rephrase_command.run(args)
    wall = time.monotonic() - started
    for url in shards:
        validate_shard(url, f"file://{run}", args_default_repetition())
    joined = join_run(f"file://{run}")
    return {"run": run, "shards": shards, "joined": joined, "wall_s": wall}


def args_default_repetition() -> float:
    from synthfactory.contract.steps import VALIDATE

    return VALIDATE.flag("--max-repetition").default


def figures(result: dict) -> dict:
    run = result["run"]
    layout = RunLayout(f"file://{run}")
    folder = storage.run_folder(layout.run_url)
    commits = [folder.commit(s.rsplit("/", 1)[-1].removesuffix(".parquet"))
               for s in result["shards"]]
    rows = sum(c["rows_in"] for c in commits)
    generated = sum(c["output_tokens"] for c in commits)
    made = sum(c["attempts"]["made"] for c in commits)
    verdicts = [storage.read_table(layout.shard_verdicts(c["shard"])) for c in commits]
    usable = sum(sum(v.column("usable").to_pylist()) for v in verdicts)
    joined = result["joined"]
    plan = folder.shards_plan()
    return {
        "rows": rows, "made": made, "usable_rows": usable,
        "usable_share": usable / rows if rows else 0.0,
        "chunked_docs": plan.get("chunked_documents") or 0,
        "docs_usable": joined["chunked_usable"], "docs_saved": joined["chunked_saved"],
        "trimmed": joined["trimmed"], "usable_at_attempt": joined["usable_at_attempt"],
        "generated": generated, "usable_tokens": joined["usable_output_tokens"],
        "generated_per_usable": (generated / joined["usable_output_tokens"]
                                 if joined["usable_output_tokens"] else float("inf")),
        "token_yield": joined["usable_output_tokens"] / plan["seed_tokens"],
        "joined": joined["joined"], "joined_usable": joined["usable"],
        "reasons": Counter(r for v in verdicts for rs in v.column("reasons").to_pylist()
                           for r in rs or []),
    }


def chunk_story(run: Path) -> list[str]:
    """Each chunked document's chunks: the verdict of every attempt, in order."""
    lines = []
    layout = RunLayout(f"file://{run}")
    plan = storage.read_json(f"file://{run}/prompts/shards.json")
    for entry in plan["shards"]:
        prompts = storage.read_table(layout.url(f"prompts/{entry['url'].rsplit('/', 1)[-1]}"))
        if "chunk_count" not in prompts.column_names:
            continue
        chunked = {r: (d, i) for r, (d, i, n) in enumerate(zip(
            prompts.column("doc_id").to_pylist(), prompts.column("chunk_index").to_pylist(),
            prompts.column("chunk_count").to_pylist(), strict=True)) if (n or 1) > 1}
        if not chunked:
            continue
        tries: dict[int, list[str]] = {}
        for url in storage.list_files(layout.shard_attempts(entry["name"]), suffix=".parquet"):
            t = storage.read_table(url, columns=["row", "attempt", "reasons", "repair"])
            for row, attempt, reasons, repair in sorted(zip(*(t.column(c).to_pylist() for c in
                                                              ("row", "attempt", "reasons",
                                                               "repair")), strict=True)):
                if row in chunked:
                    tries.setdefault(row, []).append(
                        f"{attempt}:" + (repair if repair else
                                         ("usable" if not reasons else "+".join(reasons))))
        for row in sorted(chunked, key=lambda r: chunked[r]):
            doc, index = chunked[row]
            lines.append(f"  {doc} chunk {index}: {' '.join(sorted(tries.get(row, [])))}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=64)
    parser.add_argument("--long-docs", type=int, default=1)
    parser.add_argument("--trim-alone", action=argparse.BooleanOptionalAction, default=True,
                        help="also --max-attempts 1 --repair trim: what the trim alone gives")
    args = parser.parse_args()
    shared = SharedEngine()
    EngineSpec.build = lambda spec: shared(spec)  # one engine for both runs
    with tempfile.TemporaryDirectory(prefix="bench-regenerate-") as tmp_name:
        tmp = Path(tmp_name)
        prompts_run = prepare(tmp, args.docs, args.long_docs)
        print_machine()
        one = figures(rephrase_run(prompts_run, tmp / "attempts-1", 1, "none"))
        trim = (figures(rephrase_run(prompts_run, tmp / "attempts-1-trim", 1, "trim"))
                if args.trim_alone else None)
        three_result = rephrase_run(prompts_run, tmp / "attempts-3", 3, "trim")
        three = figures(three_result)
        print_machine()
        for k, f in (("1 --repair none", one), ("1 --repair trim", trim),
                     ("3 --repair trim", three)):
            if f is None:
                continue
            print(f"max_attempts={k}: usable rows {f['usable_rows']}/{f['rows']} "
                  f"({f['usable_share']:.3f}); attempts {f['made']}; joined usable "
                  f"{f['joined_usable']}/{f['joined']}; usable at attempt "
                  f"{json.dumps(f['usable_at_attempt'])}; chunked docs usable "
                  f"{f['docs_usable']}/{f['chunked_docs']} (saved by a later attempt: "
                  f"{f['docs_saved']}); trimmed {f['trimmed']}; tokens generated "
                  f"{f['generated']}, usable {f['usable_tokens']}, token yield "
                  f"{f['token_yield']:.3f}; rejected for {dict(f['reasons'].most_common())}",
                  flush=True)
        print("chunked documents at max_attempts=3, each chunk's attempts:")
        print("\n".join(chunk_story(three_result["run"])))
    print(result_line("regenerate", rows=one["rows"],
                      usable_share_1=f"{one['usable_share']:.3f}",
                      usable_share_3=f"{three['usable_share']:.3f}",
                      chunked_docs=one["chunked_docs"], docs_usable_1=one["docs_usable"],
                      docs_usable_3=three["docs_usable"],
                      generated_per_usable_1=f"{one['generated_per_usable']:.3f}",
                      generated_per_usable_3=f"{three['generated_per_usable']:.3f}"))


if __name__ == "__main__":
    main()
