"""Run with .venv-worker's python: the prompt rows of two stitch outputs, compared row for
row after sorting by (id, template_id). Prints one JSON line."""

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def rows(run: Path) -> list[dict]:
    files = sorted((run / "prompts").glob("shard-*.parquet"))
    table = pa.concat_tables(pq.read_table(f) for f in files) if files else pa.table({})
    found = table.to_pylist()
    # the shard a row landed in is the plan's, not the row's: compare what each row says
    for row in found:
        row.pop("shard", None)
    return sorted(found, key=lambda r: (str(r.get("id")), str(r.get("template_id"))))


a, b = rows(Path(sys.argv[1])), rows(Path(sys.argv[2]))
print(json.dumps({"rows_a": len(a), "rows_b": len(b), "equal": a == b,
                  "columns": sorted(a[0]) if a else []}))
