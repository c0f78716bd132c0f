"""Measure: how much of a corpus of long documents ends up in usable joined rows, at two
context windows (issue 30's coverage figure).

A test corpus of our own making, built from the interpreter's standard library (real
English and real code, nothing copied into the repository):
- long module guides (a module's documentation under headings, 20,000-60,000 characters:
  several times either window);
- a module's source in a fenced code block under a heading (code the chunker keeps whole
  where it fits, cuts between lines where it does not);
- a document holding one 5,000-token line of words (cut at its spaces) and one holding a
  40,000-character run without a space (quarantined: no split fits);
- short docstrings, rephrased whole.

For each window: stitch (real Spark, local), rephrase every shard with the real vLLM
engine and the embedded model (``--max-new-tokens auto``, the window passed on as plan
does, at the DAG's default temperature 0.7, or `--temperature 0`: greedy, deterministic,
and the tiny embedded model's repetition loops the gate rejects), validate (the quality
gate), join.
Coverage = seed tokens of the usable joined rows / seed tokens; the yield = usable
output tokens / seed tokens.

    .venv-worker/bin/python benchmarks/coverage.py [--windows 2048,4096] [--guides 3]

One line per window: ``RESULT coverage window=W docs=N seed_tokens=S covered_tokens=C
chunked_documents=D chunks=K joined=J usable=U usable_seed_tokens=V coverage=V/S
token_yield=Y isa=I``. Slow on a CPU (every chunk is generated): minutes per window.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyarrow as pa  # noqa: E402
from machine import print_machine, result_line  # noqa: E402

from synthfactory import storage  # noqa: E402
from synthfactory.contract import paths  # noqa: E402
from synthfactory.contract.flag_types import AUTO  # noqa: E402
from synthfactory.corpus import iter_docstrings, iter_module_guides  # noqa: E402
from synthfactory.join import join_run  # noqa: E402
from synthfactory.layout import RunLayout  # noqa: E402
from synthfactory.model import default_model_dir  # noqa: E402
from synthfactory.stitch.job import StitchConfig, stitch  # noqa: E402
from synthfactory.stitch.spark_session import spark_session  # noqa: E402
from synthfactory.stitch.templates import load_templates  # noqa: E402
from synthfactory.validate import validate_shard  # noqa: E402

WORKER = Path(sys.executable).parent / "synthfactory"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", default="2048,4096")
    parser.add_argument("--guides", type=int, default=3, help="long module guides")
    parser.add_argument("--short", type=int, default=12, help="short docstrings")
    parser.add_argument("--templates", default="encyclopedic")
    parser.add_argument("--temperature", type=float, default=0.7,
                        help="sampling temperature (0: greedy, deterministic)")
    parser.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    return parser.parse_args(argv)


def corpus(guides: int, short: int) -> dict[str, str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    docs: dict[str, str] = {}
    for name, text in iter_module_guides(stdlib, 20_000, 60_000):
        docs[f"{name}.guide"] = text
        if len(docs) == guides:
            break
    source = (stdlib / "textwrap.py").read_text()
    tree = ast.parse(source)
    docs["textwrap.source"] = ("# textwrap, the source\n\n" + (ast.get_docstring(tree) or "")
                               + "\n\n## The module\n\n```python\n" + source + "```\n")
    words = " ".join(("the reader checks each field of the record before it hands the row "
                      "on").split() * 360)  # ~5,000 tokens on one line
    docs["one-long-line"] = "# A log line\n\nOne line, as a log writer left it:\n\n" + words
    docs["base64-blob"] = "# An attachment\n\n" + "QUJD" * 10_000  # no space: unsplittable
    for name, text in iter_docstrings(stdlib, 300, 2500, 1):
        docs[name] = text
        if len(docs) == guides + 3 + short:
            break
    return docs


def measure(window: int, seeds: str, work: Path, templates: list[str], spark,
            temperature: float) -> dict:
    run = f"file://{work}/run-{window}"
    plan = stitch(StitchConfig(files=[seeds], run=RunLayout(run),
                               templates=load_templates(templates),
                               model_dir=str(default_model_dir()), shard_tokens=16_384,
                               max_new_tokens=AUTO, max_model_len=window, partitions=2), spark)
    shards = [s["url"] for s in plan["shards"]]
    started = time.monotonic()
    subprocess.run([str(WORKER), "rephrase", *[a for s in shards for a in ("--shard", s)],
                    "--model", str(default_model_dir()), "--max-model-len", str(window),
                    "--temperature", str(temperature), "--checkpoint-rows", "16"], check=True,
                   stdout=subprocess.DEVNULL)
    rephrase_s = time.monotonic() - started
    for url in shards:
        validate_shard(url, run, 0.5)
    joined = join_run(run)
    usable_seed = 0
    for part in joined["parts"]:
        rows = storage.read_table(storage.join(run, paths.JOINED, part["name"]),
                                  columns=["usable", "source_tokens"])
        usable_seed += sum(n for ok, n in zip(rows.column(0).to_pylist(),
                                              rows.column(1).to_pylist(), strict=True) if ok)
    seed = plan["seed_tokens"]
    return {"window": window, "docs": plan["rows_in"], "seed_tokens": seed,
            "covered_tokens": plan["covered_tokens"],
            "chunked_documents": plan["chunked_documents"], "chunks": plan["chunks"],
            "joined": joined["joined"], "usable": joined["usable"],
            "usable_seed_tokens": usable_seed,
            "coverage": f"{usable_seed / seed:.4f}",
            "yield": f"{joined['usable_output_tokens'] / seed:.4f}",
            "rephrase_s": f"{rephrase_s:.0f}"}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    work = Path(args.out or tempfile.mkdtemp(prefix="synthfactory-coverage-"))
    docs = corpus(args.guides, args.short)
    seeds = f"file://{work}/seeds.parquet"
    storage.write_table(pa.table({"id": list(docs), "text": list(docs.values())}), seeds)
    print_machine()
    spark = spark_session("local[2]", shuffle_partitions=2)
    measured = []
    try:
        for window in (int(w) for w in args.windows.split(",")):
            measured.append(measure(window, seeds, work, args.templates.split(","), spark,
                                    args.temperature))
            print(json.dumps(measured[-1]), flush=True)
    finally:
        spark.stop()
    print_machine()
    for f in measured:  # last, one a window
        print(result_line(
            "coverage", window=f["window"], docs=f["docs"], seed_tokens=f["seed_tokens"],
            covered_tokens=f["covered_tokens"], chunked_documents=f["chunked_documents"],
            chunks=f["chunks"], joined=f["joined"], usable=f["usable"],
            usable_seed_tokens=f["usable_seed_tokens"], coverage=f["coverage"],
            token_yield=f["yield"]), flush=True)


if __name__ == "__main__":
    main()
