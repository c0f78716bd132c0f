"""Exactly-once shard commits, resume and torn parts, with a deterministic engine.

The echo engine stands in for vLLM so every interleaving is fast and repeatable; the
same worker runs the real engine in tests/integration/engine/test_rephrase_vllm.py.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from synthfactory import storage
from synthfactory.rephrase.checkpoint import ConcurrentWriter
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.fingerprint import prompt_checksum
from synthfactory.rephrase.worker import WorkerOptions, read_commit, rephrase_shard
from tests.support.shards import write_prompt_shard


class Crash(RuntimeError):
    pass


class CrashingEngine(EchoEngine):
    """Echo engine that dies after ``polls`` polls, as a GPU or node would."""

    def __init__(self, polls: int, **kwargs):
        super().__init__(**kwargs)
        self.polls_left = polls

    def poll(self):
        if self.polls_left == 0:
            raise Crash("engine died")
        self.polls_left -= 1
        return super().poll()


def _all_rows(run_url: str, shard: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    gen = storage.list_files(storage.join(run_url, "generated", shard), suffix=".parquet")
    quar = storage.list_files(storage.join(run_url, "quarantine", "rephrase", shard),
                              suffix=".parquet")
    def keys(urls):
        tables = [storage.read_table(u) for u in urls]
        return [(i, t) for tb in tables for i, t in zip(
            tb.column("id").to_pylist(), tb.column("template_id").to_pylist(), strict=True)]
    return keys(gen), keys(quar)


@pytest.fixture
def run_url(tmp_path):
    return f"file://{tmp_path}/run"


def test_shard_commits_every_row_once(run_url):
    shard = write_prompt_shard(run_url, 0, rows=50)
    summary = rephrase_shard(shard, None, lambda: EchoEngine(per_poll=7),
                             WorkerOptions(model="echo", checkpoint_rows=8))
    commit = read_commit(storage.join(run_url, "generated", "shard-00000"))
    assert summary["status"] == "committed"
    assert commit["rows_in"] == 50 == commit["rows_generated"] + commit["rows_quarantined"]
    assert [p["name"] for p in commit["parts"]] == [f"part-{k:05d}.parquet" for k in range(7)]
    generated, quarantined = _all_rows(run_url, "shard-00000")
    assert sorted(generated) == [(f"doc-{i:04d}", "summary") for i in range(50)]
    assert quarantined == []
    assert commit["prompt_checksum"] == prompt_checksum(storage.read_table(shard))
    assert commit["output_checksum"].startswith("sha256:")


def test_rejected_and_empty_rows_go_to_quarantine_with_reason(run_url):
    shard = write_prompt_shard(run_url, 0, rows=20, bad_rows=(3, 11))
    rephrase_shard(shard, None, lambda: EchoEngine(reject_if="REJECT"),
                   WorkerOptions(model="echo", checkpoint_rows=6))
    commit = read_commit(storage.join(run_url, "generated", "shard-00000"))
    assert commit["rows_generated"] == 18 and commit["rows_quarantined"] == 2
    reasons = pa.concat_tables([
        storage.read_table(u) for u in storage.list_files(
            storage.join(run_url, "quarantine", "rephrase", "shard-00000"))
    ])
    assert sorted(reasons.column("row").to_pylist()) == [3, 11]
    assert all("rejected" in r for r in reasons.column("reason").to_pylist())


def test_crash_then_resume_loses_and_duplicates_nothing(run_url):
    shard = write_prompt_shard(run_url, 0, rows=60)
    options = WorkerOptions(model="echo", checkpoint_rows=10)
    with pytest.raises(Crash):
        rephrase_shard(shard, None, lambda: CrashingEngine(polls=9, per_poll=4), options)
    out = storage.join(run_url, "generated", "shard-00000")
    assert read_commit(out) is None
    saved = len(_all_rows(run_url, "shard-00000")[0])
    assert saved == 30  # 36 rows finished before the crash; the 6 unsaved are at most N-1

    engine = EchoEngine(per_poll=4)
    summary = rephrase_shard(shard, None, lambda: engine, options)
    assert summary["resumed_rows"] == 30
    generated, _ = _all_rows(run_url, "shard-00000")
    assert sorted(generated) == [(f"doc-{i:04d}", "summary") for i in range(60)]
    assert len(generated) == len(set(generated)) == 60


def test_torn_part_is_discarded_and_regenerated(run_url):
    shard = write_prompt_shard(run_url, 0, rows=30)
    options = WorkerOptions(model="echo", checkpoint_rows=10)
    with pytest.raises(Crash):
        rephrase_shard(shard, None, lambda: CrashingEngine(polls=6, per_poll=4), options)
    part = storage.local_path(storage.join(run_url, "generated", "shard-00000",
                                           "part-00001.parquet"))
    data = open(part, "rb").read()
    open(part, "wb").write(data[: len(data) // 2])  # a torn write

    summary = rephrase_shard(shard, None, lambda: EchoEngine(), options)
    assert summary["discarded_parts"] == ["part-00001.parquet"]
    assert summary["resumed_rows"] == 10
    generated, _ = _all_rows(run_url, "shard-00000")
    assert sorted(generated) == [(f"doc-{i:04d}", "summary") for i in range(30)]


def test_committed_shard_is_not_redone(run_url):
    shard = write_prompt_shard(run_url, 0, rows=12)
    options = WorkerOptions(model="echo", checkpoint_rows=5)
    rephrase_shard(shard, None, lambda: EchoEngine(), options)

    def no_engine():
        raise AssertionError("a committed shard must not load the engine")

    summary = rephrase_shard(shard, None, no_engine, options)
    assert summary["status"] == "already committed"
    assert summary["rows_generated"] == 12


def test_missing_prompt_column_is_a_clear_error(run_url):
    url = storage.join(run_url, "prompts", "shard-00000.parquet")
    storage.write_table(pa.table({"id": ["a"], "template_id": ["t"]}), url)
    from synthfactory.errors import SynthfactoryError

    with pytest.raises(SynthfactoryError, match=r"shard-00000.parquet: missing column"):
        rephrase_shard(url, None, EchoEngine, WorkerOptions(model="echo"))


class EchoTwiceEngine(EchoEngine):
    """Answers some requests twice, as an engine retrying a request internally might."""

    def poll(self):
        done = super().poll()
        return done + [c for c in done if c.row % 5 == 0]


def test_a_row_answered_twice_is_stored_once(run_url):
    shard = write_prompt_shard(run_url, 0, rows=25)
    rephrase_shard(shard, None, lambda: EchoTwiceEngine(per_poll=4),
                   WorkerOptions(model="echo", checkpoint_rows=6))
    generated, _ = _all_rows(run_url, "shard-00000")
    assert len(generated) == len(set(generated)) == 25


def _part_checksums(run_url: str) -> set[str]:
    """The prompt checksum in each generated part's footer."""
    return {storage.read_table(u).schema.metadata[b"synthfactory.prompt_checksum"].decode()
            for u in storage.list_files(storage.join(run_url, "generated", "shard-00000"),
                                        suffix=".parquet")}


def _stale_files(run_url: str) -> list[str]:
    prefix = storage.join(run_url, "stale") + "/"
    return [u[len(prefix):].split("/", 2)[-1]
            for u in storage.list_files(storage.join(run_url, "stale"))]


def test_committed_shard_of_changed_prompts_is_set_aside_and_regenerated(run_url):
    """A rerun after the day's partition changed: the old commit must not be kept."""
    shard = write_prompt_shard(run_url, 0, rows=12)
    options = WorkerOptions(model="echo", checkpoint_rows=5)
    rephrase_shard(shard, None, lambda: EchoEngine(), options)
    write_prompt_shard(run_url, 0, rows=10, edition=" (second edition)")

    summary = rephrase_shard(shard, None, lambda: EchoEngine(), options)
    assert summary["status"] == "committed" and summary["set_aside"]
    assert summary["rows_generated"] == 10 and summary["resumed_rows"] == 0
    assert _part_checksums(run_url) == {prompt_checksum(storage.read_table(shard))}
    assert sorted(_all_rows(run_url, "shard-00000")[0]) == [
        (f"doc-{i:04d}", "summary") for i in range(10)]
    # every attempt is set aside with its part (docs/adr/0141)
    assert sorted(_stale_files(run_url)) == sorted(
        ["generated/_COMMITTED.json"] + [f"{folder}/part-{k:05d}.parquet" for k in range(3)
                                         for folder in ("generated", "attempts")])


def test_partial_shard_of_changed_prompts_is_not_resumed_into(run_url):
    shard = write_prompt_shard(run_url, 0, rows=30)
    options = WorkerOptions(model="echo", checkpoint_rows=10)
    with pytest.raises(Crash):
        rephrase_shard(shard, None, lambda: CrashingEngine(polls=6, per_poll=4), options)
    assert len(_all_rows(run_url, "shard-00000")[0]) == 20
    write_prompt_shard(run_url, 0, rows=30, edition=" (second edition)")

    summary = rephrase_shard(shard, None, lambda: EchoEngine(), options)
    assert summary["resumed_rows"] == 0 and summary["set_aside"]
    assert len(_all_rows(run_url, "shard-00000")[0]) == 30
    assert _part_checksums(run_url) == {prompt_checksum(storage.read_table(shard))}
    # the two parts of the first edition, each with its attempts
    assert sorted(_stale_files(run_url)) == [
        f"{folder}/part-{k:05d}.parquet" for folder in ("attempts", "generated")
        for k in range(2)]


def test_same_prompts_in_another_file_layout_keep_their_commit(run_url):
    """The checksum is of the values: restitching the same prompts redoes nothing."""
    shard = write_prompt_shard(run_url, 0, rows=12)
    options = WorkerOptions(model="echo", checkpoint_rows=5)
    rephrase_shard(shard, None, lambda: EchoEngine(), options)
    storage.write_table(storage.read_table(shard), shard, row_group_size=3,
                        compression="gzip")

    def no_engine():
        raise AssertionError("unchanged prompts must not load the engine")

    assert rephrase_shard(shard, None, no_engine, options)["status"] == "already committed"
    assert _stale_files(run_url) == []


class SlowEchoEngine(EchoEngine):
    def poll(self):
        time.sleep(0.01)
        return super().poll()


def test_two_writers_racing_on_one_shard_never_both_commit(run_url):
    """Two tries of one shard at once (a zombie pod and its retry): one commits, the
    other fails closed, and the commit covers every row once."""
    shard = write_prompt_shard(run_url, 0, rows=40)
    options = WorkerOptions(model="echo", checkpoint_rows=4)
    outcomes: list = [None, None]
    start = threading.Barrier(2)

    def writer(i):
        start.wait()
        try:
            outcomes[i] = rephrase_shard(shard, None, lambda: SlowEchoEngine(per_poll=2),
                                         options)["status"]
        except ConcurrentWriter as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(type(o).__name__ for o in outcomes) == ["ConcurrentWriter", "str"]
    assert "committed" in [o for o in outcomes if isinstance(o, str)]
    # what the loser wrote before failing closed is not in the commit; the audit-style
    # check: the committed parts cover each row exactly once
    commit = read_commit(storage.join(run_url, "generated", "shard-00000"))
    rows = [r for p in commit["parts"] for r in storage.read_table(
        storage.join(run_url, "generated", "shard-00000", p["name"])).column("row").to_pylist()]
    assert sorted(rows) == list(range(40))
