"""Benchmark: the Spark stitch job vs a single-process pyarrow/pandas baseline, same work.

Builds a corpus of --docs documents (default 200,000) in --files parquet files: passages
of the Python standard library's docstrings recombined at log-normal lengths (median
~380 characters, a tail past the context window), with the bad rows the job must
quarantine mixed in (null, empty and whitespace text, null ids, repeated ids, invalid
UTF-8 in binary text columns, one file whose text column is an integer), and a crawl
manifest for it. Then, in one run:

  (a) the real job, ``synthfactory.stitch.job.stitch`` on ``spark_session("local[*]")``:
      session start-up and the job itself are timed separately;
  (b) benchmarks/stitch_baseline.py: the same step in one Python process.

Both write shards and quarantine; the check compares them row for row (every
(id, template_id) prompt row, its prompt_tokens, user text and shard; per-shard rows and
tokens; every quarantine (source, source_row, reason)); the baseline reproduces Spark's
xxhash64 with numpy, so the K styles chosen per document are the same, not only their
count. Shard balance: the largest |shard tokens - budget| / budget, last shard excluded.

    .venv-worker/bin/python benchmarks/stitch.py [--docs 200000] [--files 40]

Last line: RESULT stitch docs=N spark_docs_per_s=X baseline_docs_per_s=Y ratio=X/Y
shard_balance_max_dev=D isa=I (I: the CPU's vector extensions, benchmarks/machine.py;
``machine: isa=I load ...`` lines, uptime's load, come before and after the two runs)
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import print_machine, result_line  # noqa: E402
from stitch_baseline import read_prompts, stitch_baseline  # noqa: E402

from synthfactory.corpus import iter_docstrings  # noqa: E402
from synthfactory.layout import RunLayout  # noqa: E402
from synthfactory.model import default_model_dir  # noqa: E402
from synthfactory.report_figures import reason_kind  # noqa: E402
from synthfactory.stitch import tokens  # noqa: E402
from synthfactory.stitch.command import manifest_files  # noqa: E402
from synthfactory.stitch.templates import load_templates  # noqa: E402

WRONG_TYPE_ROWS = 500
INVALID = b"\xe9\xff"


def _pool(seed_chars: int = 40) -> tuple[str, np.ndarray]:
    """Every stdlib docstring paragraph, joined: the text that documents are cut from."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    seen: set[str] = set()
    paragraphs: list[str] = []
    for _, doc in iter_docstrings(stdlib, seed_chars, 10**7, per_module=10**9):
        if doc not in seen:
            seen.add(doc)
            paragraphs += [p.strip() for p in doc.split("\n\n") if p.strip()]
    starts = np.cumsum([0] + [len(p) + 2 for p in paragraphs[:-1]])
    return "\n\n".join(paragraphs), starts


def build_corpus(root: Path, docs: int, files: int, seed: int, *, max_chars: int = 14_000,
                 long_fraction: float = 0.001) -> tuple[str, Counter]:
    """Write the corpus and its manifest under ``root``; return the manifest URL and the
    bad rows injected, by kind. ``max_chars`` caps a document's length and
    ``long_fraction`` of them are 8,000-14,000 characters, past a 2,048-token window
    (benchmarks/stitch_chunks.py: 4,000 and 0, a corpus that needs no chunks); the
    defaults are this benchmark's corpus."""
    rng = np.random.default_rng(seed)
    pool, starts = _pool()
    n = docs - WRONG_TYPE_ROWS
    lengths = np.clip(rng.lognormal(np.log(380), 0.85, n), 40, max_chars).astype(int)
    very_long = rng.random(n) < long_fraction  # documents past the context window
    lengths[very_long] = rng.integers(8_000, 14_000, int(very_long.sum()))
    texts: list[str | None] = []
    ids: list[str | None] = []
    for i, length in enumerate(lengths):
        start = int(rng.choice(starts[: np.searchsorted(starts, len(pool) - length)]))
        text = pool[start:start + length]
        cut = max(text.rfind(" "), text.rfind("\n"))
        texts.append(text[:cut] if cut > length // 2 else text)
        first_line = text.split("\n", 1)[0][:40].strip().replace(" ", "-")
        ids.append(f"py://{first_line}/{i}")
    injected: Counter = Counter()
    kind = rng.random(n)
    per_file = -(-n // files)
    binary_file = (np.arange(n) // per_file) % 8 == 3  # every 8th file: binary text column
    for i in range(n):
        k = kind[i]
        if k < 0.002:
            texts[i] = None
            injected["null text"] += 1
        elif k < 0.003:
            texts[i] = ""
            injected["empty text"] += 1
        elif k < 0.004:
            texts[i] = " \n\t  "
            injected["empty text"] += 1
        elif k < 0.0045:
            ids[i] = None
            injected["null id"] += 1
        elif k < 0.0065 and i > 0:
            # repeat an earlier id. Not one of a document past the context window: the
            # corpus stays the one of the first published run (that case had a bug, since
            # fixed and covered by a test; see docs/stitch.md).
            j = int(rng.integers(0, i))
            while ids[j] is None or texts[j] is None or len(texts[j]) > 3_000:
                j = int(rng.integers(0, i))
            ids[i] = ids[j]
            injected["duplicate id"] += 1
        elif k < 0.0095 and binary_file[i] and texts[i]:
            injected["invalid UTF-8 in text"] += 1
            kind[i] = -1.0  # bytes spliced in when the file is written
    corpus = root / "corpus" / "dt=2026-11-29"
    corpus.mkdir(parents=True)
    keys = []
    for f in range(files):
        lo, hi = f * per_file, min(n, (f + 1) * per_file)
        if lo >= hi:
            break
        chunk = texts[lo:hi]
        if binary_file[lo]:
            text = pa.array([
                None if t is None else (t[:10].encode() + INVALID + t[10:].encode()
                                        if kind[lo + r] == -1.0 else t.encode())
                for r, t in enumerate(chunk)], pa.binary())
        else:
            text = pa.array(chunk, pa.string())
        path = corpus / f"part-{f:05d}.parquet"
        pq.write_table(pa.table({"id": pa.array(ids[lo:hi], pa.string()), "text": text}), path)
        keys.append(path)
    path = corpus / "part-99999.parquet"  # a text column of the wrong type
    pq.write_table(pa.table({"id": [f"wrong-type/{i}" for i in range(WRONG_TYPE_ROWS)],
                             "text": pa.array(range(WRONG_TYPE_ROWS), pa.int64())}), path)
    injected["text is not a string (column type int64)"] += WRONG_TYPE_ROWS
    keys.append(path)
    manifest = root / "manifest"
    manifest.mkdir()
    now = dt.datetime.now(dt.UTC)
    pq.write_table(pa.table({
        "key": [f"file://{p}" for p in keys],
        "size": pa.array([p.stat().st_size for p in keys], pa.int64()),
        "etag": pa.nulls(len(keys), pa.string()),
        "last_modified": pa.array([now] * len(keys), pa.timestamp("us", tz="UTC")),
        "dt": ["2026-11-29"] * len(keys),
    }), manifest / "part-00000.parquet")
    return f"file://{manifest}", injected


def _local(url: str) -> str:
    return url.removeprefix("file://")


def _prompt_table(prompts_dir: str) -> pa.Table:
    table = read_prompts(prompts_dir)
    types = {"template_version": pa.int64(), "max_new_tokens": pa.int64(),
             "prompt_tokens": pa.int64(), "source_tokens": pa.int64()}
    table = table.select(["id", "template_id", "template_version", "style", "system", "user",
                          "prompt_tokens", "max_new_tokens", "doc_id", "chunk_index",
                          "chunk_count", "title", "heading_path", "source_tokens", "shard"])
    paths = pc.binary_join(table.column("heading_path"), " > ")  # a list: compared as text
    table = table.set_column(table.schema.get_field_index("heading_path"), "heading_path", paths)
    types.update(chunk_index=pa.int64(), chunk_count=pa.int64())
    table = pa.table({c: table.column(c).cast(types.get(c, pa.string()))
                      for c in table.column_names})
    return table.sort_by([("id", "ascending"), ("template_id", "ascending")])


def _quarantine(run_dir: str) -> Counter:
    # the job writes one part per Spark partition, the baseline a single part
    table = pq.read_table(os.path.join(run_dir, "quarantine", "stitch"))
    return Counter(zip(table.column("source").to_pylist(), table.column("source_row").to_pylist(),
                       table.column("reason").to_pylist(), strict=True))


def compare(spark_run: str, base_run: str, spark_plan: dict, base_plan: dict) -> list[str]:
    """Differences between the two outputs (empty when they agree), printing what matched."""
    problems = []
    s = _prompt_table(os.path.join(spark_run, "prompts"))
    b = _prompt_table(os.path.join(base_run, "prompts"))
    print(f"check: prompt rows spark={s.num_rows} baseline={b.num_rows}")
    if s.num_rows != b.num_rows:
        problems.append("prompt row counts differ")
    else:
        for column in s.column_names:
            same = s.column(column).equals(b.column(column))
            print(f"check: column {column:<16} {'identical' if same else 'DIFFERS'} "
                  "(rows sorted by id, template_id)")
            if not same:
                problems.append(f"column {column} differs")
    pairs = len(set(zip(s.column("id").to_pylist(), s.column("template_id").to_pylist(),
                        strict=True)))
    if pairs != s.num_rows:
        problems.append(f"spark: {s.num_rows - pairs} repeated (id, template_id) rows")
    shards_s = [(x["name"], x["rows"], x["tokens"]) for x in spark_plan["shards"]]
    shards_b = [(x["name"], x["rows"], x["tokens"]) for x in base_plan["shards"]]
    print(f"check: shards spark={len(shards_s)} baseline={len(shards_b)}, per-shard rows and "
          f"tokens {'identical' if shards_s == shards_b else 'DIFFER'}")
    if shards_s != shards_b:
        problems.append("shard list differs")
    qs, qb = _quarantine(spark_run), _quarantine(base_run)
    print(f"check: quarantine rows spark={sum(qs.values())} baseline={sum(qb.values())}, "
          f"(source, source_row, reason) {'identical' if qs == qb else 'DIFFER'}")
    if qs != qb:
        problems.append("quarantine rows differ")
    if spark_plan["quarantine_reasons"] != base_plan["quarantine_reasons"]:
        problems.append("quarantine reason counts differ")
    for key in ("rows_in", "prompt_rows", "quarantined", "chunked_documents", "chunks",
                "seed_tokens", "covered_tokens"):
        if spark_plan[key] != base_plan[key]:
            problems.append(f"{key}: spark {spark_plan[key]} baseline {base_plan[key]}")
    return problems


def _reasons(reasons: dict[str, int]) -> dict[str, int]:
    """Reason counts with the length ones (one text per token count) added up."""
    out: Counter = Counter()
    for reason, count in reasons.items():
        out[reason_kind(reason) if "context window" in reason else reason] += count
    return dict(sorted(out.items()))


def balance(plan: dict) -> float:
    sums = [s["tokens"] for s in plan["shards"]][:-1]
    if not sums:
        return 0.0
    return max(abs(t - plan["shard_tokens"]) / plan["shard_tokens"] for t in sums)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=40)
    # the six web-prose templates its recorded figures were measured with
    parser.add_argument("--templates", default="easy,encyclopedic,faq,qa,summary,tutorial")
    parser.add_argument("--styles-per-doc", type=int, default=2)
    parser.add_argument("--shard-tokens", type=int, default=2_000_000)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args()

    os.environ.setdefault("SYNTHFACTORY_SPARK_DRIVER_MEMORY", "3g")
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS",
                          "--conf spark.ui.showConsoleProgress=false pyspark-shell")
    work = Path(args.work or tempfile.mkdtemp(prefix="stitch-bench-"))
    if args.work and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    templates = load_templates(args.templates.split(","))
    model_dir = str(default_model_dir())
    print(f"cores={os.cpu_count()} docs={args.docs} files={args.files} "
          f"templates={len(templates)} styles_per_doc={args.styles_per_doc} "
          f"shard_tokens={args.shard_tokens} max_new_tokens={args.max_new_tokens} "
          f"max_model_len={args.max_model_len} driver_memory="
          f"{os.environ['SYNTHFACTORY_SPARK_DRIVER_MEMORY']} work={work}", flush=True)

    started = time.perf_counter()
    manifest, injected = build_corpus(work, args.docs, args.files, args.seed)
    files = manifest_files(manifest)
    corpus_bytes = sum(os.path.getsize(_local(u)) for u in files)
    print(f"corpus: {len(files)} files, {corpus_bytes / 2**20:.1f} MiB parquet, built in "
          f"{time.perf_counter() - started:.1f} s", flush=True)
    print(f"injected bad rows: {dict(sorted(injected.items()))}", flush=True)

    print_machine()
    base_run = str(work / "baseline-run")
    started = time.perf_counter()
    base_plan = stitch_baseline(
        files, base_run, templates, tokens.tokenizer_json(model_dir), args.shard_tokens,
        args.styles_per_doc, args.max_new_tokens, args.max_model_len, seed=args.seed)
    base_s = time.perf_counter() - started
    print(f"baseline: {base_s:.1f} s, {base_plan['rows_in'] / base_s:,.0f} docs/s, "
          f"{base_plan['prompt_rows']} prompt rows in {len(base_plan['shards'])} shards, "
          f"{base_plan['quarantined']} quarantined", flush=True)
    gc.collect()

    from synthfactory.stitch.job import StitchConfig, stitch
    from synthfactory.stitch.spark_session import spark_session

    spark_run = f"file://{work}/spark-run"
    cfg = StitchConfig(
        files=files, run=RunLayout(spark_run), templates=templates, model_dir=model_dir,
        shard_tokens=args.shard_tokens, styles_per_doc=args.styles_per_doc,
        max_new_tokens=args.max_new_tokens, max_model_len=args.max_model_len, seed=args.seed)
    started = time.perf_counter()
    spark = spark_session("local[*]")
    spark.sparkContext.setLogLevel("ERROR")
    startup_s = time.perf_counter() - started
    started = time.perf_counter()
    try:
        spark_plan = stitch(cfg, spark)
    finally:
        job_s = time.perf_counter() - started
        spark.stop()
    print_machine()
    docs = spark_plan["rows_in"]
    print(f"spark: session start-up {startup_s:.1f} s, job {job_s:.1f} s, "
          f"{docs / job_s:,.0f} docs/s ({docs / (job_s + startup_s):,.0f} with start-up), "
          f"{spark_plan['prompt_rows']} prompt rows in {len(spark_plan['shards'])} shards, "
          f"{spark_plan['quarantined']} quarantined", flush=True)
    for name, plan in (("spark", spark_plan), ("baseline", base_plan)):
        print(f"quarantine reasons ({name}): {_reasons(plan['quarantine_reasons'])}")

    problems = compare(_local(spark_run), base_run, spark_plan, base_plan)
    tokens_all = sum(s["tokens"] for s in spark_plan["shards"])
    sums = [s["tokens"] for s in spark_plan["shards"]]
    dev = balance(spark_plan)
    print(f"shards: {len(sums)} of budget {args.shard_tokens}, {tokens_all:,} tokens "
          f"(prompt + max new); min/max (last excluded) {min(sums[:-1] or sums)}/"
          f"{max(sums[:-1] or sums)}, last {sums[-1]}; baseline balance {balance(base_plan):.4f}")
    if problems:
        print("EQUIVALENCE FAILED: " + "; ".join(problems))
    else:
        print("equivalence: identical prompt rows, shards and quarantine")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    spark_rate, base_rate = docs / job_s, base_plan["rows_in"] / base_s
    print(result_line("stitch", docs=docs, spark_docs_per_s=f"{spark_rate:.0f}",
                      baseline_docs_per_s=f"{base_rate:.0f}",
                      ratio=f"{spark_rate / base_rate:.3f}", shard_balance_max_dev=f"{dev:.4f}"))
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
