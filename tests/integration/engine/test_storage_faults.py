"""What storage and the wire do at scale, met on purpose (issue 50): throttling that
lasts, connections reset in the middle of a body in both directions, slow storage, and a
disk that fills. In front of a real S3 protocol server (moto) through
support/wire_faults.py, and on a real, small tmpfs.

Each fault kind is here at least once, in process and with the echo engine, so the
suite stays fast; benchmarks/storage_faults.py runs every step's console script against
every fault kind and writes the table in docs/storage-faults.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from synthfactory import storage
from synthfactory.errors import SynthfactoryError
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, read_commit, rephrase_shard
from tests.support.moto import moto_s3
from tests.support.shards import write_prompt_shard
from tests.support.small_disk import small_disk
from tests.support.wire_faults import WireFaults


@pytest.fixture
def s3(monkeypatch):
    with moto_s3(monkeypatch) as s3:
        s3.bucket = f"wire-{uuid.uuid4().hex[:8]}"  # moto's backend is one per process
        s3.create_bucket(s3.bucket)
        yield s3
    storage._s3_filesystem.cache_clear()
    storage._boto3_s3.cache_clear()


def _through(proxy: WireFaults, monkeypatch) -> None:
    """Every S3 client of this process talks to the proxy from now on."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    storage._s3_filesystem.cache_clear()
    storage._boto3_s3.cache_clear()


def _uploads_left(s3) -> list[str]:
    return [u["Key"] for u in s3.client().list_multipart_uploads(Bucket=s3.bucket)
            .get("Uploads", [])]


FAULTS = {  # one of each kind, all through the shard's whole rephrase
    "slowdown": {"slowdown_rate": 0.1, "server_errors": True},  # 10%, sustained
    "reset_request": {"reset": "request", "reset_rate": 0.3, "methods": ("PUT",)},  # uploads
    "reset_response": {"reset": "response", "reset_rate": 0.2},  # mid-download, answer lost
    "latency": {"delay_s": 0.05},  # 200 ms in the benchmark; the suite keeps it short
}


@pytest.mark.parametrize("kind", FAULTS)
def test_a_shard_rephrased_through_a_faulty_wire_commits_every_row_once(kind, s3, monkeypatch):
    """A shard of 20 rows in parts of 5: reads of the shard, conditional part writes,
    listings, the commit, all through the fault for the step's whole life."""
    shard = write_prompt_shard(f"s3://{s3.bucket}/run", 0, rows=20)
    with WireFaults(s3.port, **FAULTS[kind]) as proxy:
        _through(proxy, monkeypatch)
        summary = rephrase_shard(shard, None, lambda: EchoEngine(per_poll=5),
                                 WorkerOptions(model="echo", checkpoint_rows=5))
    assert proxy.throttled + proxy.resets > 0 or kind == "latency"  # the faults met it
    assert proxy.seen >= 8  # every part and the commit, at least
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    storage._s3_filesystem.cache_clear()
    assert summary["status"] == "committed" and summary["rows_generated"] == 20
    commit = read_commit(f"s3://{s3.bucket}/run/generated/shard-00000")
    assert len(commit["parts"]) == 4 and commit["rows_in"] == 20
    ids = storage.read_table(f"s3://{s3.bucket}/run/generated/shard-00000").column("id")
    every_row_once = [f"doc-{i:04d}" for i in range(20)]
    assert sorted(ids.to_pylist()) == every_row_once
    assert _uploads_left(s3) == []


def test_a_conditional_write_whose_answer_is_lost_is_this_writers(s3, monkeypatch):
    """The part and commit writes are create-if-absent (If-None-Match: *). When the
    server wrote the object and its answer was lost on the wire, the client sends the
    PUT again and S3 answers 412: before the fix, the step failed as if another writer
    had written its part (ConcurrentWriter), its own work taken for a rival's."""
    url = f"s3://{s3.bucket}/commit.json"
    with WireFaults(s3.port, reset="response", reset_rate=1.0, reset_limit=1,
                    methods=("PUT",)) as proxy:
        _through(proxy, monkeypatch)
        storage.create_bytes(url, b"this writer's")
        assert proxy.resets == 1
        assert storage.read_bytes(url) == b"this writer's"
        with pytest.raises(storage.AlreadyExists):  # another writer's bytes still refuse
            storage.create_bytes(url, b"another writer's")


def test_a_small_write_is_one_put_that_leaves_no_upload_behind(s3, monkeypatch):
    """A part, a commit, a summary: one PUT, not a multipart upload's three requests.
    With the three, a lost answer to the upload's create left an upload nobody
    completes or aborts, billed until a lifecycle rule removes it."""
    table = pa.table({"x": list(range(1000))})
    with WireFaults(s3.port) as clean:
        _through(clean, monkeypatch)
        storage.write_table(table, f"s3://{s3.bucket}/clean.parquet")
    assert clean.forwarded == 1
    with WireFaults(s3.port, reset="response", reset_rate=1.0, reset_limit=1) as proxy:
        _through(proxy, monkeypatch)
        storage.write_table(table, f"s3://{s3.bucket}/reset.parquet")
        assert storage.read_table(f"s3://{s3.bucket}/reset.parquet") == table
    assert proxy.resets == 1
    assert _uploads_left(s3) == []


def test_a_large_write_that_fails_for_good_aborts_its_upload(s3, monkeypatch):
    """12 MB goes up in parts; every part's upload is reset until the client gives up.
    The write fails (an OSError, which the steps turn into a retryable error) and its
    multipart upload is aborted, not left to cost money."""
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    with WireFaults(s3.port, reset="request", reset_rate=1.0, reset_after=65536,
                    methods=("PUT",)) as proxy:
        _through(proxy, monkeypatch)
        with pytest.raises(OSError):
            storage.write_bytes(f"s3://{s3.bucket}/big", os.urandom(12 << 20))
    assert proxy.resets >= 2
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    assert _uploads_left(s3) == []
    assert not storage.exists(f"s3://{s3.bucket}/big")


def test_a_full_disk_fails_once_naming_the_path_and_the_bytes(tmp_path):
    """A 256 KiB tmpfs as a ``file://`` output root: the step fails at once with one line
    that names the file, the bytes it needs and the bytes free, exits 3 (Airflow does
    not spend retries on it: a full disk stays full until someone acts), and leaves no
    temp file behind."""
    with small_disk(tmp_path / "disk", size="256k") as disk:
        storage.write_bytes(f"file://{disk}/filler", b"\0" * (248 << 10))
        out = f"file://{disk}/corpus"
        proc = subprocess.run(
            [sys.executable, "-m", "synthfactory.cli", "corpus", "--out", out, "--days", "1",
             "--docs-per-day", "24", "--end-date", "2026-01-01"],
            capture_output=True, text=True, timeout=300)
        assert proc.returncode == 3, proc.stderr
        assert "Traceback" not in proc.stderr
        line = proc.stderr.strip().splitlines()[-1]
        assert line.startswith("synthfactory corpus: error: file://" + str(disk)), line
        assert "no space left on the disk: it needs " in line and " bytes are free in " in line
        assert [p.name for p in Path(disk).rglob(".*.tmp")] == []
        with pytest.raises(SynthfactoryError, match=r"it needs 300,000 bytes, \d[\d,]* bytes"):
            storage.write_bytes(f"file://{disk}/more", b"\0" * 300_000)



def test_retries_are_counted_by_cause_in_process(s3, monkeypatch):
    """Each storage request tried again counts once under its cause: the conditional
    writes' retries (boto3) and the reads storage.py tries again. Break: the botocore
    observer not registered (storage_retries.observe) leaves the PUTs' 503s uncounted and
    this fails with 0 throttled."""
    from synthfactory import storage_retries

    url = f"s3://{s3.bucket}/counted/"
    with WireFaults(s3.port, fail_first=3, methods=("PUT",)) as proxy:
        _through(proxy, monkeypatch)
        before = storage_retries.counts()
        storage.create_bytes(url + "a.json", b"{}")
        throttled = storage_retries.since(before)
    assert proxy.throttled == 3
    assert throttled == {"throttled": 3}
    with WireFaults(s3.port, reset="response", reset_rate=1.0, reset_limit=2,
                    methods=("PUT",)) as proxy:
        _through(proxy, monkeypatch)
        before = storage_retries.counts()
        storage.create_bytes(url + "b.json", b"{}")
        reset = storage_retries.since(before)
    assert proxy.resets == 2
    assert reset == {"connection": 2}


def test_a_step_under_throttling_shows_its_retries_to_the_user(s3, monkeypatch, tmp_path):
    """The console script rephrases a shard while a fifth of its uploads are answered
    503 SlowDown for its whole life: it completes, and what it retried shows where a
    user looks: the summary (``storage_retries``), the run folder's record that the
    report sums into report.json's ``storage_retries``, and the Prometheus counter
    ``synthfactory_storage_retries_total{step="rephrase", cause="throttled"}`` the step
    pushed. The three agree with each other. Break: cli.py not adding the counts fails
    the summary's; the collector not registered fails the metric's."""
    from synthfactory.report.collect import storage_retries as recorded
    from tests.support.prometheus import matching, pushgateway, scraped

    run = f"s3://{s3.bucket}/run"
    shard = write_prompt_shard(run, 0, rows=12)
    result = tmp_path / "result.json"
    # the uploads only: rephrase's parts and commits are boto3's conditional PUTs, whose
    # every retry is counted; pyarrow retries inside its C++ client unseen (ADR 0155)
    with WireFaults(s3.port, slowdown_rate=0.2, methods=("PUT",), seed=7) as proxy, \
            pushgateway() as gateway:
        proc = subprocess.run(
            [sys.executable, "-m", "synthfactory.cli", "rephrase", "--engine", "echo",
             "--checkpoint-rows", "4", "--max-attempts", "1", "--shard", shard],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint,
                 "SYNTHFACTORY_RESULT_FILE": str(result), "SYNTHFACTORY_PUSHGATEWAY": gateway})
        assert proc.returncode == 0, proc.stderr[-3000:]
        pushed = matching(scraped(gateway, "synthfactory_storage_retries_total"),
                          step="rephrase", cause="throttled")
    summary = __import__("json").loads(result.read_text())
    counted = summary["storage_retries"]
    assert proxy.throttled > 0
    # the replay index's and this record's own PUTs are pyarrow's: at most as many
    assert 0 < counted["throttled"] <= proxy.throttled, (counted, proxy.throttled)
    assert set(counted) == {"throttled"}  # only 503s were answered
    assert pushed == [counted["throttled"]]
    assert recorded(run) == {"rephrase": counted}


def test_a_full_spark_local_folder_fails_stitch_once_naming_it(tmp_path):
    """Spark's local folder (SPARK_LOCAL_DIRS: its shuffle files and broadcasts) on a
    full tmpfs: the stitch fails with one line that names the folder and the bytes free,
    exit 3, and no traceback. Before, pyspark printed the broadcast's traceback itself and
    the failure was retried (exit 1): a full disk stays full, each retry fails alike."""
    def cli(*argv: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "synthfactory.cli", *argv],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, **env})

    corpus, run = f"file://{tmp_path}/corpus", f"file://{tmp_path}/run"
    assert cli("corpus", "--out", corpus, "--days", "1", "--docs-per-day", "8",
               "--end-date", "2026-01-01").returncode == 0
    crawled = cli("crawl", "--source", corpus, "--out", f"{run}/manifest",
                  "--interval-start", "2026-01-01T00:00:00+00:00",
                  "--interval-end", "2026-01-02T00:00:00+00:00",
                  "--partition-template", "dt={ds}")
    assert crawled.returncode == 0, crawled.stderr[-2000:]
    from synthfactory.model import default_model_dir

    with small_disk(tmp_path / "spark-local", size="256k") as disk:
        storage.write_bytes(f"file://{disk}/filler", b"\0" * (252 << 10))
        proc = cli("stitch", "--manifest", f"{run}/manifest", "--run", run,
                   "--templates", "qa", "--shard-tokens", "2048", "--max-model-len", "1024",
                   "--model", str(default_model_dir()), "--master", "local[1]",
                   "--partitions", "1", SPARK_LOCAL_DIRS=str(disk))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"synthfactory stitch: error: --manifest {run}/manifest: the "
                           "Spark job failed ("), line
    assert "): no space left on the disk of Spark's local folder (SPARK_LOCAL_DIRS): " in line
    assert line.endswith(f" bytes are free in {disk}"), line
