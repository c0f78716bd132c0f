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
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from synthfactory import storage
from synthfactory.contract import CommittedJson, CommitTimings, paths
from synthfactory.errors import SynthfactoryError
from synthfactory.layout import RunLayout, run_url_of_shard, shard_name
from synthfactory.quality.gate import Gate
from synthfactory.rephrase.attempts import Judge, Outcome, request_sampling, sampling_json
from synthfactory.rephrase.checkpoint import (
    ATTEMPTS_SCHEMA,
    GENERATED_SCHEMA,
    QUARANTINE_SCHEMA,
    ConcurrentWriter,
    ShardParts,
)
from synthfactory.rephrase.engines import GenerationEngine
from synthfactory.rephrase.fingerprint import output_checksum, prompt_checksum
from synthfactory.rephrase.progress import Progress
from synthfactory.rephrase.set_aside import set_aside

if TYPE_CHECKING:
    from synthfactory.metrics import RephraseMetrics

log = logging.getLogger(__name__)
# quarantine reasons of the rephrase step (a row's reason may add the engine's words)
REJECTED, EMPTY = "engine rejected the request", "empty output"

PROMPT_COLUMNS = ["id", "template_id", "template_version", "system", "user"]


@dataclass(frozen=True)
class WorkerOptions:
    model: str
    checkpoint_rows: int = 64
    max_in_flight: int = 256
    sampling: dict | None = None
    per_row_budgets: bool = False  # each row's max_new_tokens column caps its generation
    # attempts per row (1: no row is generated again) and trimming an output that ran on
    # to its budget (quality/repair.py); with neither, the worker judges nothing (the
    # attempts' reasons are null) and needs no template. The CLI: the steps table's
    # --max-attempts, repairs on.
    max_attempts: int = 1
    repairs: bool = False
    max_repetition: float | None = None  # the gate's; None: its default (validate's)
    # the task's Prometheus metrics (synthfactory/metrics/rephrase_task.py); in-process runs only: a
    # registry does not travel to Ray actors
    metrics: RephraseMetrics | None = field(default=None, compare=False, repr=False)


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
    if pending:
        asked = time.monotonic()
        the_engine = engine()  # the task's first shard waits for its engine to start
        spans.startup = (asked, time.monotonic())
        if options.metrics:
            options.metrics.engine_started(spans.startup[1] - spans.startup[0])
        judge = (Judge(Gate(options.max_repetition, RunLayout(run).prompt_templates),
                       options.max_attempts, options.repairs)
                 if options.max_attempts > 1 or options.repairs else None)
        _generate(prompts, pending, the_engine, parts, options, name, judge,
                  {r: made.get(r, 0) + 1 for r in pending})
        spans.generation = (spans.startup[1], time.monotonic())
    parts.check_no_rival()
    commit = _commit(name, shard_url, prompts, parts, options, the_engine, started_at,
                     spans, checksum)
    try:  # create-if-absent: of two writers racing to commit, exactly one can
        storage.create_json(storage.join(out_url, paths.COMMITTED), commit)
    except storage.AlreadyExists as exc:
        raise ConcurrentWriter(f"{out_url}: committed by another writer meanwhile; "
                               "this writer's work is not committed") from exc
    return {**_summary(commit), "status": "committed", "resumed_rows": len(done),
            "resumed_attempts": resumed_attempts,
            "discarded_parts": parts.discarded, "set_aside": set_aside_to}


def _generate(prompts: pa.Table, pending: list[int], engine: GenerationEngine,
              parts: ShardParts, options: WorkerOptions, name: str, judge: Judge | None,
              attempt_of: dict[int, int]) -> None:
    """Generate the pending rows, each at ``attempt_of[row]`` first; a rejected attempt
    goes back into the queue at the next. Checkpointed in completion order: each part
    holds finished rows and every attempt finished since the last part, a row's chosen
    attempt always in the same part as the row."""
    ids = prompts.column("id").to_pylist()
    templates = prompts.column("template_id").to_pylist()
    versions = prompts.column("template_version").to_pylist()
    systems = prompts.column("system").to_pylist()
    users = prompts.column("user").to_pylist()
    budgets = (prompts.column("max_new_tokens").to_pylist() if options.per_row_budgets
               else None)
    finished: list[dict] = []  # rows in completion order, generated or quarantined
    tried: list[dict] = []  # attempts finished since the last part
    in_flight: set[int] = set()  # rows submitted and not yet answered
    progress = Progress(name, total=prompts.num_rows, done=prompts.num_rows - len(pending))
    metrics = options.metrics
    # the engine's own statistics, when it has them (an optional method: vLLM's offline
    # engine); sampled by the metrics at their push period, not per row
    stats = getattr(engine, "engine_stats", None)
    seeded = bool(getattr(engine, "per_request_seed", False))
    model = served_model(engine, options)
    base = {k: v for k, v in (options.sampling or {}).items() if k != "max_tokens"}
    queue = deque(pending)
    sent: dict[int, dict] = {}  # row -> the sampling its attempt in flight was sent with

    def checkpoint(force: bool = False) -> None:
        """Parts of ``checkpoint_rows`` finished rows, as before attempts were kept, each
        with the attempts of its rows; the last part of a round also takes the attempts
        of rows still being tried. Attempts of rows still in flight count towards a part
        too: a row tried again and again must not hold its attempts in memory only."""
        nonlocal finished, tried
        size = options.checkpoint_rows

        def open_attempts() -> int:
            final = {r["row"] for r in finished}
            return sum(1 for t in tried if t["row"] not in final)

        while (len(finished) >= size or open_attempts() >= size
               or (force and (finished or tried))):
            batch, finished = finished[:size], finished[size:]
            rows, waiting = {r["row"] for r in batch}, {r["row"] for r in finished}
            last = len(finished) < size
            mine, rest = [], []
            for t in tried:
                (mine if t["row"] in rows or (last and t["row"] not in waiting)
                 else rest).append(t)
            tried = rest
            _flush(batch, mine, parts, ids, templates, versions, model)
            if metrics:
                metrics.checkpointed()

    while queue or engine.in_flight():
        room = options.max_in_flight - engine.in_flight()
        if queue and room > 0:
            chunk = [queue.popleft() for _ in range(min(room, len(queue)))]
            conversations = [[{"role": "system", "content": systems[r]},
                              {"role": "user", "content": users[r]}] for r in chunk]
            extra = [request_sampling(ids[r], templates[r], attempt_of[r], seeded)
                     for r in chunk]
            sent.update(zip(chunk, extra, strict=True))  # recorded with the attempt's output
            in_flight.update(chunk)
            for row in engine.submit(chunk, conversations,
                                     None if budgets is None else [budgets[r] for r in chunk],
                                     extra if any(extra) else None):
                in_flight.discard(row)
                finished.append({"row": row, "reason": f"{REJECTED}: "
                                 + engine.rejections.get(row, "unknown")})
                if metrics:
                    metrics.row(quarantined=REJECTED)
        try:
            completions = engine.poll()
        except SynthfactoryError:
            # the engine gave up (a server that never came back): save what finished,
            # so the task's retry generates only the rest
            checkpoint(force=True)
            progress.close()
            raise
        for c in completions:
            if c.row not in in_flight:  # an engine may answer twice
                continue
            in_flight.discard(c.row)
            row, attempt = c.row, attempt_of[c.row]
            if c.rejection:  # the engine refused the request: the same one fails the same way
                finished.append({"row": row, "reason": f"{REJECTED}: {c.rejection}"})
                progress.update(1, c.output_tokens)
                if metrics:
                    metrics.row(c.output_tokens or 0, c.prompt_tokens or 0, quarantined=REJECTED)
                continue
            outcome = (judge.decide(users[row], templates[row], c.text, c.finish_reason,
                                    c.output_tokens or 0, attempt) if judge
                       else Outcome(None, True, c.text, c.finish_reason, c.output_tokens or 0))
            kept = outcome.chosen and bool(c.text.strip())  # an empty last one is quarantined
            tried.append({"row": row, "attempt": attempt, "output_text": c.text,
                          "prompt_tokens": c.prompt_tokens, "output_tokens": c.output_tokens,
                          "finish_reason": c.finish_reason, "reasons": outcome.reasons,
                          "repair": outcome.repair, "chosen": kept,
                          "sampling": sampling_json(
                              base, sent.pop(row, {}),
                              budgets[row] if budgets is not None
                              else (options.sampling or {}).get("max_tokens"))})
            if metrics:
                metrics.attempt(outcome.reasons or [], outcome.repair, c.output_tokens or 0,
                                outcome.retry)
            if outcome.retry:
                attempt_of[row] = attempt + 1
                queue.append(row)
                if metrics:
                    metrics.engine(engine.in_flight(), progress.rate(), stats)
                continue
            quarantined = None  # the metric's fixed reason; the row's may add the engine's
            if kept:
                finished.append({"row": row, "output_text": outcome.text,
                                 "prompt_tokens": c.prompt_tokens,
                                 "output_tokens": c.output_tokens,
                                 "finish_reason": outcome.finish_reason, "attempt": attempt,
                                 "kept_tokens": outcome.kept_tokens})
            else:
                quarantined = EMPTY
                finished.append({"row": row, "reason": EMPTY})
            progress.update(1, c.output_tokens)
            if metrics:
                metrics.row(c.output_tokens or 0, c.prompt_tokens or 0, quarantined=quarantined)
        if metrics:
            metrics.engine(engine.in_flight(), progress.rate(), stats)
        checkpoint()
    checkpoint(force=True)
    if metrics and stats is not None:
        metrics.sample_engine(stats, force=True)  # the shard's end: its final figures
    progress.close()


def _flush(batch: list[dict], tried: list[dict], parts: ShardParts, ids, templates,
           versions, model: str) -> None:
    batch = sorted(batch, key=lambda r: r["row"])
    good = [r for r in batch if "reason" not in r]
    bad = [r for r in batch if "reason" in r]
    generated = pa.table({
        "id": [ids[r["row"]] for r in good],
        "template_id": [templates[r["row"]] for r in good],
        "template_version": [versions[r["row"]] for r in good],
        "row": [r["row"] for r in good],
        "output_text": [r["output_text"] for r in good],
        "prompt_tokens": [r["prompt_tokens"] for r in good],
        "output_tokens": [r["output_tokens"] for r in good],
        "finish_reason": [r["finish_reason"] for r in good],
        "model": [model] * len(good),
        "attempt": [r["attempt"] for r in good],
        "kept_tokens": [r["kept_tokens"] for r in good],
    }, schema=GENERATED_SCHEMA)
    quarantined = pa.table({
        "id": [ids[r["row"]] for r in bad],
        "template_id": [templates[r["row"]] for r in bad],
        "row": [r["row"] for r in bad],
        "reason": [r["reason"] for r in bad],
    }, schema=QUARANTINE_SCHEMA)
    tried = sorted(tried, key=lambda r: (r["row"], r["attempt"]))
    attempts = pa.table({
        "id": [ids[r["row"]] for r in tried],
        "template_id": [templates[r["row"]] for r in tried],
        **{column: [r[column] for r in tried] for column in ATTEMPTS_SCHEMA.names
           if column not in ("id", "template_id")},
    }, schema=ATTEMPTS_SCHEMA)
    parts.write(generated, quarantined, attempts)


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
            spans: Spans, checksum: str) -> CommittedJson:
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
        # rate and the cost are of them (parts from before attempts count their rows')
        "output_tokens": sum(p.attempt_tokens if p.attempts else p.output_tokens
                             for p in parts.parts),
        "attempts": _attempt_counts(parts, options),
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


def served_model(engine: GenerationEngine | None, options: WorkerOptions) -> str:
    """The model that answered: an endpoint's served name, else ``--model``."""
    return getattr(engine, "served_model", None) or options.model


def _output_checksum(parts: ShardParts) -> str:
    """Read back what was written: the commit vouches for the files, not for memory."""
    generated, quarantined, attempts = [], [], []
    for part in parts.parts:
        generated.append(storage.read_table(storage.join(parts.out_url, part.name)))
        if part.quarantined:
            quarantined.append(storage.read_table(storage.join(parts.quarantine_url, part.name)))
        if part.attempts:
            attempts.append(storage.read_table(storage.join(parts.attempts_url, part.name)))
    return output_checksum(generated, quarantined, attempts)


def _summary(commit: dict) -> dict:
    keys = ("shard", "rows_in", "rows_generated", "rows_quarantined", "prompt_tokens",
            "output_tokens", "device_seconds")
    timings = commit["timings"]  # commits from before start-up was timed lack three keys
    return {k: commit[k] for k in keys} | {
        k: timings.get(k) for k in ("wall_s", "startup_s", "generation_s",
                                    "generating_fraction")}


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
