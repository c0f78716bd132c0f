"""The replay index's cost (docs/adr/0150): its size per million attempts, the key's
cost per attempt, and one shard's lookup against reading the whole index.

An index of ``--entries`` attempts is built as rephrase builds it: one segment per
committed shard of ``--shard-rows`` rows, then compacted into its 256 buckets. A new
shard of ``--shard-rows`` rows then looks up the keys of its rows' three attempts: half
of its rows were committed before (their first attempt is in the index), half are new.
The baseline reads every file of the index whole and filters it (what a lookup without
the buckets' sorted row groups would do).

    .venv-worker/bin/python benchmarks/replay_index.py [--entries 1000000 --shard-rows 2000]

Last line: ``RESULT replay_index entries=N bytes_per_million=B key_us=K
lookup_ms_per_row=L scan_ms_per_row=S lookup_vs_scan=R read_share=F isa=...``: the
compacted index's bytes per million entries; microseconds to compute one attempt's key
(a realistic request of about 2,000 characters); the lookup's milliseconds per shard
row, and the full scan's; their ratio (lower is better; above 1 the lookup lost); the
share of the index's entries the lookup read.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time

import pyarrow as pa
from machine import print_machine, result_line  # this folder is on sys.path

from synthfactory import storage
from synthfactory.rephrase.replay.index import ENTRY_SCHEMA, ReplayIndex
from synthfactory.rephrase.replay.key import attempt_key, basis


def segment(shard: int, rows: int) -> pa.Table:
    keys = [hashlib.sha256(f"{shard}-{r}".encode()).digest()[:16] for r in range(rows)]
    return pa.table({
        "key": pa.array(keys, pa.binary(16)),
        "run": [f"file:///root/pipe/day-{shard // 100}"] * rows,
        "shard": [f"shard-{shard:05d}"] * rows, "commit": [f"sha256:{shard:064x}"] * rows,
        "part": [f"part-{r // 64:05d}.parquet" for r in range(rows)],
        "row": list(range(rows)), "attempt": [1] * rows, "output_tokens": [900] * rows,
        "committed_at": [1_700_000_000 + shard] * rows}, schema=ENTRY_SCHEMA)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--shard-rows", type=int, default=2000)
    args = parser.parse_args()
    shards = args.entries // args.shard_rows
    with tempfile.TemporaryDirectory(prefix="bench-replay-index-") as tmp:
        index = ReplayIndex(f"file://{tmp}")
        for s in range(shards):
            index.write_segment("file:///root/pipe/day", f"shard-{s:05d}", f"c{s}",
                                segment(s, args.shard_rows))
        print_machine()
        compacted = index.compact()
        size = index.size()
        print(f"built {size['entries']} entries in {shards} segments, compacted in "
              f"{compacted['seconds']:.1f} s into {size['files']} files, {size['bytes']} B",
              flush=True)

        digest = basis("vllm", "sha256:" + "0" * 64, {"dtype": "bfloat16"}, False).digest
        request = "Rewrite the following text as an encyclopedia entry. " + "word " * 390
        started = time.perf_counter()
        for attempt in range(10_000):
            attempt_key(digest, f"doc-{attempt}", "You are a writer.", request,
                        ("encyclopedic", 1, "sha256:abc"), '{"max_tokens": 900}', 1)
        key_us = (time.perf_counter() - started) / 10_000 * 1e6

        # a shard: half its rows committed before (shard 7's first attempts), half new,
        # three attempts each looked up, as the worker's prefetch does
        half = args.shard_rows // 2
        old = segment(7, half).column("key").to_pylist()
        new = [hashlib.sha256(f"new-{r}-{a}".encode()).digest()[:16]
               for r in range(args.shard_rows) for a in range(3)]
        wanted = old + new[: 3 * args.shard_rows - half]
        read: list[int] = []
        original = ReplayIndex._read_selected

        def counting(url, keys):
            table = original(url, keys)
            read.append(table.num_rows)
            return table

        ReplayIndex._read_selected = staticmethod(counting)
        started = time.perf_counter()
        found = index.lookup(wanted)
        lookup_s = time.perf_counter() - started
        ReplayIndex._read_selected = staticmethod(original)
        assert len(found) == half, f"{len(found)} of {half} committed keys found"

        started = time.perf_counter()
        key_set = pa.array(sorted(set(wanted)), pa.binary(16))
        hits = 0
        for url in storage.list_files(index.url, suffix=".parquet"):
            table = storage.read_table(url)
            hits += table.filter(pa.compute.is_in(table.column("key"),
                                                  value_set=key_set)).num_rows
        scan_s = time.perf_counter() - started
        assert hits == half
        print_machine()
        per_million = size["bytes"] * 1_000_000 / size["entries"]
        print(f"lookup of {len(wanted)} keys ({args.shard_rows} rows x 3 attempts, half of "
              f"the rows committed before): {lookup_s * 1000:.1f} ms, {sum(read)} entries "
              f"read of {size['entries']}; full scan {scan_s * 1000:.1f} ms")
        print(result_line(
            "replay_index", entries=size["entries"], bytes_per_million=round(per_million),
            key_us=f"{key_us:.1f}",
            lookup_ms_per_row=f"{lookup_s * 1000 / args.shard_rows:.3f}",
            scan_ms_per_row=f"{scan_s * 1000 / args.shard_rows:.3f}",
            lookup_vs_scan=f"{lookup_s / scan_s:.3f}",
            read_share=f"{sum(read) / size['entries']:.3f}"))


if __name__ == "__main__":
    main()
