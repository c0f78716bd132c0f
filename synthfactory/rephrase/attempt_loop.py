"""The worker's generation loop: rows submitted, each attempt judged and tried again or
kept, finished rows and their attempts checkpointed into parts in completion order.
Separate from worker.py (a shard's resume, its engine and its commit), which calls it
once per shard with the rows still missing."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import pyarrow as pa

from synthfactory.errors import SynthfactoryError
from synthfactory.rephrase.attempts import Judge, Outcome, request_sampling, sampling_json
from synthfactory.rephrase.checkpoint import (
    ATTEMPTS_SCHEMA,
    GENERATED_SCHEMA,
    QUARANTINE_SCHEMA,
    ShardParts,
)
from synthfactory.rephrase.engines import Completion, GenerationEngine
from synthfactory.rephrase.part_writer import PartWriter
from synthfactory.rephrase.progress import Progress
from synthfactory.rephrase.replay.replayer import Replayer
from synthfactory.rephrase.worker_options import WorkerOptions

# quarantine reasons of the rephrase step (a row's reason may add the engine's words)
REJECTED, EMPTY = "engine rejected the request", "empty output"


def generate(prompts: pa.Table, pending: list[int],
             engine: Callable[[], GenerationEngine], parts: ShardParts,
             options: WorkerOptions, name: str, judge: Judge | None,
             attempt_of: dict[int, int], replayer: Replayer | None = None
             ) -> GenerationEngine | None:
    """Generate the pending rows, each at ``attempt_of[row]`` first; a rejected attempt
    goes back into the queue at the next. Checkpointed in completion order: each part
    holds finished rows and every attempt finished since the last part, a row's chosen
    attempt always in the same part as the row.

    With a ``replayer``, an attempt committed before under the same request key is not
    sent: its output comes back as a completion marked ``replayed_from``, and the engine
    (``engine()``) starts only for the first attempt that is not found. Returns the
    engine, None when none was needed."""
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
    live: GenerationEngine | None = None
    stats = None

    def started() -> GenerationEngine:
        nonlocal live, stats
        if live is None:
            live = engine()
            # the engine's own statistics, when it has them (an optional method: vLLM's
            # offline engine); sampled by the metrics at their push period, not per row
            stats = getattr(live, "engine_stats", None)
        return live

    def busy() -> int:  # requests in the engine
        return live.in_flight() if live is not None else 0

    if replayer is None:
        seeded = bool(getattr(started(), "per_request_seed", False))
    else:  # known before the engine is (never started when every attempt is found)
        seeded = replayer.options.basis.seeded
    base = {k: v for k, v in (options.sampling or {}).items() if k != "max_tokens"}

    def budget(row: int) -> int | None:
        return (budgets[row] if budgets is not None
                else (options.sampling or {}).get("max_tokens"))

    def sampling_of(row: int, attempt: int) -> str:
        return sampling_json(base, request_sampling(ids[row], templates[row], attempt,
                                                    seeded), budget(row))

    if replayer is not None:
        replayer.prefetch({r: attempt_of[r] for r in pending},
                          judge.max_attempts if judge else 1, sampling_of)
    queue = deque(pending)
    keys: dict[int, str | None] = {}  # row -> its attempt in flight's request key
    replayed: list[Completion] = []  # attempts found committed, answered at the next poll

    # parts go to storage beside the generation, one at a time (part_writer.py)
    writer = PartWriter(parts, metrics.checkpointed if metrics else None)

    def checkpoint(force: bool = False) -> None:
        """Parts of ``checkpoint_rows`` finished rows, as before attempts were kept, each
        with the attempts of its rows; the last part of a round also takes the attempts
        of rows still being tried. Attempts of rows still in flight count towards a part
        too: a row tried again and again must not hold its attempts in memory only."""
        nonlocal finished, tried
        size = options.checkpoint_rows
        model = served_model(live, options)

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
            _flush(batch, mine, writer, ids, templates, versions, model)

    try:
        while queue or busy() or replayed:
            room = options.max_in_flight - busy()
            if queue and room > 0:
                chunk = [queue.popleft() for _ in range(min(room, len(queue)))]
                in_flight.update(chunk)
                if replayer is not None:
                    for r in chunk:
                        keys[r] = replayer.key(r, attempt_of[r],
                                               sampling_of(r, attempt_of[r])).hex()
                        hit = replayer.hit(r, attempt_of[r])
                        if hit is not None:
                            replayed.append(Completion(r, hit.text, hit.prompt_tokens,
                                                       hit.output_tokens, hit.finish_reason,
                                                       replayed_from=hit.locator))
                    found = {c.row for c in replayed}
                    chunk = [r for r in chunk if r not in found]
                if chunk:
                    conversations = [[{"role": "system", "content": systems[r]},
                                      {"role": "user", "content": users[r]}] for r in chunk]
                    extra = [request_sampling(ids[r], templates[r], attempt_of[r], seeded)
                             for r in chunk]
                    the_engine = started()
                    for row in the_engine.submit(
                            chunk, conversations,
                            None if budgets is None else [budgets[r] for r in chunk],
                            extra if any(extra) else None):
                        in_flight.discard(row)
                        finished.append({"row": row, "reason": f"{REJECTED}: "
                                         + the_engine.rejections.get(row, "unknown")})
                        if metrics:
                            metrics.row(quarantined=REJECTED)
            try:
                completions, replayed = (live.poll() if live is not None else []) + replayed, []
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
                        metrics.row(c.output_tokens or 0, c.prompt_tokens or 0,
                                    quarantined=REJECTED)
                    continue
                outcome = (judge.decide(users[row], templates[row], c.text, c.finish_reason,
                                        c.output_tokens or 0, attempt) if judge
                           else Outcome(None, True, c.text, c.finish_reason, c.output_tokens or 0))
                kept = outcome.chosen and bool(c.text.strip())  # an empty last one is quarantined
                tried.append({"row": row, "attempt": attempt, "output_text": c.text,
                              "prompt_tokens": c.prompt_tokens, "output_tokens": c.output_tokens,
                              "finish_reason": c.finish_reason, "reasons": outcome.reasons,
                              "repair": outcome.repair, "chosen": kept,
                              "sampling": sampling_of(row, attempt),
                              "request_key": keys.pop(row, None),
                              "replayed_from": c.replayed_from})
                if metrics:
                    metrics.attempt(outcome.reasons or [], outcome.repair, c.output_tokens or 0,
                                    outcome.retry, replayed=c.replayed_from is not None)
                if outcome.retry:
                    attempt_of[row] = attempt + 1
                    queue.append(row)
                    if metrics:
                        metrics.engine(busy(), progress.rate(), stats)
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
                generated = 0 if c.replayed_from else c.output_tokens or 0  # the engine's
                progress.update(1, generated)
                if metrics:
                    metrics.row(generated, c.prompt_tokens or 0, quarantined=quarantined)
            if metrics:
                metrics.engine(busy(), progress.rate(), stats)
            checkpoint()
        checkpoint(force=True)
    finally:  # every part handed over is on storage, whatever stopped the loop
        writer.close()
    if metrics and stats is not None:
        metrics.sample_engine(stats, force=True)  # the shard's end: its final figures
    progress.close()
    return live


def _flush(batch: list[dict], tried: list[dict], writer: PartWriter, ids, templates,
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
    writer.write(generated, quarantined, attempts)


def served_model(engine: GenerationEngine | None, options: WorkerOptions) -> str:
    """The model that answered: an endpoint's served name, else ``--model``."""
    return getattr(engine, "served_model", None) or options.model
