"""Benchmark: the stitch job on a Spark standalone cluster vs ``local[2]``, same two cores.

Builds the corpus of benchmarks/stitch.py (--docs documents in --files parquet files, with
every kind of bad row) and runs ``synthfactory.stitch.job.stitch`` twice, each in a fresh
process (no JVM warmed by the other run):

  (a) ``local[2]``: one JVM, tasks in its threads, shuffles in memory;
  (b) ``spark://``: a master and 2 workers x 1 core started from PySpark's jars
      (tests/support/spark_standalone.py), 2 executors of 1 core: every task is shipped to
      another JVM, shuffle blocks are fetched over the network stack.

The job time excludes the session start-up (JVM, and on the cluster the wait until both
executors registered); both are printed. The two outputs are compared row for row:
each shard file whole and in order, the shard list, the quarantine parts in order. The
cluster run writes an event log: the executors that ran tasks are counted from it.

    .venv-worker/bin/python benchmarks/stitch_cluster.py [--docs 100000] [--files 20]

Last line: RESULT stitch_cluster docs=N local_docs_per_s=X cluster_docs_per_s=Y
ratio=Y/X identical=1|0 isa=I (I: the CPU's vector extensions, benchmarks/machine.py;
``machine: isa=I load ...`` lines, uptime's load, come before and after the two runs)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests.support

from machine import print_machine, result_line  # noqa: E402
from stitch import build_corpus  # noqa: E402

from synthfactory import storage  # noqa: E402
from synthfactory.contract import paths  # noqa: E402
from synthfactory.layout import RunLayout  # noqa: E402
from synthfactory.model import default_model_dir  # noqa: E402
from synthfactory.stitch.command import manifest_files  # noqa: E402
from synthfactory.stitch.spark_conf import session_conf  # noqa: E402
from synthfactory.stitch.templates import load_templates  # noqa: E402
from tests.support.spark_standalone import (  # noqa: E402
    event_log_conf,
    executors_in_event_log,
    start_cluster,
)

WORKERS, CORES = 2, 1


def run_one(args: argparse.Namespace) -> None:
    """Child process: one session, one job; prints a JSON line with the timings."""
    from synthfactory.stitch.job import StitchConfig, stitch
    from synthfactory.stitch.spark_session import spark_session

    conf = session_conf(args.master, WORKERS, CORES, args.executor_memory)
    if args.event_log:
        conf.update(event_log_conf(Path(args.event_log)))
    cfg = StitchConfig(
        files=manifest_files(args.manifest), run=RunLayout(args.out),
        templates=load_templates(args.templates.split(",")), model_dir=str(default_model_dir()),
        shard_tokens=args.shard_tokens, styles_per_doc=args.styles_per_doc,
        max_new_tokens=args.max_new_tokens, max_model_len=args.max_model_len,
        partitions=args.partitions, master=args.master)
    started = time.perf_counter()
    spark = spark_session(args.master, conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    startup_s = time.perf_counter() - started
    started = time.perf_counter()
    try:
        plan = stitch(cfg, spark)
    finally:
        job_s = time.perf_counter() - started
        spark.stop()
    print(json.dumps({"startup_s": startup_s, "job_s": job_s, "rows_in": plan["rows_in"]}))


def _child(args: argparse.Namespace, master: str, out: str, event_log: Path | None) -> dict:
    argv = [sys.executable, os.path.abspath(__file__), "--one", "--master", master,
            "--manifest", args.manifest, "--out", out, "--templates", args.templates,
            "--styles-per-doc", str(args.styles_per_doc), "--shard-tokens",
            str(args.shard_tokens), "--max-new-tokens", str(args.max_new_tokens),
            "--max-model-len", str(args.max_model_len), "--partitions", str(args.partitions),
            "--executor-memory", args.executor_memory]
    if event_log:
        argv += ["--event-log", str(event_log)]
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{master} run failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def outputs(out: str) -> tuple[list, list, object]:
    import pyarrow as pa

    plan = storage.run_folder(out).shards_plan()
    if plan is None:
        sys.exit(f"{out}: no {paths.SHARDS_JSON}")
    shards = [storage.read_table(s["url"]) for s in plan["shards"]]
    listing = [(s["name"], s["rows"], s["tokens"]) for s in plan["shards"]]
    parts = sorted(storage.list_files(storage.join(out, paths.STITCH_QUARANTINE),
                                      suffix=".parquet"))
    return listing, shards, pa.concat_tables([storage.read_table(u) for u in parts])


def identical(local_out: str, cluster_out: str) -> bool:
    (l_list, l_shards, l_q), (c_list, c_shards, c_q) = outputs(local_out), outputs(cluster_out)
    same = (l_list == c_list and len(l_shards) == len(c_shards)
            and all(a.equals(b) for a, b in zip(l_shards, c_shards, strict=True))
            and l_q.equals(c_q))
    print(f"check: {len(c_list)} shards, {sum(t.num_rows for t in c_shards)} prompt rows, "
          f"{c_q.num_rows} quarantine rows: {'identical' if same else 'DIFFERENT'}")
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=20)
    # the six web-prose templates its recorded figures were measured with
    parser.add_argument("--templates", default="easy,encyclopedic,faq,qa,summary,tutorial")
    parser.add_argument("--styles-per-doc", type=int, default=2)
    parser.add_argument("--shard-tokens", type=int, default=2_000_000)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--executor-memory", default="1g")
    parser.add_argument("--work", default=None, help="work folder (default: a temporary one)")
    # child mode
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--manifest", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--event-log", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS",
                          "--conf spark.ui.showConsoleProgress=false pyspark-shell")
    if args.one:
        run_one(args)
        return

    # local[2]'s one JVM holds the driver and both task slots: give it the heap the
    # cluster's driver and two executors have together.
    os.environ.setdefault("SYNTHFACTORY_SPARK_DRIVER_MEMORY", "3g")
    work = Path(args.work or tempfile.mkdtemp(prefix="stitch-cluster-bench-"))
    if args.work and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    args.manifest, _ = build_corpus(work, args.docs, args.files, seed=0)
    print(f"cores={os.cpu_count()} docs={args.docs} files={args.files} partitions="
          f"{args.partitions} corpus built in {time.perf_counter() - started:.1f} s", flush=True)

    print_machine()
    local_out = f"file://{work}/local-run"
    local = _child(args, "local[2]", local_out, None)
    print(f"local[2]: start-up {local['startup_s']:.1f} s, job {local['job_s']:.1f} s",
          flush=True)

    event_log = work / "events"
    event_log.mkdir()
    cluster_out = f"file://{work}/cluster-run"
    with start_cluster(work / "standalone", workers=WORKERS, cores=CORES,
                       memory=_worker_memory(args.executor_memory)) as cluster:
        os.environ["SYNTHFACTORY_SPARK_DRIVER_MEMORY"] = "1g"  # the driver only coordinates
        remote = _child(args, cluster.master_url, cluster_out, event_log)
    print_machine()
    print(f"cluster {WORKERS}x{CORES}: start-up {remote['startup_s']:.1f} s (executors "
          f"registered), job {remote['job_s']:.1f} s", flush=True)
    executors = executors_in_event_log(event_log)
    busy = {k: v["tasks"] for k, v in executors.items() if v["tasks"]}
    print(f"executors: {len(executors)} registered, {len(busy)} ran tasks {busy}")

    same = identical(local_out, cluster_out)
    docs = local["rows_in"]
    local_rate, cluster_rate = docs / local["job_s"], remote["rows_in"] / remote["job_s"]
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print(result_line("stitch_cluster", docs=docs, local_docs_per_s=f"{local_rate:.0f}",
                      cluster_docs_per_s=f"{cluster_rate:.0f}",
                      ratio=f"{cluster_rate / local_rate:.3f}", identical=int(same)))


def _worker_memory(executor_memory: str) -> str:
    """A worker offers its executor's heap plus room for the JVM's own overhead."""
    unit = executor_memory[-1].lower()
    mebibytes = int(float(executor_memory[:-1]) * (1024 if unit == "g" else 1))
    return f"{mebibytes + 512}m"


if __name__ == "__main__":
    main()
