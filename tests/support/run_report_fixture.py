"""Run with .venv-worker's python, from the repository root: a committed run folder
(run_folders.build_run), validated by the real quality gate (verdicts/, rejected/), plus
the report the engine writes for it. The Airflow side's tests read it.

    python -m tests.support.run_report_fixture ROOT_URL  -> prints the run folder URL
"""

from __future__ import annotations

import sys

from synthfactory import cli, storage
from synthfactory.join import join_run
from synthfactory.validate import validate_shard
from tests.support.run_folders import build_run


def main(root: str) -> None:
    run = build_run(root, pipeline="synthetic_rephrase", interval="2026-01-02",
                    shard_rows=(6, 5), quarantined=1, join=False)
    for entry in storage.read_json(run.layout.shards_json)["shards"]:
        validate_shard(entry["url"], run.run_url, 0.5)
    join_run(run.run_url)  # on the real gate's verdicts
    storage.write_json(storage.join(run.layout.manifest, "_SUMMARY.json"),
                       {"objects": 1, "bytes": 2048, "partitions": 1, "source": "file:///corpus"})
    code = cli.main(["report", "--run", run.run_url, "--gpu-hour-usd", "4.0",
                     "--airflow-run-id", "manual__2026-01-03T00:00:00+00:00"])
    assert code == 0
    print(run.run_url)


if __name__ == "__main__":
    main(sys.argv[1])
