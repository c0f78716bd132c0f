"""Run with .venv-worker's python, from the repository root: a committed run folder
(run_folders.build_run), validated by the real quality gate (verdicts/, rejected/), plus
the report the engine writes for it. The Airflow side's tests read it.

    python -m tests.support.run_report_fixture ROOT_URL  -> prints the run folder URL
"""

from __future__ import annotations

import json
import sys

from synthfactory import cli, storage
from synthfactory.join import join_run
from synthfactory.quality import decontaminate
from synthfactory.validate import validate_shard
from tests.support.run_folders import build_run


def validated_run(root: str) -> str:
    """The run folder, validated against a made-up benchmark and joined: its URL."""
    run = build_run(root, pipeline="synthetic_rephrase", interval="2026-01-02",
                    shard_rows=(6, 5), quarantined=1, join=False)
    # a made-up benchmark that quotes the longest generated row of shard 0 (the one of
    # 13 words or more): one contaminated row
    first = max(storage.read_table(storage.join(run.layout.shard_output("shard-00000"),
                                                "part-00000.parquet")).to_pylist(),
                key=lambda row: len(row["output_text"].split()))
    benchmarks = storage.join(root, "benchmarks")
    storage.write_bytes(storage.join(benchmarks, "planted_quiz.jsonl"),
                        (json.dumps({"text": first["output_text"]}) + "\n").encode())
    index = decontaminate.build(benchmarks)
    for entry in storage.read_json(run.layout.shards_json)["shards"]:
        validate_shard(entry["url"], run.run_url, 0.5, index)
    join_run(run.run_url)  # on the real gate's verdicts
    storage.write_json(storage.join(run.layout.manifest, "_SUMMARY.json"),
                       {"objects": 1, "bytes": 2048, "partitions": 1, "source": "file:///corpus"})
    return run.run_url


def main(root: str) -> None:
    run_url = validated_run(root)
    code = cli.main(["report", "--run", run_url, "--gpu-hour-usd", "4.0",
                     "--airflow-run-id", "manual__2026-01-03T00:00:00+00:00"])
    assert code == 0
    assert cli.main(["card", "--run", run_url, "--license", "cc-by-4.0"]) == 0
    print(run_url)


if __name__ == "__main__":
    main(sys.argv[1])
