"""What a run's prompts are made from, as one hash (``inputs`` in shards.json): the seed
files the manifest lists with their sizes, ETags and modification times, the templates
and routing table chosen, the tokenizer, and every option that changes a prompt row. A
stitch that finds shards.json written from the same inputs has nothing to do and starts
no Spark: a DAG run cleared or triggered again after a later step failed does not stitch
its day again (at scale, hours of Spark), while a corrected partition (a new ETag or
time in the manifest), an edited template or another budget does.

Left out on purpose: how the work is spread (``--master``, ``--partitions``, the
executors), which does not change a prompt row (docs/adr/0153).
"""

from __future__ import annotations

import hashlib
import json

from synthfactory import storage
from synthfactory.contract.run_format import RUN_FORMAT
from synthfactory.stitch.config import StitchConfig

# the options of StitchConfig that change what a prompt row holds or where it goes
ROW_OPTIONS = ("shard_tokens", "styles_per_doc", "max_new_tokens", "max_model_len",
               "text_column", "id_column", "quality_column", "min_quality", "domain_column",
               "seed", "chunking")


def manifest_entries(manifest_url: str) -> list[tuple]:
    """(key, size, ETag, last modified) of every seed file the manifest's parts list,
    sorted, once each (a local file has no ETag: its time tells a rewrite)."""
    entries = set()
    for part in storage.list_files(manifest_url, suffix=".parquet"):
        if not part.rsplit("/", 1)[-1].startswith("part-"):
            continue
        table = storage.read_table(part)
        columns = [c if c in table.column_names else None for c in ("key", "size", "etag",
                                                                     "last_modified")]
        if columns[0] is None:
            continue  # manifest_files says which part lacks its keys
        values = [table.column(c).to_pylist() if c else [None] * table.num_rows
                  for c in columns]
        entries.update(zip(*values, strict=True))
    return sorted(entries, key=lambda e: tuple(map(str, e)))


def fingerprint(cfg: StitchConfig, entries: list, tokenizer: str) -> str:
    """``sha256:`` of the inputs (module doc); ``tokenizer``: tokenizer.json's text."""
    doc = {
        "files": [list(e) for e in entries],
        "templates": [[t.id, t.version, t.hash] for t in cfg.templates],
        "routing": cfg.routing.hash if cfg.routing is not None else None,
        "tokenizer": hashlib.sha256(tokenizer.encode()).hexdigest(),
        "options": {name: getattr(cfg, name) for name in ROW_OPTIONS},
        "run_format": RUN_FORMAT,
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
