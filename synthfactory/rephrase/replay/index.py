"""The replay index: request key -> where an attempt with that key was committed.

Layout under ``{root}/{pipeline}/replay_index/``, beside the pipeline's run folders
(docs/adr/0150; ``replayer.index_home``):

- ``segments/{id}.parquet``: one per committed shard, written after its commit, sorted
  by key. Named by the commit (its run, shard and output checksum), written
  create-if-absent: a rerun that finds the shard committed writes a missing one again.
- ``buckets/{bb}/{id}.parquet``: compacted entries whose key's first byte is ``bb``
  (256 buckets), sorted by key, in row groups of ``ROW_GROUP`` entries whose min and
  max keys the Parquet footer holds.

A lookup of a shard's keys reads the footer of each bucket file its keys fall in and
only the row groups whose key range holds one of them, plus the segments not yet
compacted. Compaction folds the segments into the buckets (new bucket files first,
then the segments deleted: a reader never misses an entry, at worst sees one twice)
and merges a bucket's files once there are ``BUCKET_FILES`` of them; it runs when a
lookup finds ``AUTO_COMPACT`` segments or more, and with ``synthfactory replay compact``,
which also drops entries committed before a cutoff. Two compactions at once only
write an entry twice, which the next one merges away. Entries are pointers, never
outputs: the index holds about 60 bytes per attempt.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.rephrase.replay.key import KEY_BYTES

log = logging.getLogger(__name__)

ENTRY_SCHEMA = pa.schema([
    ("key", pa.binary(KEY_BYTES)),
    ("run", pa.string()), ("shard", pa.string()),
    ("commit", pa.string()),  # the origin commit's output checksum
    ("part", pa.string()), ("row", pa.int64()), ("attempt", pa.int32()),
    ("output_tokens", pa.int64()),
    ("committed_at", pa.int64()),  # unix seconds: the newest entry of a key is tried first
])
ROW_GROUP = 1024
BUCKET_FILES = 8
AUTO_COMPACT = 64
SEGMENTS, BUCKETS = "segments", "buckets"


@dataclass(frozen=True)
class Entry:
    key: bytes
    run: str
    shard: str
    commit: str
    part: str
    row: int
    attempt: int
    output_tokens: int
    committed_at: int

    @property
    def origin(self) -> tuple[str, str, str]:
        return self.run, self.shard, self.commit


def index_url(root: str) -> str:
    return storage.join(root, paths.REPLAY_INDEX)


def segment_name(run: str, shard: str, commit: str) -> str:
    return hashlib.sha256(f"{run}\0{shard}\0{commit}".encode()).hexdigest()[:32] + ".parquet"


class ReplayIndex:
    def __init__(self, root: str):
        self.root = storage.normalize(root)
        self.url = index_url(self.root)

    # -- writing -----------------------------------------------------------------------
    def has_segment(self, run: str, shard: str, commit: str) -> bool:
        return storage.exists(storage.join(self.url, SEGMENTS, segment_name(run, shard, commit)))

    def write_segment(self, run: str, shard: str, commit: str, entries: pa.Table) -> bool:
        """The committed shard's entries; False when its segment is already there."""
        url = storage.join(self.url, SEGMENTS, segment_name(run, shard, commit))
        try:
            storage.create_table(_sorted(entries), url)
        except storage.AlreadyExists:
            return False
        return True

    # -- reading -----------------------------------------------------------------------
    def segments(self) -> list[str]:
        return storage.list_files(storage.join(self.url, SEGMENTS), suffix=".parquet")

    def lookup(self, keys: Iterable[bytes], run: str | None = None) -> dict[bytes, list[Entry]]:
        """Every entry of each key (of origin run ``run`` only, when given), newest first."""
        wanted = sorted(set(keys))
        found: dict[bytes, list[Entry]] = defaultdict(list)
        if not wanted:
            return found
        tables = [self._read_selected(url, wanted) for url in self.segments()]
        by_bucket: dict[int, list[bytes]] = defaultdict(list)
        for key in wanted:
            by_bucket[key[0]].append(key)
        for bucket, bucket_keys in by_bucket.items():
            folder = storage.join(self.url, BUCKETS, f"{bucket:02x}")
            tables += [self._read_selected(url, bucket_keys)
                       for url in storage.list_files(folder, suffix=".parquet")]
        key_set = pa.array(wanted, pa.binary(KEY_BYTES))
        for table in tables:
            table = table.filter(pc.is_in(table.column("key"), value_set=key_set))
            if run is not None:
                table = table.filter(pc.equal(table.column("run"), run))
            for row in table.to_pylist():
                found[row["key"]].append(Entry(**row))
        for key, entries in found.items():
            unique = {e: None for e in entries}  # a compaction racing another: twice
            found[key] = sorted(unique, key=lambda e: -e.committed_at)
        return found

    @staticmethod
    def _read_selected(url: str, keys: list[bytes]) -> pa.Table:
        """The row groups of ``url`` whose [min, max] key range holds one of ``keys``
        (sorted): a file's footer, then only those row groups."""
        fs, path = storage.filesystem(url)
        try:
            handle = fs.open_input_file(path)
        except FileNotFoundError:  # folded by a compaction since it was listed: its
            return ENTRY_SCHEMA.empty_table()  # entries are in a bucket file written first
        with handle:
            parquet = pq.ParquetFile(handle)
            column = parquet.schema_arrow.get_field_index("key")
            groups = []
            for i in range(parquet.metadata.num_row_groups):
                stats = parquet.metadata.row_group(i).column(column).statistics
                if stats is None or not stats.has_min_max:
                    groups.append(i)
                    continue
                at = bisect.bisect_left(keys, stats.min)
                if at < len(keys) and keys[at] <= stats.max:
                    groups.append(i)
            if not groups:
                return ENTRY_SCHEMA.empty_table()
            return parquet.read_row_groups(groups).cast(ENTRY_SCHEMA)

    # -- compaction --------------------------------------------------------------------
    def maybe_compact(self) -> None:
        """Fold the segments into buckets once there are ``AUTO_COMPACT`` of them; a
        failure leaves the index as it was (a lookup still reads the segments)."""
        if len(self.segments()) < AUTO_COMPACT:
            return
        try:
            self.compact()
        except Exception as exc:  # the index is an optimisation: never fail a shard on it
            log.warning("%s: compaction failed, the segments stay (%s)", self.url, exc)

    def compact(self, drop_before: int | None = None) -> dict:
        """Fold every segment into its buckets; with ``drop_before`` (unix seconds) also
        rewrite every bucket without the entries committed before it."""
        started = time.monotonic()
        segments = self.segments()
        new = (pa.concat_tables([storage.read_table(u).cast(ENTRY_SCHEMA) for u in segments])
               if segments else ENTRY_SCHEMA.empty_table())
        first = _first_bytes(new)  # each entry's bucket: its key's first byte
        buckets_touched = set(first) if drop_before is None else set(range(256))
        written = dropped = 0
        for bucket in sorted(buckets_touched):
            folder = storage.join(self.url, BUCKETS, f"{bucket:02x}")
            existing = storage.list_files(folder, suffix=".parquet")
            mine = new.filter(pc.equal(pa.array(first, pa.uint8()), bucket)) if len(first) \
                else ENTRY_SCHEMA.empty_table()
            merge = existing if (drop_before is not None
                                 or len(existing) + 1 >= BUCKET_FILES) else []
            parts = [mine] + [storage.read_table(u).cast(ENTRY_SCHEMA) for u in merge]
            table = pa.concat_tables(parts)
            if drop_before is not None:
                before = table.num_rows
                table = table.filter(pc.greater_equal(table.column("committed_at"),
                                                      drop_before))
                dropped += before - table.num_rows
            table = _sorted(_unique(table))
            if table.num_rows:
                storage.write_table(table, storage.join(folder, f"{uuid.uuid4().hex}.parquet"),
                                    row_group_size=ROW_GROUP)
                written += table.num_rows
            for url in merge:  # after the new file: a reader never misses an entry
                storage.delete(url)
        for url in segments:
            storage.delete(url)
        return {"segments_folded": len(segments), "entries_written": written,
                "entries_dropped": dropped, "seconds": round(time.monotonic() - started, 3)}

    def size(self) -> dict:
        """Entries and bytes of the index (segments and buckets)."""
        fs, _ = storage.filesystem(self.url)
        files = storage.list_files(self.url, suffix=".parquet")
        entries = sum(pq.ParquetFile(storage.filesystem(u)[1], filesystem=fs).metadata.num_rows
                      for u in files)
        size = sum(fs.get_file_info(storage.filesystem(u)[1]).size for u in files)
        return {"files": len(files), "entries": entries, "bytes": size}


def _first_bytes(table: pa.Table) -> list[int]:
    return [k[0] for k in table.column("key").to_pylist()]


def _unique(table: pa.Table) -> pa.Table:
    """One row per distinct entry (two compactions at once may have written one twice)."""
    if not table.num_rows:
        return table
    return table.group_by(ENTRY_SCHEMA.names, use_threads=False).aggregate([]) \
        .select(ENTRY_SCHEMA.names).cast(ENTRY_SCHEMA)


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([("key", "ascending"), ("committed_at", "descending")])
