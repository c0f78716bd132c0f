"""Part files of one shard: what is already done, and writing the next part.

Parts are filled in completion order (the engine never idles waiting for a slow row)
and named ``part-00000.parquet``, ``part-00001.parquet``, ... Each part carries its own
expected counts in the parquet footer; a part that is unreadable or disagrees with its
footer is torn and discarded, with its quarantine twin. The footer also records the
checksum of the prompt shard the part was generated from: a part of other prompts is
stale, and the worker sets the whole shard aside rather than mix old and new rows.
The attempts twin (every attempt finished in the part, the chosen ones and those
rejected and tried again: docs/adr/0141) and the quarantine twin are written first and
the generated part last, so a part's presence means all three are whole. A row whose
attempts are in parts but that has no generated or quarantine row yet is resumed at
its next attempt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pyarrow as pa

from synthfactory import storage
from synthfactory.contract.paths import part_name
from synthfactory.errors import RetryableError, SynthfactoryError
from synthfactory.faults import pause_point

log = logging.getLogger(__name__)

GENERATED_SCHEMA = pa.schema([
    ("id", pa.string()), ("template_id", pa.string()), ("template_version", pa.int32()),
    ("row", pa.int64()), ("output_text", pa.string()), ("prompt_tokens", pa.int64()),
    ("output_tokens", pa.int64()), ("finish_reason", pa.string()), ("model", pa.string()),
    # the attempt chosen (1-based) and the tokens of its output kept: output_tokens but
    # for a trimmed output (finish_reason "trimmed"), whose cut-off tail is not kept
    ("attempt", pa.int32()), ("kept_tokens", pa.int64()),
])
QUARANTINE_SCHEMA = pa.schema([
    ("id", pa.string()), ("template_id", pa.string()), ("row", pa.int64()),
    ("reason", pa.string()),
])
# Every attempt of a row, in attempts/{shard}/part-N.parquet: its raw output, the
# worker's verdict on it, the sampling it ran with and whether it is the row's output.
ATTEMPTS_SCHEMA = pa.schema([
    ("id", pa.string()), ("template_id", pa.string()), ("row", pa.int64()),
    ("attempt", pa.int32()), ("output_text", pa.string()), ("prompt_tokens", pa.int64()),
    ("output_tokens", pa.int64()), ("finish_reason", pa.string()),
    ("reasons", pa.list_(pa.string())), ("repair", pa.string()), ("chosen", pa.bool_()),
    ("sampling", pa.string()),  # JSON: what this attempt's request was sampled with
    # the attempt's request key (hex; replay/key.py) and, for an attempt not generated but
    # replayed from an earlier commit, where it came from (replay/origin.py's locator)
    ("request_key", pa.string()), ("replayed_from", pa.string()),
])
_META_GENERATED = b"synthfactory.generated_rows"
_META_ATTEMPTS = b"synthfactory.attempt_rows"
_META_QUARANTINED = b"synthfactory.quarantined_rows"
_META_PROMPT_CHECKSUM = b"synthfactory.prompt_checksum"


class ConcurrentWriter(RetryableError):
    """A second writer is on the same shard; this one stops without committing. Retried:
    the rival is usually an earlier attempt still running, committed or gone by the next."""


@dataclass
class PartRecord:
    name: str
    rows: int
    quarantined: int
    row_indices: list[int] = field(repr=False)
    prompt_tokens: int = 0
    output_tokens: int = 0
    prompt_checksum: str | None = None
    # (row, attempt) of each attempt in the part, and the tokens they generated
    attempts: list[tuple[int, int]] = field(default_factory=list, repr=False)
    attempt_tokens: int = 0
    chosen: list[int] = field(default_factory=list, repr=False)  # the chosen attempts' numbers
    # attempts replayed from an earlier commit (docs/adr/0150): how many, their tokens
    # (in attempt_tokens too), and how many of them are their row's chosen one
    replayed: int = 0
    replayed_tokens: int = 0
    replayed_chosen: int = 0


@dataclass
class ShardParts:
    """The parts of one shard found on storage, checked."""

    out_url: str          # {run}/generated/shard-XXXXX
    quarantine_url: str   # {run}/quarantine/rephrase/shard-XXXXX
    attempts_url: str     # {run}/attempts/shard-XXXXX
    parts: list[PartRecord] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)
    prompt_checksum: str | None = None  # written into every new part's footer

    @property
    def done_rows(self) -> set[int]:
        return {row for part in self.parts for row in part.row_indices}

    def attempts_made(self) -> dict[int, int]:
        """Row -> the last attempt in the parts (rows with none are absent)."""
        made: dict[int, int] = {}
        for part in self.parts:
            for row, attempt in part.attempts:
                made[row] = max(made.get(row, 0), attempt)
        return made

    def next_index(self) -> int:
        taken = {int(p.name[5:10]) for p in self.parts}
        index = 0
        while index in taken:
            index += 1
        return index

    @classmethod
    def scan(cls, out_url: str, quarantine_url: str, attempts_url: str, rows_in: int,
             prompt_checksum: str | None = None) -> ShardParts:
        found = cls(out_url, quarantine_url, attempts_url, prompt_checksum=prompt_checksum)
        seen: set[int] = set()
        tried: set[tuple[int, int]] = set()
        for url in storage.list_files(out_url, suffix=".parquet"):
            name = url.rsplit("/", 1)[-1]
            if not name.startswith("part-"):
                continue
            record = _check_part(url, storage.join(quarantine_url, name),
                                 storage.join(attempts_url, name), rows_in, seen, tried,
                                 prompt_checksum)
            if record is None:
                found.discard(name)
            else:
                if record.prompt_checksum == prompt_checksum:
                    seen.update(record.row_indices)
                    tried.update(record.attempts)
                found.parts.append(record)
        found.drop_orphan_twins()
        return found

    def drop_orphan_twins(self) -> None:
        """Twins are written before their generated part: a kill between the two leaves a
        twin with no part. Its rows are not done, so it is deleted, not resumed from, and
        the next part may take its name."""
        names = {p.name for p in self.parts} | set(self.discarded)
        for folder in (self.quarantine_url, self.attempts_url):
            for url in storage.list_files(folder, suffix=".parquet"):
                name = url.rsplit("/", 1)[-1]
                if name.startswith("part-") and name not in names:
                    log.warning("deleting %s: its generated part was never written", url)
                    storage.delete(url)

    def discard(self, name: str) -> None:
        log.warning("discarding torn or inconsistent part %s/%s", self.out_url, name)
        storage.delete(storage.join(self.out_url, name))
        storage.delete(storage.join(self.quarantine_url, name))
        storage.delete(storage.join(self.attempts_url, name))
        self.discarded.append(name)

    def write(self, generated: pa.Table, quarantined: pa.Table,
              attempts: pa.Table | None = None) -> PartRecord:
        name = part_name(self.next_index())
        attempts = attempts if attempts is not None else ATTEMPTS_SCHEMA.empty_table()
        metadata = {_META_GENERATED: str(generated.num_rows).encode(),
                    _META_QUARANTINED: str(quarantined.num_rows).encode(),
                    _META_ATTEMPTS: str(attempts.num_rows).encode()}
        if self.prompt_checksum:
            metadata[_META_PROMPT_CHECKSUM] = self.prompt_checksum.encode()
        try:  # create-if-absent: a part is never overwritten, by us or a rival writer
            if attempts.num_rows:
                storage.create_table(attempts, storage.join(self.attempts_url, name))
            if quarantined.num_rows:
                storage.create_table(quarantined, storage.join(self.quarantine_url, name))
            storage.create_table(generated.replace_schema_metadata(metadata),
                                 storage.join(self.out_url, name))
        except storage.AlreadyExists as exc:
            raise ConcurrentWriter(f"{self.out_url}: {name} appeared under this writer: "
                                   "another writer is on the shard; failing closed") from exc
        record = _record(name, generated, quarantined, self.prompt_checksum, attempts)
        self.parts.append(record)
        pause_point("rephrase:part-written")
        return record

    def check_no_rival(self) -> None:
        """Re-scan just before the commit: every part on storage must be one this writer
        wrote or resumed from. Anything else means a second writer: fail closed."""
        known = {p.name for p in self.parts}
        for folder in (self.out_url, self.quarantine_url, self.attempts_url):
            found = {u.rsplit("/", 1)[-1] for u in storage.list_files(folder, suffix=".parquet")}
            if found - known:
                raise ConcurrentWriter(
                    f"{folder}: part(s) {sorted(found - known)} written by another writer "
                    "since this one scanned the shard; failing closed, not committing")

    def stale_parts(self) -> list[str]:
        """Parts generated from other prompts than ``prompt_checksum`` (or unmarked)."""
        return [p.name for p in self.parts if p.prompt_checksum != self.prompt_checksum]


def _record(name: str, generated: pa.Table, quarantined: pa.Table,
            prompt_checksum: str | None = None, attempts: pa.Table | None = None
            ) -> PartRecord:
    rows = generated.column("row").to_pylist() + quarantined.column("row").to_pylist()
    tried = (list(zip(attempts.column("row").to_pylist(), attempts.column("attempt").to_pylist(),
                      strict=True)) if attempts is not None and attempts.num_rows else [])
    chosen = ([a for a, c in zip(attempts.column("attempt").to_pylist(),
                                 attempts.column("chosen").to_pylist(), strict=True) if c]
              if tried else [])
    replayed = _replayed(attempts) if tried else (0, 0, 0)
    return PartRecord(
        attempts=tried, chosen=chosen, replayed=replayed[0], replayed_tokens=replayed[1],
        replayed_chosen=replayed[2],
        attempt_tokens=(int(pa.compute.sum(attempts.column("output_tokens")).as_py() or 0)
                        if tried else 0),
        name=name, rows=generated.num_rows, quarantined=quarantined.num_rows,
        row_indices=rows,
        prompt_tokens=int(pa.compute.sum(generated.column("prompt_tokens")).as_py() or 0),
        output_tokens=int(pa.compute.sum(generated.column("output_tokens")).as_py() or 0),
        prompt_checksum=prompt_checksum,
    )


def _replayed(attempts: pa.Table) -> tuple[int, int, int]:
    """(attempts, output tokens, chosen attempts) replayed, of one attempts part."""
    if "replayed_from" not in attempts.column_names:
        return 0, 0, 0
    rows = attempts.select(["replayed_from", "output_tokens", "chosen"]).to_pylist()
    mine = [r for r in rows if r["replayed_from"] is not None]
    return (len(mine), sum(r["output_tokens"] or 0 for r in mine),
            sum(1 for r in mine if r["chosen"]))


def _check_part(url: str, quarantine_url: str, attempts_url: str, rows_in: int,
                seen: set[int], tried: set[tuple[int, int]],
                prompt_checksum: str | None) -> PartRecord | None:
    try:
        generated = storage.read_table(url)
        meta = generated.schema.metadata or {}
        expected_generated = int(meta[_META_GENERATED])
        expected_quarantined = int(meta[_META_QUARANTINED])
        # parts from before attempts were kept have none
        expected_attempts = int(meta.get(_META_ATTEMPTS, b"0"))
        quarantined = (storage.read_table(quarantine_url) if expected_quarantined
                       else QUARANTINE_SCHEMA.empty_table())
        attempts = (storage.read_table(attempts_url) if expected_attempts
                    else ATTEMPTS_SCHEMA.empty_table())
    except (SynthfactoryError, KeyError, ValueError, OSError):
        return None
    if (generated.num_rows != expected_generated or quarantined.num_rows != expected_quarantined
            or attempts.num_rows != expected_attempts):
        return None
    checksum = meta.get(_META_PROMPT_CHECKSUM)
    record = _record(url.rsplit("/", 1)[-1], generated, quarantined,
                     checksum.decode() if checksum else None, attempts)
    if record.prompt_checksum != prompt_checksum:
        return record  # whole but stale: the caller sets it aside, rows are not checked
    rows = record.row_indices
    if len(set(rows)) != len(rows) or seen.intersection(rows) or any(
        not 0 <= r < rows_in for r in rows
    ):
        return None
    pairs = record.attempts
    if (len(set(pairs)) != len(pairs) or tried.intersection(pairs)
            or any(not 0 <= r < rows_in for r, _ in pairs)):
        return None
    return record
