"""Benchmark: what cutting long documents into chunks (ADR 0134) costs stitch on a corpus
that needs none.

The corpus of benchmarks/stitch.py (stdlib docstring passages at log-normal lengths,
with its ~1% bad rows) but no document longer than 4,000 characters, so every document
fits the 2,048-token window with its budget: the job with chunking on
(``StitchConfig(chunking=True)``, the default: the fit check finds nothing, the chunk pass
runs over no rows) against chunking off (``chunking=False``: the job's baseline, the
chunk pass skipped, what does not fit set aside as before chunks). Both in this process
on one ``spark_session("local[*]")``, all six templates, K = 2, ``--shard-tokens
2000000``, ``--max-new-tokens 256``, ``--max-model-len 2048``: one untimed warm-up run,
then ``--rounds`` rounds of on, off (ABAB...), each run timed (wall) and written to its
own folder. The rates are docs read / the median run time of each side. The two sides
must write the same shards (names, rows, tokens) and token counts, and the "on" side
must chunk nothing, else the benchmark says so and exits 1 after its RESULT line.

    .venv-worker/bin/python benchmarks/stitch_chunks.py [--docs 40000] [--files 8] [--rounds 3]

Last line: ``RESULT stitch_chunks docs=N docs_per_s=X baseline_docs_per_s=Y ratio=X/Y
isa=I`` (X: chunking on, Y: off; target ratio >= 0.8; I: the CPU's vector extensions,
benchmarks/machine.py; ``machine: isa=I load ...`` lines come before and after the runs).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import print_machine, result_line  # noqa: E402
from stitch import build_corpus  # noqa: E402

from synthfactory.layout import RunLayout  # noqa: E402
from synthfactory.model import default_model_dir  # noqa: E402
from synthfactory.stitch.command import manifest_files  # noqa: E402
from synthfactory.stitch.templates import load_templates  # noqa: E402

MAX_CHARS = 4_000  # every document fits 2,048 tokens with 256 new ones: no chunks needed
SAME = ("rows_in", "prompt_rows", "quarantined", "quarantine_reasons", "seed_tokens",
        "covered_tokens")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=40_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side, alternating")
    # the six web-prose templates its recorded figures were measured with
    parser.add_argument("--templates", default="easy,encyclopedic,faq,qa,summary,tutorial")
    parser.add_argument("--styles-per-doc", type=int, default=2)
    parser.add_argument("--shard-tokens", type=int, default=2_000_000)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.docs <= 500 or args.files < 1:
        parser.error("--rounds must be >= 1, --files >= 1 and --docs > 500 (the corpus "
                     "holds a 500-row file of the wrong type)")
    return args


def schedule(rounds: int) -> list[bool]:
    """The timed runs in order, True for chunking on: on, off, on, off, ..."""
    return [on for _ in range(rounds) for on in (True, False)]


def rates(docs: int, seconds: dict[bool, list[float]]) -> tuple[str, str, str]:
    """The RESULT figures: docs/s with chunking on and off, each at its side's median run
    time, and on / off."""
    on = docs / statistics.median(seconds[True])
    off = docs / statistics.median(seconds[False])
    return f"{on:.0f}", f"{off:.0f}", f"{on / off:.3f}"


def problems(on: dict, off: dict) -> list[str]:
    """Why the two sides' outputs do not show chunking's cost on a corpus without chunks."""
    found = []
    if on["chunked_documents"] or on["chunks"]:
        found.append(f"chunking on cut {on['chunked_documents']} documents: the corpus "
                     "needs chunks")
    shards_on = [(s["name"], s["rows"], s["tokens"]) for s in on["shards"]]
    shards_off = [(s["name"], s["rows"], s["tokens"]) for s in off["shards"]]
    if shards_on != shards_off:
        found.append("the shards differ")
    found += [f"{key}: on {on[key]} off {off[key]}" for key in SAME if on[key] != off[key]]
    return found


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("SYNTHFACTORY_SPARK_DRIVER_MEMORY", "3g")
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS",
                          "--conf spark.ui.showConsoleProgress=false pyspark-shell")
    work = Path(args.work or tempfile.mkdtemp(prefix="stitch-chunks-bench-"))
    if args.work and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    print(f"cores={os.cpu_count()} docs={args.docs} files={args.files} rounds={args.rounds} "
          f"styles_per_doc={args.styles_per_doc} shard_tokens={args.shard_tokens} "
          f"max_new_tokens={args.max_new_tokens} max_model_len={args.max_model_len} "
          f"max_chars={MAX_CHARS} driver_memory="
          f"{os.environ['SYNTHFACTORY_SPARK_DRIVER_MEMORY']} work={work}", flush=True)
    started = time.perf_counter()
    manifest, _ = build_corpus(work, args.docs, args.files, args.seed, max_chars=MAX_CHARS,
                               long_fraction=0.0)
    files = manifest_files(manifest)
    print(f"corpus: {len(files)} files, built in {time.perf_counter() - started:.1f} s",
          flush=True)

    from synthfactory.stitch.job import StitchConfig, stitch
    from synthfactory.stitch.spark_session import spark_session

    base = StitchConfig(
        files=files, run=RunLayout(f"file://{work}/warm-up"),
        templates=load_templates(args.templates.split(",")), model_dir=str(default_model_dir()),
        shard_tokens=args.shard_tokens, styles_per_doc=args.styles_per_doc,
        max_new_tokens=args.max_new_tokens, max_model_len=args.max_model_len, seed=args.seed)
    started = time.perf_counter()
    spark = spark_session("local[*]")
    spark.sparkContext.setLogLevel("ERROR")
    print(f"spark session start-up {time.perf_counter() - started:.1f} s", flush=True)
    seconds: dict[bool, list[float]] = {True: [], False: []}
    plans: dict[bool, dict] = {}
    try:
        started = time.perf_counter()
        stitch(base, spark)  # JIT, caches, Python workers: not counted
        print(f"warm-up (chunking on): {time.perf_counter() - started:.1f} s", flush=True)
        shutil.rmtree(work / "warm-up", ignore_errors=True)
        print_machine()
        for index, on in enumerate(schedule(args.rounds)):
            folder = work / f"run-{index}"
            gc.collect()
            started = time.perf_counter()
            plans[on] = stitch(replace(base, run=RunLayout(f"file://{folder}"), chunking=on),
                               spark)
            seconds[on].append(time.perf_counter() - started)
            print(f"round {index // 2 + 1} chunking {'on ' if on else 'off'}: "
                  f"{seconds[on][-1]:.1f} s", flush=True)
            shutil.rmtree(folder, ignore_errors=True)
        print_machine()
    finally:
        spark.stop()
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    on, off = plans[True], plans[False]
    print(f"each run: {on['rows_in']} documents, {on['prompt_rows']} prompt rows in "
          f"{len(on['shards'])} shards, {on['quarantined']} quarantined, "
          f"{on['chunked_documents']} chunked; seed tokens {on['seed_tokens']}, covered "
          f"{on['covered_tokens']}", flush=True)
    print(f"median seconds: chunking on {statistics.median(seconds[True]):.2f}, off "
          f"{statistics.median(seconds[False]):.2f}", flush=True)
    found = problems(on, off)
    print("check: " + ("; ".join(found) if found else
                       "no chunks, the same shards and counts on both sides"), flush=True)
    docs_per_s, baseline_docs_per_s, ratio = rates(on["rows_in"], seconds)
    print(result_line("stitch_chunks", docs=on["rows_in"], docs_per_s=docs_per_s,
                      baseline_docs_per_s=baseline_docs_per_s, ratio=ratio))
    if found:
        sys.exit(1)


if __name__ == "__main__":
    main()
