"""Run with .venv-worker's python: how many (id, template_id) of a run's prompt shards are
missing from, or repeated in, generated + quarantine parts. Prints one JSON line."""

import json
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq


def keys(files):
    found = Counter()
    for f in files:
        table = pq.read_table(f, columns=["id", "template_id"])
        found.update(zip(table.column("id").to_pylist(), table.column("template_id").to_pylist(),
                         strict=True))
    return found


run = Path(sys.argv[1])
prompts = keys(sorted((run / "prompts").glob("shard-*.parquet")))
written = keys(sorted((run / "generated").glob("shard-*/part-*.parquet"))) + keys(
    sorted((run / "quarantine" / "rephrase").glob("shard-*/*.parquet")))
print(json.dumps({
    "prompts": sum(prompts.values()),
    "written": sum(written.values()),
    "lost": sum(1 for k in prompts if k not in written),
    "duplicated": sum(n - 1 for n in written.values() if n > 1),
    "unknown": sum(1 for k in written if k not in prompts),
}))
