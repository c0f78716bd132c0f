"""Rephrase one prompt shard exactly once, resuming from its checkpoints.

Every (id, template) of the shard ends in exactly one part or one quarantine part, and
every attempt at it in exactly one attempts part (a row the gate's per-row checks reject
for a reason another sample can fix is generated again, up to ``max_attempts``:
rephrase/attempts.py, docs/adr/0141);
``_COMMITTED.json`` is written last and makes a rerun a no-op, as long as the prompt
shard still has the content checksum the commit records; parts and commits of other
prompts are set aside and the shard is regenerated (never mixed). A crash (engine or
node) leaves at most ``checkpoint_rows - 1`` finished rows unsaved; the retry scans the
parts and generates only what is missing.
"""

from __future__ import annotations

import datetime as dt
import logging
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from synthfactory import storage
from synthfactory.contract import CommittedJson, CommitTimings, paths
from synthfactory.errors import SynthfactoryError
from synthfactory.layout import RunLayout, run_url_of_shard, shard_name
from synthfactory.quality.gate import Gate
from synthfactory.rephrase.attempt_loop import generate, served_model
from synthfactory.rephrase.attempts import Judge
from synthfactory.rephrase.checkpoint import ConcurrentWriter, ShardParts
from synthfactory.rephrase.engines import GenerationEngine
from synthfactory.rephrase.fingerprint import output_checksum, prompt_checksum
from synthfactory.rephrase.replay.index import ReplayIndex
from synthfactory.rephrase.replay.replayer import Replayer, index_entries, index_home
from synthfactory.rephrase.set_aside import set_aside
from synthfactory.rephrase.worker_options import WorkerOptions

log = logging.getLogger(__name__)

PROMPT_COLUMNS = ["id", "template_id", "template_version", "system", "user"]


def shard_paths(shard_url: str, run_url: str | None) -> tuple[str, str, str, str]:
    """The shard's name, and its output, rephrase quarantine and attempts folders."""
    layout = RunLayout(run_url or run_url_of_shard(shard_url))
    name = shard_name(shard_url)
    return (name, layout.shard_output(name), layout.rephrase_quarantine(name),
            layout.shard_attempts(name))


def read_commit(out_url: str) -> CommittedJson | None:
    """The shard's commit, given its output folder ``{run}/generated/{shard}``."""
    return storage.read_json_or_none(storage.join(out_url, paths.COMMITTED))


def rephrase_shard(
    shard_url: str, run_url: str | None, engine: Callable[[], GenerationEngine],
    options: WorkerOptions,
) -> dict:
    started_at, started = _now(), time.monotonic()
    name, out_url, quarantine_url, attempts_url = shard_paths(shard_url, run_url)
    run = run_url or run_url_of_shard(shard_url)
    prompts = storage.read_table(shard_url)
    missing = [c for c in PROMPT_COLUMNS if c not in prompts.column_names]
    if missing:
        raise SynthfactoryError(f"{shard_url}: missing column(s) {missing}")
    checksum = prompt_checksum(prompts)
    set_aside_to = None
    committed = read_commit(out_url)
    if committed is not None:
        if committed.get("prompt_checksum") == checksum:
            log.info("%s is committed from these prompts: nothing to do", name)
            if options.metrics:
                options.metrics.planned(prompts.num_rows, prompts.num_rows)
            if options.replay:  # a kill between the commit and its index entries
                _index(run, name, committed, out_url, quarantine_url, attempts_url)
            return {**_summary(committed), "status": "already committed"}
        set_aside_to = set_aside(
            run, name, out_url, quarantine_url,
            f"committed from other prompts ({committed.get('prompt_checksum')} != {checksum})",
            attempts_url)
    rows_in = prompts.num_rows
    parts = ShardParts.scan(out_url, quarantine_url, attempts_url, rows_in, checksum)
    if parts.stale_parts():
        set_aside_to = set_aside(
            run, name, out_url, quarantine_url,
            f"part(s) {', '.join(parts.stale_parts())} come from other prompts", attempts_url)
        parts = ShardParts.scan(out_url, quarantine_url, attempts_url, rows_in, checksum)
    done = parts.done_rows
    pending = [r for r in range(rows_in) if r not in done]
    made = parts.attempts_made()  # rows a crash left between two attempts resume at the next
    resumed_attempts = sum(len(p.attempts) for p in parts.parts)
    if options.metrics:
        options.metrics.planned(rows_in, rows_in - len(pending))
    log.info("%s: %d rows, %d already in %d part(s), %d to generate",
             name, rows_in, len(done), len(parts.parts), len(pending))
    spans, the_engine = Spans(started), None
    replayer = Replayer(options.replay, run, prompts) if options.replay else None
    if pending:
        def start() -> GenerationEngine:
            """The task's first shard that needs its engine waits for it to start."""
            asked = time.monotonic()
            built = engine()
            spans.startup = (asked, time.monotonic())
            if options.metrics:
                options.metrics.engine_started(spans.startup[1] - spans.startup[0])
            return built

        judge = (Judge(Gate(options.max_repetition, RunLayout(run).prompt_templates),
                       options.max_attempts, options.repairs)
                 if options.max_attempts > 1 or options.repairs else None)
        began = time.monotonic()
        the_engine = generate(prompts, pending, start, parts, options, name, judge,
                              {r: made.get(r, 0) + 1 for r in pending}, replayer)
        spans.generation = (spans.startup[1] if spans.startup else began, time.monotonic())
    parts.check_no_rival()
    commit = _commit(name, shard_url, prompts, parts, options, the_engine, started_at,
                     spans, checksum, replayer)
    try:  # create-if-absent: of two writers racing to commit, exactly one can
        storage.create_json(storage.join(out_url, paths.COMMITTED), commit)
    except storage.AlreadyExists as exc:
        raise ConcurrentWriter(f"{out_url}: committed by another writer meanwhile; "
                               "this writer's work is not committed") from exc
    if options.replay:
        _index(run, name, commit, out_url, quarantine_url, attempts_url)
    return {**_summary(commit), "status": "committed", "resumed_rows": len(done),
            "resumed_attempts": resumed_attempts,
            "discarded_parts": parts.discarded, "set_aside": set_aside_to}



@dataclass
class Spans:
    """Monotonic (start, end) of the engine's start-up and of the generation within a
    shard's wall time, which begins at ``started``."""

    started: float
    startup: tuple[float, float] | None = None
    generation: tuple[float, float] | None = None

    def timings(self, started_at: str) -> CommitTimings:
        """Seconds on one millisecond grid counted from ``started``: rounding each figure
        on its own could make start-up + generation exceed the wall time."""
        def ms(t: float) -> int:
            return round((t - self.started) * 1000)

        def length(span: tuple[float, float] | None) -> int:
            return ms(span[1]) - ms(span[0]) if span else 0

        wall, generation = ms(time.monotonic()), length(self.generation)
        return {"started": started_at, "finished": _now(), "wall_s": wall / 1000,
                "startup_s": length(self.startup) / 1000, "generation_s": generation / 1000,
                "generating_fraction": round(generation / wall, 4) if wall else None}


def _commit(name, shard_url, prompts, parts: ShardParts, options, engine, started_at,
            spans: Spans, checksum: str, replayer: Replayer | None) -> CommittedJson:
    rows_in = prompts.num_rows
    covered = sorted(r for p in parts.parts for r in p.row_indices)
    if covered != list(range(rows_in)):
        raise SynthfactoryError(
            f"{shard_url}: parts cover {len(set(covered))} distinct rows of {rows_in} "
            f"({len(covered)} entries): refusing to commit"
        )
    devices = engine.devices if engine else 0
    output_sum = _output_checksum(parts)  # read back before the clock stops: wall time
    timings = spans.timings(started_at)
    return {
        "shard": name, "prompt_shard": shard_url, "rows_in": rows_in,
        "rows_generated": sum(p.rows for p in parts.parts),
        "rows_quarantined": sum(p.quarantined for p in parts.parts),
        "parts": [{"name": p.name, "rows": p.rows, "quarantined": p.quarantined}
                  for p in sorted(parts.parts, key=lambda p: p.name)],
        "quarantine_parts": [{"name": p.name, "rows": p.quarantined}
                             for p in sorted(parts.parts, key=lambda p: p.name) if p.quarantined],
        "prompt_tokens": sum(p.prompt_tokens for p in parts.parts),
        # every token the engine generated, the attempts it generated again included: the
        # rate and the cost are of them (parts from before attempts count their rows');
        # not the replayed attempts' (``replay``), which no engine generated this time
        "output_tokens": sum((p.attempt_tokens - p.replayed_tokens) if p.attempts
                             else p.output_tokens for p in parts.parts),
        "attempts": _attempt_counts(parts, options),
        "replay": _replay_counts(parts, replayer),
        "prompt_checksum": checksum,
        "output_checksum": output_sum,
        "model": served_model(engine, options),
        "engine_args": engine.engine_args if engine else {},
        # the offline engine's dtype and engine core, each with its reason (engine_choice.py)
        "engine_choice": getattr(getattr(engine, "choice", None), "record", None) or {},
        "sampling": options.sampling or {},
        "timings": timings,
        "device_seconds": round(timings["generation_s"] * devices, 3),
        "device": engine.device if engine else "none",
    }


def _attempt_counts(parts: ShardParts, options: WorkerOptions) -> dict:
    """The attempts of the shard's rows: made in all, and rows per attempt chosen, from
    the parts' records (each read once, when written or scanned)."""
    chosen = Counter(str(a) for p in parts.parts for a in p.chosen)
    return {"max_attempts": options.max_attempts,
            "repair": "trim" if options.repairs else "none",
            "made": sum(len(p.attempts) for p in parts.parts),
            "chosen_at": dict(sorted(chosen.items(), key=lambda kv: int(kv[0])))}



def _replay_counts(parts: ShardParts, replayer: Replayer | None) -> dict:
    """Rows, attempts and tokens replayed from earlier commits, and what was looked up."""
    counts = {"rows": sum(p.replayed_chosen for p in parts.parts),
              "attempts": sum(p.replayed for p in parts.parts),
              "tokens": sum(p.replayed_tokens for p in parts.parts)}
    if replayer is None:
        return {**counts, "keys": False, "lookup": False, "keys_looked_up": 0,
                "lookup_s": 0.0, "basis": {}}
    return {**counts, "keys": True, "lookup": replayer.options.lookup,
            "keys_looked_up": replayer.keys_looked_up,
            "lookup_s": round(replayer.lookup_s, 4), "basis": replayer.options.basis.record}


def _index(run: str, name: str, commit: dict, out_url: str, quarantine_url: str,
           attempts_url: str) -> None:
    """The committed shard's entries in its pipeline's replay index (once per commit:
    a rerun that finds the shard committed writes them if a kill left them unwritten).
    The index saves work later and vouches for nothing: a failure to write it is a line,
    never a failed shard."""
    index = ReplayIndex(index_home(run))
    checksum = commit["output_checksum"]
    try:
        if index.has_segment(run, name, checksum):
            return
        names = [p["name"] for p in commit.get("parts", [])]
        read = _read_back([storage.join(attempts_url, n) for n in names], missing_ok=True)
        tables = [(n, table) for n, table in zip(names, read, strict=True) if table is not None]
        entries = index_entries(run, name, checksum, tables, int(time.time()))
        index.write_segment(run, name, checksum, entries)
    except (SynthfactoryError, OSError) as exc:
        log.warning("%s: its replay index entries were not written (%s): a later run "
                    "generates its rows again", name, exc)


def _output_checksum(parts: ShardParts) -> str:
    """Read back what was written: the commit vouches for the files, not for memory."""
    generated = _read_back([storage.join(parts.out_url, p.name) for p in parts.parts])
    quarantined = _read_back([storage.join(parts.quarantine_url, p.name)
                              for p in parts.parts if p.quarantined])
    attempts = _read_back([storage.join(parts.attempts_url, p.name)
                           for p in parts.parts if p.attempts])
    return output_checksum(generated, quarantined, attempts)


READ_BACK_THREADS = 16


def _read_back(urls: list[str], missing_ok: bool = False) -> list:
    """The tables at ``urls``, in order, read side by side: one after the other, a shard's
    read-back waited out every request's latency in turn (50 requests of 5 parts: 10 s
    of 17 at 200 ms a request, benchmarks/storage_faults.py). ``missing_ok``: None for
    a file that is not there."""
    def read(url: str):
        if missing_ok and not storage.exists(url):
            return None
        return storage.read_table(url)

    if len(urls) < 2:
        return [read(u) for u in urls]
    with ThreadPoolExecutor(min(READ_BACK_THREADS, len(urls))) as pool:
        return list(pool.map(read, urls))


def _summary(commit: dict) -> dict:
    keys = ("shard", "rows_in", "rows_generated", "rows_quarantined", "prompt_tokens",
            "output_tokens", "device_seconds")
    timings = commit["timings"]  # commits from before start-up was timed lack three keys
    replay = commit.get("replay") or {}  # commits from before replay have none
    return {k: commit[k] for k in keys} | {
        "replayed_rows": replay.get("rows", 0), "replayed_tokens": replay.get("tokens", 0)} | {
        k: timings.get(k) for k in ("wall_s", "startup_s", "generation_s",
                                    "generating_fraction")}


def warm() -> None:
    """Load what a shard's first rows load and its tenth do not: a Parquet round trip
    (pyarrow's datasets and pandas, ~360 modules) and the gate's first row (its models
    and word lists, quality/gate.warm). About 1 s on an idle machine and 20-30 s on two
    loaded cores (measured), which a replica started during a run spends before it says
    it is ready, not inside its first shard while the others wait on it."""
    import pyarrow as pa

    from synthfactory.quality import gate
    from synthfactory.stitch import templates  # noqa: F401  the gate reads its templates

    with tempfile.TemporaryDirectory(prefix="synthfactory-warm-") as folder:
        url = f"file://{folder}/warm.parquet"
        storage.write_table(pa.table({"id": ["warm"]}), url)
        storage.read_table(url)
    gate.warm()


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
