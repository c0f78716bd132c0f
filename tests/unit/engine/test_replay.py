"""Replay by request key (docs/adr/0150), with the echo engine: a corrected partition
regenerates only the rows whose request changed; everything else is read back from the
commit that made it, checked, marked and counted; nothing is replayed across a change of
model, template, sampling or attempt, from an origin that no longer holds, or when
replay is off."""

from __future__ import annotations

import dataclasses
import json
import logging
import time

import pyarrow as pa
import pytest

from synthfactory import cli, storage
from synthfactory.audit.replayed import OriginCache, audit_replayed
from synthfactory.audit.report import AuditReport
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.replay import index as replay_index
from synthfactory.rephrase.replay.index import ENTRY_SCHEMA, ReplayIndex
from synthfactory.rephrase.replay.key import attempt_key, basis, folder_hash, model_identity
from synthfactory.rephrase.replay.replayer import ReplayOptions
from synthfactory.rephrase.worker import WorkerOptions, read_commit, rephrase_shard
from synthfactory.stitch.prompt_table import prompt_table
from synthfactory.stitch.templates import load_template

ROWS = 20
ECHO = basis("echo", "name:model-a", {}, seeded=False)


def _shard(run: str, corrected=(), template="summary", index=0, budget=32) -> str:
    docs = [f"document number {i} alpha beta gamma delta epsilon zeta eta theta"
            + (" and a sentence appended" if i in corrected else "") for i in range(ROWS)]
    table = prompt_table(load_template(template), [f"doc-{i:04d}" for i in range(ROWS)],
                         docs, max_new_tokens=budget)
    url = storage.join(run, "prompts", f"shard-{index:05d}.parquet")
    storage.write_table(table, url)
    return url


class Counting:
    """An engine factory that counts the engines built and the requests sent."""

    def __init__(self, **kwargs):
        self.built, self.sent, self.kwargs = 0, 0, kwargs

    def __call__(self):
        self.built += 1
        engine = EchoEngine(**self.kwargs)
        submit = engine.submit

        def counted(rows, *args, **kw):
            self.sent += len(rows)
            return submit(rows, *args, **kw)

        engine.submit = counted
        return engine


def _options(replay_basis=ECHO, lookup=True, sources=(), **kwargs) -> WorkerOptions:
    return WorkerOptions(model="echo", checkpoint_rows=6, replay=ReplayOptions(
        replay_basis, lookup=lookup, sources=sources), **kwargs)


def _attempts(run: str, shard: str = "shard-00000") -> list[dict]:
    urls = storage.list_files(storage.join(run, "attempts", shard), suffix=".parquet")
    return [r for u in urls for r in storage.read_table(u).to_pylist()]


@pytest.fixture
def run(tmp_path) -> str:
    return f"file://{tmp_path}/root/pipeline/2026-01-01"


def test_a_corrected_shard_regenerates_only_its_changed_rows(run):
    first = Counting(per_poll=5)
    rephrase_shard(_shard(run), None, first, _options())
    assert first.sent == ROWS
    made = {r["row"]: r for r in _attempts(run)}
    again = Counting(per_poll=5)
    summary = rephrase_shard(_shard(run, corrected=(3, 11, 17)), None, again, _options())
    assert summary["status"] == "committed" and summary["set_aside"]  # the guard still acts
    assert again.sent == 3  # only the corrected documents went to the engine
    assert (summary["replayed_rows"], summary["rows_generated"]) == (17, 20)
    commit = read_commit(storage.join(run, "generated", "shard-00000"))
    assert commit["replay"]["rows"] == commit["replay"]["attempts"] == 17
    assert commit["replay"]["tokens"] == 17 * EchoEngine.WORDS
    assert commit["output_tokens"] == 3 * EchoEngine.WORDS  # what the engine generated
    rows = {r["row"]: r for r in _attempts(run)}
    assert {r for r, a in rows.items() if a["replayed_from"] is None} == {3, 11, 17}
    replayed = rows[0]
    assert replayed["replayed_from"].startswith(storage.join(run, "attempts", "shard-00000"))
    assert "#row=0&attempt=1&commit=sha256:" in replayed["replayed_from"]
    assert (replayed["output_text"], replayed["request_key"]) == (
        made[0]["output_text"], made[0]["request_key"])
    assert rows[3]["request_key"] != made[3]["request_key"]
    assert all(len(bytes.fromhex(a["request_key"])) == 16 for a in rows.values())


def test_nothing_changed_and_nothing_committed_needs_no_engine_at_all(run):
    rephrase_shard(_shard(run), None, Counting(), _options())
    # the same prompts in a new run folder of the same pipeline: another day's rerun
    other = run.replace("2026-01-01", "2026-01-02")
    engine = Counting()
    summary = rephrase_shard(_shard(other), None, engine, _options())
    assert engine.built == 0 and summary["replayed_rows"] == ROWS
    assert summary["startup_s"] == 0 and summary["output_tokens"] == 0


@pytest.mark.parametrize("change", ["model", "settings", "template", "budget", "off"])
def test_nothing_is_replayed_across_a_change_that_decides_the_output(run, change):
    rephrase_shard(_shard(run), None, Counting(), _options(per_row_budgets=True))
    options = {
        "model": _options(basis("echo", "name:model-b", {}, seeded=False)),
        "settings": _options(basis("echo", "name:model-a", {"dtype": "float32"}, False)),
        "template": _options(), "budget": _options(), "off": _options(lookup=False),
    }[change]
    next_day = run.replace("2026-01-01", "2026-01-02")  # another day of the pipeline
    shard = _shard(next_day, template="qa" if change == "template" else "summary",
                   budget=31 if change == "budget" else 32)
    engine = Counting()
    summary = rephrase_shard(shard, None, engine,
                             dataclasses.replace(options, per_row_budgets=True))
    assert summary["replayed_rows"] == 0 and engine.sent == ROWS
    # replay off still keys and indexes its attempts for later runs
    assert all(a["request_key"] for a in _attempts(next_day))
    # the control: the same day again, nothing changed, is all replayed
    control = Counting()
    summary = rephrase_shard(_shard(run.replace("2026-01-01", "2026-01-03")), None, control,
                             _options(per_row_budgets=True))
    assert summary["replayed_rows"] == ROWS and control.sent == 0


def test_the_key_covers_what_decides_an_output_and_not_what_only_changes_speed():
    digest = ECHO.digest
    key = attempt_key(digest, "d1", "sys", "user", ("qa", 1, "h"), '{"t": 0.7}', 1)
    assert key == attempt_key(digest, "d1", "sys", "user", ("qa", 1, "h"), '{"t": 0.7}', 1)
    others = [
        attempt_key(basis("echo", "name:model-b", {}, False).digest, "d1", "sys", "user",
                    ("qa", 1, "h"), '{"t": 0.7}', 1),
        attempt_key(digest, "d2", "sys", "user", ("qa", 1, "h"), '{"t": 0.7}', 1),
        attempt_key(digest, "d1", "sys2", "user", ("qa", 1, "h"), '{"t": 0.7}', 1),
        attempt_key(digest, "d1", "sys", "user2", ("qa", 1, "h"), '{"t": 0.7}', 1),
        attempt_key(digest, "d1", "sys", "user", ("qa", 2, "h"), '{"t": 0.7}', 1),
        attempt_key(digest, "d1", "sys", "user", ("qa", 1, "h2"), '{"t": 0.7}', 1),
        attempt_key(digest, "d1", "sys", "user", ("qa", 1, "h"), '{"t": 0.8}', 1),
        attempt_key(digest, "d1", "sys", "user", ("qa", 1, "h"), '{"t": 0.7}', 2),
    ]
    assert len({key, *others}) == len(others) + 1
    vllm = {"dtype": "bfloat16", "max_model_len": 2048, "seed": 0}
    assert basis("vllm", "m", {**vllm, "max_num_seqs": 8, "enforce_eager": True}, False) \
        == basis("vllm", "m", {**vllm, "max_num_seqs": 64}, False)  # speed, not output
    for changed in ({"dtype": "float32"}, {"max_model_len": 4096}, {"quantization": "fp8"}):
        assert basis("vllm", "m", {**vllm, **changed}, False).digest \
            != basis("vllm", "m", vllm, False).digest


def test_the_model_identity_is_its_files_content(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 1000)
    (folder / ".cache").mkdir()
    (folder / ".cache" / "lock").write_text("x")
    first = model_identity(str(folder))
    assert first.startswith("sha256:") and first == model_identity(str(folder))
    (folder / ".cache" / "lock").write_text("y")  # hidden files are not the model
    assert model_identity(str(folder)) == first
    (folder / "model.safetensors").write_bytes(b"\0" * 999 + b"\1")  # one weight changed
    assert model_identity(str(folder)) != first
    assert model_identity("org/some-model") == "name:org/some-model"
    snapshot = tmp_path / "hub" / "snapshots" / ("ab" * 20)
    snapshot.mkdir(parents=True)
    assert model_identity(str(snapshot)) == f"hf-revision:{'ab' * 20}"
    cached = json.loads((tmp_path / "cache" / "synthfactory" / "model_hashes.json").read_text())
    assert set(cached[str(folder)]) == {"config.json", "model.safetensors"}
    assert folder_hash(folder) == model_identity(str(folder)).removeprefix("sha256:")


def test_an_origin_that_no_longer_holds_is_not_replayed(run, caplog):
    rephrase_shard(_shard(run), None, Counting(), _options())
    part = storage.list_files(storage.join(run, "attempts", "shard-00000"))[0]
    table = storage.read_table(part)
    edited = table.set_column(table.schema.get_field_index("output_text"), "output_text",
                              pa.array(["edited after the commit"] * table.num_rows))
    storage.write_table(edited, part)
    engine = Counting()
    with caplog.at_level(logging.WARNING):
        summary = rephrase_shard(_shard(run, corrected=(0,)), None, engine, _options())
    assert summary["replayed_rows"] == 0 and engine.sent == ROWS
    assert any("no longer hashes to its commit" in r.message for r in caplog.records)


def test_an_output_stopped_at_its_budget_is_never_replayed(run):
    rephrase_shard(_shard(run, budget=4), None, Counting(), _options(per_row_budgets=True))
    stopped = [a for a in _attempts(run) if a["finish_reason"] == "length"]
    assert len(stopped) == ROWS and all(a["chosen"] for a in stopped)  # 8 words cut at 4
    engine = Counting()
    summary = rephrase_shard(_shard(run, corrected=(0,), budget=4), None, engine,
                             _options(per_row_budgets=True))
    assert summary["replayed_rows"] == 0 and engine.sent == ROWS


def test_an_attempt_stopped_at_its_budget_and_tried_again_is_replayed(run):
    """The row's chain replays: attempt 1 ran on to its budget and was rejected
    (truncated, repetition), attempt 2 is the row's; a rerun replays both, the gate
    leading it from one to the next as it led the first run."""
    from tests.unit.engine.test_rejection_sampling import GOOD, RUN_ON, SOURCE, ScriptedEngine

    options = _options(max_attempts=3, repairs=False)

    def shard(corrected=()):
        docs = [SOURCE + (" It still stands." if i in corrected else "") for i in range(4)]
        table = prompt_table(load_template("encyclopedic"), [f"doc-{i}" for i in range(4)],
                             docs, max_new_tokens=120)
        url = storage.join(run, "prompts", "shard-00000.parquet")
        storage.write_table(table, url)
        return url

    script = {row: [(RUN_ON, "length"), (GOOD, "stop")] for row in range(4)}
    rephrase_shard(shard(), None, lambda: ScriptedEngine(script), options)
    made = _attempts(run)
    assert sorted((a["attempt"], a["finish_reason"], a["chosen"]) for a in made) == (
        [(1, "length", False)] * 4 + [(2, "stop", True)] * 4)
    engines: list[ScriptedEngine] = []

    def engine():
        engines.append(ScriptedEngine(script))
        return engines[-1]

    summary = rephrase_shard(shard(corrected=(2,)), None, engine, options)
    assert summary["replayed_rows"] == 3
    assert [row for row, _ in engines[0].requests] == [2, 2]  # the corrected row's two
    again = _attempts(run)
    assert sum(1 for a in again if a["replayed_from"]) == 6  # both attempts of 3 rows


def test_replay_from_names_one_run_and_a_bad_value_is_one_line(run, tmp_path, capsys):
    rephrase_shard(_shard(run), None, Counting(), _options())
    elsewhere = f"file://{tmp_path}/other/pipeline/2026-01-05"
    shard = _shard(elsewhere)
    argv = ["rephrase", "--shard", shard, "--engine", "echo", "--model", "name-a"]
    assert cli.main([*argv, "--replay-from", f"file://{tmp_path}/nowhere"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--replay-from" in err[0] and "nowhere" in err[0]
    assert not storage.exists(storage.join(elsewhere, "generated"))  # before any work
    # the first run was keyed with another basis: replaying from it finds nothing
    assert cli.main([*argv, "--replay-from", run]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["shards"][0]["replayed_rows"] == 0


def test_a_rerun_through_the_command_replays_from_the_pipelines_other_days(tmp_path, capsys):
    day1 = f"file://{tmp_path}/root/pipeline/2026-01-01"
    day2 = f"file://{tmp_path}/root/pipeline/2026-01-02"
    argv = ["rephrase", "--engine", "echo", "--model", "name-a", "--checkpoint-rows", "4"]
    assert cli.main([*argv, "--shard", _shard(day1)]) == 0
    capsys.readouterr()
    assert cli.main([*argv, "--shard", _shard(day2, corrected=(5,))]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["shards"][0]["replayed_rows"] == ROWS - 1
    assert cli.main([*argv, "--replay", "off", "--shard", _shard(
        f"file://{tmp_path}/root/pipeline/2026-01-03")]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["shards"][0]["replayed_rows"] == 0


def test_the_audit_finds_a_replayed_output_that_is_not_its_origins(run):
    rephrase_shard(_shard(run), None, Counting(), _options())
    rephrase_shard(_shard(run, corrected=(1,)), None, Counting(), _options())
    url = storage.list_files(storage.join(run, "attempts", "shard-00000"))[0]
    attempts = storage.read_table(url)
    report = AuditReport(run)
    audit_replayed("shard-00000", [attempts], report, OriginCache())
    assert report.problems == [] and report.replayed == attempts.num_rows - (
        1 if 1 in attempts.column("row").to_pylist() else 0)
    texts = attempts.column("output_text").to_pylist()
    forged = attempts.set_column(attempts.schema.get_field_index("output_text"),
                                 "output_text", pa.array([t + " forged" for t in texts]))
    report = AuditReport(run)
    audit_replayed("shard-00000", [forged], report, OriginCache())
    assert len(report.problems) == report.replayed > 0
    assert "differs" in report.problems[0]


def _entries(n: int, committed_at: int = 1_000, seed: int = 0) -> pa.Table:
    import hashlib

    keys = [hashlib.sha256(f"{seed}-{i}".encode()).digest()[:16] for i in range(n)]
    return pa.Table.from_pylist([
        {"key": k, "run": "file:///r", "shard": "shard-00000", "commit": f"sha256:{seed}",
         "part": "part-00000.parquet", "row": i, "attempt": 1, "output_tokens": 5,
         "committed_at": committed_at} for i, k in enumerate(keys)], schema=ENTRY_SCHEMA)


def test_the_index_reads_only_the_row_groups_its_keys_are_in(tmp_path, monkeypatch):
    monkeypatch.setattr(replay_index, "ROW_GROUP", 4)  # ~8 row groups per bucket file
    index = ReplayIndex(f"file://{tmp_path}")
    tables = [_entries(2000, seed=s) for s in range(4)]
    for s, table in enumerate(tables):
        index.write_segment("file:///r", f"shard-{s:05d}", f"sha256:{s}", table)
    wanted = [tables[1].column("key")[7].as_py(), tables[3].column("key")[1999].as_py(),
              b"\xff" * 16]
    before = index.lookup(wanted)
    assert sorted(before) == sorted(wanted[:2])
    result = index.compact()
    assert result["segments_folded"] == 4 and result["entries_written"] == 8000
    assert index.segments() == []
    assert index.lookup(wanted) == before
    read = []
    original = ReplayIndex._read_selected
    monkeypatch.setattr(ReplayIndex, "_read_selected", staticmethod(
        lambda url, keys: read.append(original(url, keys).num_rows) or original(url, keys)))
    index.lookup(wanted)
    # three keys in at most three buckets: one row group or none of each file read, not
    # the ~31 entries of each bucket file, nor the 256 buckets of the whole index
    assert 0 < sum(read) <= 3 * 4 and len(read) <= 3


def test_compaction_merges_duplicates_and_drops_old_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(replay_index, "BUCKET_FILES", 2)
    index = ReplayIndex(f"file://{tmp_path}")
    old, new = _entries(300, committed_at=1_000, seed=1), _entries(300, 2_000, seed=2)
    index.write_segment("file:///r", "shard-00001", "sha256:1", old)
    index.compact()
    index.write_segment("file:///r", "shard-00001", "sha256:1b", old)  # the same entries
    index.write_segment("file:///r", "shard-00002", "sha256:2", new)
    index.compact()  # the second file of a bucket: its files merged into one
    assert index.size()["entries"] == 600
    assert all(len(storage.list_files(f"file://{tmp_path}/replay_index/buckets/{b}")) == 1
               for b in {k[:2] for k in (e.hex() for e in old.column("key").to_pylist())})
    dropped = index.compact(drop_before=1_500)
    assert dropped["entries_dropped"] == 300 and index.size()["entries"] == 300
    assert index.lookup(old.column("key").to_pylist()[:5]) == {}
    assert len(index.lookup(new.column("key").to_pylist()[:5])) == 5


def test_the_replay_command_reports_and_compacts(tmp_path, capsys):
    index = ReplayIndex(f"file://{tmp_path}")
    index.write_segment("file:///r", "shard-00000", "sha256:0", _entries(50))
    assert cli.main(["replay", "--index", f"file://{tmp_path}", "--compact",
                     "--drop-before-days", "1"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # committed_at 1000 (1970): older than a day, dropped
    assert out["segments_folded"] == 1 and out["entries_dropped"] == 50
    assert out["entries"] == 0
    recent = _entries(10, committed_at=int(time.time()))
    index.write_segment("file:///r", "shard-00001", "sha256:1", recent)
    assert cli.main(["replay", "--index", f"file://{tmp_path}"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["entries"] == 10


def test_an_unreadable_index_costs_the_replay_not_the_shard(run, caplog):
    rephrase_shard(_shard(run), None, Counting(), _options())
    segment = ReplayIndex(run.rsplit("/", 1)[0]).segments()[0]
    storage.write_bytes(segment, b"not parquet")
    engine = Counting()
    with caplog.at_level(logging.WARNING):
        summary = rephrase_shard(_shard(run, corrected=(0,)), None, engine, _options())
    assert summary["status"] == "committed" and summary["replayed_rows"] == 0
    assert engine.sent == ROWS
    assert any("unreadable" in r.message and "generating instead" in r.message
               for r in caplog.records)
