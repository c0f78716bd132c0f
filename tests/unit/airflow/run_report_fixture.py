"""Run with .venv-worker's python: a committed run folder (tests/integration/engine's
build_run) plus the report the engine writes for it. The Airflow side's tests read it.

    python run_report_fixture.py ROOT_URL  -> prints the run folder URL
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration" / "engine"))

from catalog_fixtures import build_run  # noqa: E402

from synthfactory import cli, storage  # noqa: E402


def main(root: str) -> None:
    run = build_run(root, pipeline="synthetic_rephrase", interval="2026-01-02",
                    shard_rows=(6, 5), quarantined=1)
    storage.write_json(storage.join(run.layout.manifest, "_SUMMARY.json"),
                       {"objects": 1, "bytes": 2048, "partitions": 1, "source": "file:///corpus"})
    code = cli.main(["report", "--run", run.run_url, "--gpu-hour-price", "4.0",
                     "--airflow-run-id", "manual__2026-01-03T00:00:00+00:00"])
    assert code == 0
    print(run.run_url)


if __name__ == "__main__":
    main(sys.argv[1])
