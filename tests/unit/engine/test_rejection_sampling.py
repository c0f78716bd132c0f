"""Rejection sampling in the rephrase worker (docs/adr/0141): a row the gate's per-row
checks reject for a reason another sample can fix is generated again, up to
max_attempts; every attempt stays readable with its verdict, exactly once, across a
crash; an output that ran on to its budget is trimmed back when what remains passes.

A scripted engine answers each row's n-th request with the row's n-th scripted output,
so which attempt is usable is known in advance.
"""

from __future__ import annotations

from collections import deque

import pyarrow as pa
import pytest

from synthfactory import storage
from synthfactory.layout import RunLayout
from synthfactory.quality.reasons import REASONS, RETRYABLE
from synthfactory.rephrase.attempts import LATER_ATTEMPTS, seed
from synthfactory.rephrase.engines import Completion
from synthfactory.rephrase.worker import WorkerOptions, read_commit, rephrase_shard
from synthfactory.stitch.prompt_table import prompt_table
from synthfactory.stitch.templates import load_template
from synthfactory.validate import validate_shard

SOURCE = ("The lighthouse on the northern cape was built in 1871 to guide fishing boats "
          "through the narrow channel. Its lamp burned whale oil until 1910, when the "
          "keepers switched to kerosene, and an electric lamp replaced both in 1952. The "
          "tower is twenty metres tall and is painted with red and white bands.")
GOOD = ("Built in 1871, the northern cape lighthouse helped fishing vessels find their way "
        "along a tight channel. Keepers fed its lamp with whale oil until 1910, moved to "
        "kerosene afterwards, and in 1952 an electric light took over. The twenty metre "
        "tower carries painted bands of red and white.")
LOOP = " ".join(["and the lamp was bright and the boats were safe"] * 12)
RUN_ON = GOOD + " " + LOOP  # a good rephrasing that ran on into a loop to its budget


class ScriptedEngine:
    """The n-th request for a row answers ``script[row][n]`` (the last one after that);
    records each request's sampling. Finishes requests out of order, a few a poll."""

    device, devices = "cpu", 1

    def __init__(self, script: dict[int, list[tuple[str, str]]], per_poll: int = 3,
                 per_request_seed: bool = False, crash_after: int | None = None):
        self.script = script
        self.per_poll = per_poll
        self.per_request_seed = per_request_seed
        self.crash_after = crash_after  # completions handed back before the engine dies
        self.rejections: dict[int, str] = {}
        self.engine_args = {"engine": "scripted"}
        self.requests: list[tuple[int, dict]] = []
        self._asked: dict[int, int] = {}
        self._queue: deque[tuple[int, int]] = deque()

    def submit(self, rows, conversations, max_tokens=None, sampling=None):
        for i, row in enumerate(rows):
            extra = dict(sampling[i]) if sampling else {}
            self.requests.append((row, extra))
            n = self._asked.get(row, 0)
            self._asked[row] = n + 1
            if "seed" in extra:  # a seeded request says which attempt it is
                n = next(k for k in range(1, 20)
                         if seed(f"doc-{row}", "encyclopedic", k) == extra["seed"]) - 1
            self._queue.append((row, n))
        return []

    def poll(self):
        batch = [self._queue.popleft() for _ in range(min(self.per_poll, len(self._queue)))]
        done = []
        for row, n in reversed(batch):
            if self.crash_after is not None:
                if self.crash_after == 0:
                    raise RuntimeError("engine died")
                self.crash_after -= 1
            text, finish = self.script[row][min(n, len(self.script[row]) - 1)]
            done.append(Completion(row, text, 50, len(text.split()), finish))
        return done

    def in_flight(self):
        return len(self._queue)


def _shard(tmp_path, rows: int) -> tuple[str, str]:
    run = f"file://{tmp_path}/run"
    table = prompt_table(load_template("encyclopedic"), [f"doc-{i}" for i in range(rows)],
                         [SOURCE] * rows, 400)
    shard = storage.join(run, "prompts", "shard-00000.parquet")
    storage.write_table(table, shard)
    return run, shard


def _attempts(run: str) -> list[dict]:
    folder = RunLayout(run).shard_attempts("shard-00000")
    return [r for url in storage.list_files(folder, suffix=".parquet")
            for r in storage.read_table(url).to_pylist()]


def _generated(run: str) -> list[dict]:
    folder = RunLayout(run).shard_output("shard-00000")
    return [r for url in storage.list_files(folder, suffix=".parquet")
            for r in storage.read_table(url).to_pylist()]


def test_every_reason_is_declared_retryable_or_not():
    """The candidates the issue names are all in the gate's vocabulary; duplicate is the
    one reason the worker cannot judge and never retries, contaminated the one whose
    cause is the source itself."""
    assert set(RETRYABLE) <= set(REASONS)
    assert set(REASONS) - set(RETRYABLE) == {"duplicate", "contaminated", "ungrounded",
                                             "content_lost", "invented"}


def test_a_rejected_row_is_generated_again_until_usable(tmp_path):
    run, shard = _shard(tmp_path, 4)
    loop = (LOOP, "stop")  # repetition and too long: retryable
    script = {0: [(GOOD, "stop")], 1: [loop, (GOOD, "stop")], 2: [loop, loop, (GOOD, "stop")],
              3: [loop]}
    engine = ScriptedEngine(script)
    summary = rephrase_shard(shard, run, lambda: engine,
                             WorkerOptions(model="m", checkpoint_rows=2, max_attempts=3))
    assert summary["rows_generated"] == 4
    generated = {r["row"]: r for r in _generated(run)}
    assert {r: g["attempt"] for r, g in generated.items()} == {0: 1, 1: 2, 2: 3, 3: 3}
    assert generated[1]["output_text"] == GOOD and generated[3]["output_text"] == LOOP
    attempts = _attempts(run)
    assert sorted((a["row"], a["attempt"]) for a in attempts) == [
        (0, 1), (1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 1), (3, 2), (3, 3)]
    chosen = {(a["row"], a["attempt"]) for a in attempts if a["chosen"]}
    assert chosen == {(0, 1), (1, 2), (2, 3), (3, 3)}
    first = next(a for a in attempts if (a["row"], a["attempt"]) == (1, 1))
    assert "repetition" in first["reasons"] and first["output_text"] == LOOP
    commit = read_commit(RunLayout(run).shard_output("shard-00000"))
    # the rate and the cost count every attempt's tokens, not only the chosen ones
    assert commit["output_tokens"] == sum(a["output_tokens"] for a in attempts)
    assert commit["attempts"] == {"max_attempts": 3, "made": 9, "repair": "none",
                                  "chosen_at": {"1": 1, "2": 1, "3": 2}}
    # the later attempts sample with the declared policy; no seed on this engine
    assert [s for row, s in engine.requests if row == 2] == [
        {}, LATER_ATTEMPTS[2], LATER_ATTEMPTS[3]]
    # validate, the authority, gates the chosen outputs again: rows 1 and 2 chose the
    # same text as row 0 (one source, one script), which only the table-wide check sees
    quality = validate_shard(shard, run, 0.5)["quality"]
    assert quality["usable"] == 1 and quality["rejected"] == 3
    assert quality["reasons"]["duplicate"] == 2 and quality["reasons"]["repetition"] == 1
    verdicts = storage.read_table(RunLayout(run).shard_verdicts("shard-00000")).to_pylist()
    assert {v["row"]: v["attempt"] for v in verdicts} == {0: 1, 1: 2, 2: 3, 3: 3}


def test_one_attempt_is_todays_behaviour(tmp_path):
    run, shard = _shard(tmp_path, 2)
    engine = ScriptedEngine({0: [(LOOP, "stop"), (GOOD, "stop")], 1: [(GOOD, "stop")]})
    rephrase_shard(shard, run, lambda: engine,
                   WorkerOptions(model="m", max_attempts=1, repairs=True))
    assert len(engine.requests) == 2
    assert {r["row"]: r["output_text"] for r in _generated(run)} == {0: LOOP, 1: GOOD}


def test_a_seed_per_row_and_attempt_where_the_engine_takes_one(tmp_path):
    run, shard = _shard(tmp_path, 2)
    script = {0: [(LOOP, "stop"), (GOOD, "stop")], 1: [(GOOD, "stop")]}
    engine = ScriptedEngine(script, per_request_seed=True)
    rephrase_shard(shard, run, lambda: engine, WorkerOptions(model="m", max_attempts=3))
    seeds = [(row, s["seed"]) for row, s in engine.requests]
    assert sorted(seeds) == sorted([(0, seed("doc-0", "encyclopedic", 1)),
                                    (0, seed("doc-0", "encyclopedic", 2)),
                                    (1, seed("doc-1", "encyclopedic", 1))])
    assert seed("doc-0", "encyclopedic", 1) != seed("doc-0", "encyclopedic", 2)
    # recorded on the attempt, as sampled
    import json

    recorded = {(a["row"], a["attempt"]): json.loads(a["sampling"]) for a in _attempts(run)}
    assert recorded[(0, 2)]["seed"] == seed("doc-0", "encyclopedic", 2)
    assert recorded[(0, 2)]["repetition_penalty"] == LATER_ATTEMPTS[2]["repetition_penalty"]


def test_a_run_on_output_is_trimmed_not_generated_again(tmp_path):
    run, shard = _shard(tmp_path, 1)
    engine = ScriptedEngine({0: [(RUN_ON, "length"), (GOOD, "stop")]})
    rephrase_shard(shard, run, lambda: engine,
                   WorkerOptions(model="m", max_attempts=3, repairs=True))
    assert len(engine.requests) == 1  # the trim cost no second attempt
    [row] = _generated(run)
    assert row["output_text"] == GOOD and row["finish_reason"] == "trimmed"
    assert 0 < row["kept_tokens"] < row["output_tokens"]
    [attempt] = _attempts(run)
    assert attempt["repair"] == "trimmed" and attempt["output_text"] == RUN_ON
    assert "truncated" in attempt["reasons"]
    quality = validate_shard(shard, run, 0.5)["quality"]
    assert quality["usable"] == 1
    [verdict] = storage.read_table(RunLayout(run).shard_verdicts("shard-00000")).to_pylist()
    assert verdict["trimmed"] and verdict["output_tokens"] == row["kept_tokens"]


def test_an_output_that_stopped_by_itself_is_never_trimmed(tmp_path):
    run, shard = _shard(tmp_path, 1)
    engine = ScriptedEngine({0: [(RUN_ON, "stop")]})
    rephrase_shard(shard, run, lambda: engine,
                   WorkerOptions(model="m", max_attempts=2, repairs=True))
    assert len(engine.requests) == 2
    [row] = _generated(run)
    assert row["output_text"] == RUN_ON and row["finish_reason"] == "stop"


def test_a_crash_during_a_later_attempt_loses_and_duplicates_no_attempt(tmp_path):
    """The engine dies after 9 completions, rows mid-way through their attempts; the
    rerun resumes each at its next attempt: every (row, attempt) once, every row once,
    its chosen attempt the generated one, and the first attempts never made again."""
    run, shard = _shard(tmp_path, 6)
    loop = (LOOP, "stop")
    script = {r: [loop] * r + [(GOOD, "stop")] for r in range(6)}  # row r usable at r + 1
    options = WorkerOptions(model="m", checkpoint_rows=2, max_attempts=4)
    with pytest.raises(RuntimeError, match="engine died"):
        rephrase_shard(shard, run, lambda: ScriptedEngine(script, per_request_seed=True,
                                                          crash_after=9), options)
    before = {(a["row"], a["attempt"]) for a in _attempts(run)}
    assert len(before) >= 4 and any(attempt > 1 for _, attempt in before)
    assert len(_generated(run)) < 6  # the crash came before every row was done

    resumed = ScriptedEngine(script, per_request_seed=True)
    rephrase_shard(shard, run, lambda: resumed, options)
    made = {}
    for row, attempt in before:
        made[row] = max(made.get(row, 0), attempt)
    first_asked = {}
    for row, extra in resumed.requests:  # each row's first request of the rerun
        first_asked.setdefault(row, extra["seed"])
    for row, last in made.items():  # resumed at the attempt after its last saved one
        if row in first_asked:
            assert first_asked[row] == seed(f"doc-{row}", "encyclopedic", last + 1)

    attempts = _attempts(run)
    pairs = [(a["row"], a["attempt"]) for a in attempts]
    assert len(pairs) == len(set(pairs))  # none duplicated
    expected = {(r, k) for r in range(6) for k in range(1, min(r + 1, 4) + 1)}
    assert set(pairs) == expected  # none lost: row r tried r + 1 times (at most 4)
    assert before <= set(pairs)
    generated = {r["row"]: r["attempt"] for r in _generated(run)}
    assert generated == {r: min(r + 1, 4) for r in range(6)}
    chosen = {(a["row"], a["attempt"]) for a in attempts if a["chosen"]}
    assert chosen == set(generated.items())
    commit = read_commit(RunLayout(run).shard_output("shard-00000"))
    assert commit["attempts"]["made"] == len(expected)


def test_an_attempt_edited_after_the_commit_changes_the_output_checksum(tmp_path):
    from synthfactory.rephrase.fingerprint import output_checksum

    run, shard = _shard(tmp_path, 2)
    script = {0: [(LOOP, "stop"), (GOOD, "stop")], 1: [(GOOD, "stop")]}
    rephrase_shard(shard, run, lambda: ScriptedEngine(script),
                   WorkerOptions(model="m", max_attempts=2))
    layout = RunLayout(run)
    commit = read_commit(layout.shard_output("shard-00000"))
    generated = [storage.read_table(u) for u in
                 storage.list_files(layout.shard_output("shard-00000"), suffix=".parquet")]
    attempts = [storage.read_table(u) for u in
                storage.list_files(layout.shard_attempts("shard-00000"), suffix=".parquet")]
    assert output_checksum(generated, [], attempts) == commit["output_checksum"]
    edited = [t.set_column(t.schema.get_field_index("output_text"), "output_text",
                           pa.array(["edited"] * t.num_rows)) for t in attempts]
    assert output_checksum(generated, [], edited) != commit["output_checksum"]


def test_the_audit_accounts_for_every_attempt(tmp_path):
    """The audit's attempt checks on a real shard's parts: clean as written; an attempt
    deleted, one written twice, or a generated row that is not its chosen attempt, each
    named (and counted lost or duplicated)."""
    from synthfactory.audit import AuditReport
    from synthfactory.audit.outputs import _audit_attempts

    run, shard = _shard(tmp_path, 3)
    script = {0: [(GOOD, "stop")], 1: [(LOOP, "stop"), (GOOD, "stop")],
              2: [(LOOP, "stop"), (LOOP, "stop"), (GOOD, "stop")]}
    rephrase_shard(shard, run, lambda: ScriptedEngine(script),
                   WorkerOptions(model="m", max_attempts=3))
    layout = RunLayout(run)
    generated = [storage.read_table(u) for u in
                 storage.list_files(layout.shard_output("shard-00000"), suffix=".parquet")]
    attempts = pa.concat_tables(
        storage.read_table(u) for u in
        storage.list_files(layout.shard_attempts("shard-00000"), suffix=".parquet"))

    def check(tables) -> AuditReport:
        report = AuditReport(run)
        _audit_attempts("shard-00000", tables, generated, report)
        return report

    clean = check([attempts])
    assert clean.problems == [] and clean.attempts == 6

    keep = [not (r == 2 and k == 2) for r, k in zip(attempts.column("row").to_pylist(),
                                                    attempts.column("attempt").to_pylist(),
                                                    strict=True)]
    gap = check([attempts.filter(pa.array(keep))])
    assert gap.lost == 1 and "row 2 lacks attempt(s) [2]" in gap.problems[0]

    twice = check([attempts, attempts.slice(0, 1)])
    assert twice.duplicated == 1 and "more than one part" in twice.problems[0]

    flipped = attempts.set_column(attempts.schema.get_field_index("chosen"), "chosen",
                                  pa.array([not c for c in
                                            attempts.column("chosen").to_pylist()]))
    wrong = check([flipped])
    assert any("not their chosen attempt" in p for p in wrong.problems)
