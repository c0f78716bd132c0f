"""``synthfactory stitch`` on a real Spark standalone cluster (a master and two one-core
workers started from PySpark's jars), over file:// and over S3 (a moto server): the
output equals the ``local[*]`` output row for row, and the work really ran in the two
workers' executors (Spark's event log says which executor ran each task)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory.model import default_model_dir, is_ready
from tests.support.moto import moto_s3
from tests.support.spark_standalone import (
    event_log_conf,
    executors_in_event_log,
    start_cluster,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not is_ready(default_model_dir()),
                       reason="run `synthfactory model prepare` (make setup) first"),
]

FILES = 4
DOCS_PER_FILE = 500
# Storage credentials live on the cluster's nodes (the workers' environment), never in
# Spark's configuration; the driver passes on only the endpoint and region.
S3_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
WORDS = ("river model token shard prompt cluster quiet green data paper stone light "
         "window garden number letter engine market winter summer").split()
STITCH = ["--templates", "encyclopedic,qa,summary,faq", "--styles-per-doc", "2",
          "--shard-tokens", "40000", "--max-new-tokens", "128", "--max-model-len", "2048",
          "--partitions", "4"]


def _text(i: int) -> str:
    n = 20 + (i * 37) % 260
    return f"Note {i}. " + " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(n))


def _write_corpus(root: Path) -> list[Path]:
    """FILES files of DOCS_PER_FILE documents with every kind of row to quarantine."""
    root.mkdir(parents=True)
    paths = []
    for f in range(FILES):
        ids = [f"doc-{f}-{r}" for r in range(DOCS_PER_FILE)]
        texts: list = [_text(f * DOCS_PER_FILE + r) for r in range(DOCS_PER_FILE)]
        texts[3], texts[4], texts[5] = None, "", "  \n "
        texts[6] = "long " * 3000  # past the context window
        ids[7] = None
        ids[8] = f"doc-{max(f - 1, 0)}-{10}"  # a repeated id (in file 0, of itself)
        if f == 2:  # a binary text column with one undecodable row
            column = pa.array([None if t is None else t.encode() for t in texts], pa.binary())
            column = pa.array([*column.to_pylist()[:9], b"caf\xe9", *column.to_pylist()[10:]],
                              pa.binary())
        else:
            column = pa.array(texts, pa.string())
        path = root / f"part-{f:05d}.parquet"
        pq.write_table(pa.table({"id": pa.array(ids, pa.string()), "text": column}), path)
        paths.append(path)
    path = root / "part-99999.parquet"  # text column of the wrong type
    pq.write_table(pa.table({"id": ["int-0", "int-1"], "text": [1, 2]}), path)
    return [*paths, path]


def _write_manifest(folder: Path, keys: list[str]) -> None:
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"key": keys}), folder / "part-00000.parquet")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("spark-standalone")
    with start_cluster(work, workers=2, cores=1, memory="1g", env=S3_CREDENTIALS) as running:
        pids = [p.pid for p in running.processes]
        yield running
    # the cluster's daemons, executors and Python workers are all gone
    assert not [p for p in pids if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("stitch-cluster")
    paths = _write_corpus(root / "corpus")
    _write_manifest(root / "manifest", [f"file://{p}" for p in paths])
    return root, paths


def _stitch(manifest: str, out: str, master: str, event_log: Path | None = None,
            env: dict[str, str] | None = None) -> dict:
    conf = {"spark.ui.showConsoleProgress": "false"}
    if event_log:
        event_log.mkdir()
        conf.update(event_log_conf(event_log))
    submit_args = " ".join(f"--conf {k}={v}" for k, v in conf.items()) + " pyspark-shell"
    extra = (["--executors", "2", "--executor-cores", "1", "--executor-memory", "512m"]
             if master.startswith("spark://") else [])
    result = subprocess.run(
        [sys.executable, "-m", "synthfactory.cli", "stitch", "--manifest", manifest,
         "--run", out, *STITCH, "--master", master, *extra],
        capture_output=True, text=True, timeout=1800,
        env={**os.environ, **(env or {}), "PYSPARK_SUBMIT_ARGS": submit_args},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _read(url: str) -> pa.Table:
    from synthfactory import storage

    return storage.read_table(url)


def _outputs(out: str) -> dict:
    """Shards (in order, each table whole), the plan's shard list, the quarantine rows
    in part order (globally sorted by source, source_row)."""
    from synthfactory import storage

    plan = json.loads(storage.read_bytes(storage.join(out, "prompts", "shards.json")))
    shards = [_read(s["url"]) for s in plan["shards"]]
    parts = storage.list_files(storage.join(out, "quarantine", "stitch"), suffix=".parquet")
    quarantine = pa.concat_tables([_read(u) for u in sorted(parts)])
    return {"plan": plan, "shards": shards, "quarantine": quarantine}


def _assert_same(cluster_out: dict, local_out: dict, local_prefix: str = "",
                 cluster_prefix: str = "") -> None:
    c_plan, l_plan = cluster_out["plan"], local_out["plan"]
    for key in ("rows_in", "prompt_rows", "quarantined", "quarantine_reasons", "templates"):
        assert c_plan[key] == l_plan[key], key
    assert [(s["name"], s["rows"], s["tokens"]) for s in c_plan["shards"]] == \
        [(s["name"], s["rows"], s["tokens"]) for s in l_plan["shards"]]
    assert len(cluster_out["shards"]) == len(local_out["shards"]) >= 5
    for mine, theirs in zip(cluster_out["shards"], local_out["shards"], strict=True):
        assert mine.equals(theirs)  # every row, in order, every column
    c_q, l_q = cluster_out["quarantine"], local_out["quarantine"]
    assert c_q.column("source").to_pylist() == [
        s.replace(local_prefix, cluster_prefix, 1) for s in l_q.column("source").to_pylist()]
    for column in ("id", "source_row", "reason"):
        assert c_q.column(column).equals(l_q.column(column)), column


def _assert_ran_in_both_workers(cluster, event_log: Path) -> None:
    executors = executors_in_event_log(event_log)
    assert len(executors) == 2, executors
    assert all(e["tasks"] > 0 for e in executors.values()), executors
    assert "driver" not in executors  # no task ran in the driver
    # the UI ports the workers bound, as the master knows them: a worker whose asked-for
    # port another socket took meanwhile binds the next one (seen: its own RPC service
    # was handed that port by the OS first)
    state = cluster.state()
    worker_uis = {w["webuiaddress"].split("://", 1)[-1] for w in state["workers"]}
    assert len(worker_uis) == 2, state["workers"]
    assert {next((ui for ui in worker_uis if ui in e["stdout"]), e["stdout"])
            for e in executors.values()} == worker_uis
    assert sum(w["state"] == "ALIVE" for w in state["workers"]) == 2
    assert any(app["name"] == "synthfactory-stitch" and app["state"] == "FINISHED"
               for app in state["completedapps"])


@pytest.fixture(scope="module")
def local_reference(corpus, tmp_path_factory):
    root, _ = corpus
    out = f"file://{tmp_path_factory.mktemp('local-run')}"
    summary = _stitch(f"file://{root}/manifest", out, "local[*]")
    return summary, _outputs(out)


def test_cluster_over_file_urls_equals_local(cluster, corpus, local_reference, tmp_path):
    root, paths = corpus
    out = f"file://{tmp_path}/run"
    summary = _stitch(f"file://{root}/manifest", out, cluster.master_url,
                      event_log=tmp_path / "events")
    local_summary, local_out = local_reference
    assert summary["rows_in"] == FILES * DOCS_PER_FILE + 2
    assert {k: summary[k] for k in ("shards", "rows_in", "prompt_rows", "quarantined", "tokens")} \
        == {k: local_summary[k] for k in ("shards", "rows_in", "prompt_rows", "quarantined",
                                         "tokens")}
    outputs = _outputs(out)
    _assert_same(outputs, local_out)
    assert set(outputs["plan"]["quarantine_reasons"]) >= {
        "null text", "empty text", "null id", "duplicate id", "invalid UTF-8 in text",
        "text is not a string (column type int64)"}
    _assert_ran_in_both_workers(cluster, tmp_path / "events")


@pytest.fixture
def s3(corpus):
    with moto_s3() as server:
        client = server.client()
        client.create_bucket(Bucket="lake")
        _, paths = corpus
        for path in paths:
            client.upload_file(str(path), "lake", f"corpus/{path.name}")
        yield {**S3_CREDENTIALS, "AWS_ENDPOINT_URL": server.endpoint, "AWS_REGION": "us-east-1"}


def test_cluster_over_s3_equals_local(cluster, corpus, local_reference, s3, tmp_path):
    from synthfactory import storage

    root, paths = corpus
    keys = [f"s3://lake/corpus/{p.name}" for p in paths]
    storage.write_table(pa.table({"key": keys}), "s3://lake/manifest/part-00000.parquet")
    # the driver gets the endpoint (it passes it on), not the credentials' source of truth
    driver_env = {"AWS_ENDPOINT_URL": s3["AWS_ENDPOINT_URL"], "AWS_REGION": "us-east-1",
                  **S3_CREDENTIALS}
    summary = _stitch("s3://lake/manifest", "s3://lake/runs/cluster", cluster.master_url,
                      event_log=tmp_path / "events", env=driver_env)
    assert summary["run"] == "s3://lake/runs/cluster"
    _, local_out = local_reference
    outputs = _outputs("s3://lake/runs/cluster")
    assert all(s["url"].startswith("s3://lake/runs/cluster/prompts/")
               for s in outputs["plan"]["shards"])
    _assert_same(outputs, local_out, local_prefix=f"file://{root}/corpus/",
                 cluster_prefix="s3://lake/corpus/")
    _assert_ran_in_both_workers(cluster, tmp_path / "events")
