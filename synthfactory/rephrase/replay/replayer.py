"""What the worker asks of replay: is this row's attempt already committed somewhere,
and what to index once its shard is committed.

Before a shard's first request, the keys of every pending row's remaining attempts are
looked up at once (one read of the index per shard, not one per row); their origins
are loaded and checked once each. A hit is handed to the attempt loop as a completion,
judged by the gate like one from the engine, and written with ``replayed_from``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from synthfactory import storage
from synthfactory.errors import SynthfactoryError
from synthfactory.rephrase.replay import origin as origins
from synthfactory.rephrase.replay.index import ENTRY_SCHEMA, ReplayIndex
from synthfactory.rephrase.replay.key import KeyBasis, attempt_key

log = logging.getLogger(__name__)

TRIMMED = "trimmed"


@dataclass(frozen=True)
class ReplayOptions:
    """Picklable (a Ray replica's worker gets it): the key's basis, whether to look
    attempts up, and where (folders holding a replay index, each with the one run it is
    limited to, or None)."""

    basis: KeyBasis
    lookup: bool = True
    sources: tuple[tuple[str, str | None], ...] = ()  # (): the run's own (index_home)


def index_home(run_url: str) -> str:
    """Where a run's replay index lives: its parent, ``{root}/{pipeline}`` for a DAG's
    run ``{root}/{pipeline}/{interval}``, which every day of the pipeline shares (a run
    folder anywhere else keeps its index beside it, not in a folder it does not own)."""
    return storage.normalize(run_url).rstrip("/").rsplit("/", 1)[0]


def replayable(row: dict) -> bool:
    """An attempt another run may take as its own: not empty, and not a row's output
    that stopped at its budget without the trim cutting it back (a rerun gives such a
    row a fresh draw rather than its truncated text again). An attempt that stopped at
    its budget and was tried again is replayable: its key holds the budget, and
    replaying it leads the gate to the row's next attempt, as it led the first run."""
    stopped = (row.get("finish_reason") == "length" and row.get("repair") != TRIMMED
               and bool(row.get("chosen")))
    return bool((row.get("output_text") or "").strip()) and not stopped


@dataclass(frozen=True)
class Hit:
    text: str
    finish_reason: str
    prompt_tokens: int | None
    output_tokens: int | None
    locator: str


class Replayer:
    def __init__(self, options: ReplayOptions, run_url: str, prompts: pa.Table):
        self.options = options
        self.digest = options.basis.digest
        self.ids = prompts.column("id").to_pylist()
        self.systems = prompts.column("system").to_pylist()
        self.users = prompts.column("user").to_pylist()
        hashes = (prompts.column("template_hash").to_pylist()
                  if "template_hash" in prompts.column_names else [None] * prompts.num_rows)
        self.templates = list(zip(prompts.column("template_id").to_pylist(),
                                  prompts.column("template_version").to_pylist(), hashes,
                                  strict=True))
        self.sources = options.sources or ((index_home(run_url), None),)
        self.hits: dict[tuple[int, int], Hit] = {}
        self.lookup_s = 0.0
        self.keys_looked_up = 0

    def key(self, row: int, attempt: int, sampling: str) -> bytes:
        return attempt_key(self.digest, self.ids[row], self.systems[row], self.users[row],
                           self.templates[row], sampling, attempt)

    def prefetch(self, pending: dict[int, int], max_attempts: int,
                 sampling_of: Callable[[int, int], str]) -> None:
        """Look up attempts ``pending[row]``..``max_attempts`` of each pending row."""
        if not self.options.lookup or not pending:
            return
        started = time.monotonic()
        wanted = {self.key(row, a, sampling_of(row, a)): (row, a)
                  for row, first in pending.items() for a in range(first, max_attempts + 1)}
        self.keys_looked_up = len(wanted)
        loaded: dict[tuple, origins.Origin | None] = {}
        for root, run in self.sources:
            index = ReplayIndex(root)
            index.maybe_compact()
            try:
                found = index.lookup(wanted, run)
            except (SynthfactoryError, OSError, pa.ArrowException) as exc:
                # the index saves work and vouches for nothing: without it, generate
                log.warning("replay: %s unreadable (%s): generating instead", index.url, exc)
                continue
            for key, entries in found.items():
                if wanted[key] in self.hits:
                    continue
                for entry in entries:  # the newest origin that still holds
                    if entry.origin not in loaded:
                        loaded[entry.origin] = origins.load(*entry.origin)
                    origin = loaded[entry.origin]
                    found = origin and origin.attempt(entry.part, entry.row, entry.attempt)
                    if found and found.get("request_key") == key.hex() and replayable(found):
                        self.hits[wanted[key]] = Hit(
                            found["output_text"], found["finish_reason"],
                            found["prompt_tokens"], found["output_tokens"],
                            origin.locator(entry.part, entry.row, entry.attempt))
                        break
        self.lookup_s = time.monotonic() - started
        log.info("replay: %d of %d attempt keys found committed (%.3f s)", len(self.hits),
                 len(wanted), self.lookup_s)

    def hit(self, row: int, attempt: int) -> Hit | None:
        return self.hits.get((row, attempt))


def index_entries(run: str, shard: str, commit: str, attempts: list[tuple[str, pa.Table]],
                  committed_at: int) -> pa.Table:
    """The index's entries of a committed shard: every replayable attempt with a key."""
    rows = []
    for part, table in attempts:
        if "request_key" not in table.column_names:
            continue  # parts from before replay have no keys
        for found in table.to_pylist():
            if found["request_key"] and replayable(found):
                rows.append({"key": bytes.fromhex(found["request_key"]), "run": run,
                             "shard": shard, "commit": commit, "part": part,
                             "row": found["row"], "attempt": found["attempt"],
                             "output_tokens": found["output_tokens"] or 0,
                             "committed_at": committed_at})
    return pa.Table.from_pylist(rows, schema=ENTRY_SCHEMA)
