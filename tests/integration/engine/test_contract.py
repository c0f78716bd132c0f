"""The contract is true: a small real run writes exactly what synthfactory.contract's
TypedDicts and docs/contracts.md say, key by key.

The run: a seed partition of a dozen documents (one duplicate id and one empty text
for the stitch quarantine, one the echo engine rejects) goes through crawl, stitch
(Spark, local), plan, rephrase (the real worker with the echo engine), validate and
report, each as the console script runs them except rephrase, which runs in this
process so that its echo engine can reject a row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import synthfactory.contract as contract
from synthfactory import storage
from synthfactory.audit import audit
from synthfactory.contract import RunFolder, paths
from synthfactory.model import default_model_dir, is_ready
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from synthfactory.report_figures import build_report, shard_figures
from tests.support.contract_shapes import CONTRACTS_MD, check, documented_keys

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not is_ready(default_model_dir()), reason="run `synthfactory model prepare` (make setup)")]

DAY = "2026-01-01"
STEP_TIMEOUT = 900  # Spark on 2 busy cores
REJECT = "REJECTED-BY-ECHO"


@dataclass
class Written:
    """Every JSON document the run wrote, as (where, shape name, value)."""

    run_url: str
    documents: list[tuple[str, str, object]]

    def of(self, shape: str) -> list[tuple[str, object]]:
        return [(where, value) for where, name, value in self.documents if name == shape]


def _cli(tmp, *args: str):
    result = tmp / f"result-{len(list(tmp.glob('result-*')))}.json"
    proc = subprocess.run([sys.executable, "-m", "synthfactory.cli", *args],
                          env={**os.environ, contract.RESULT_FILE_ENV: str(result)},
                          capture_output=True, text=True, timeout=STEP_TIMEOUT)
    assert proc.returncode == 0, f"{args[0]} failed:\n{proc.stderr[-3000:]}"
    return json.loads(result.read_text())


def _seed_partition(root) -> str:
    texts = [f"Document {i} explains how module number {i} of a library reads files, "
             f"parses their lines and reports errors to the caller in a clear way. "
             * (1 + i % 3) for i in range(10)]
    ids = [f"d{i:02d}" for i in range(10)]
    ids += ["d00", "blank", "rejected"]  # a duplicate id, an empty text, a rejected row
    texts += ["the same id again", "", f"{REJECT} a document the engine refuses."]
    folder = root / f"dt={DAY}"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"id": ids, "text": texts}), folder / "part-00000.parquet")
    return f"file://{root}"


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Written:
    tmp = tmp_path_factory.mktemp("contract")
    source = _seed_partition(tmp / "corpus")
    run = f"file://{tmp}/data/synthetic_rephrase/{DAY}"
    _cli(tmp, "crawl", "--source", source, "--out", f"{run}/{paths.MANIFEST}",
         "--interval-start", f"{DAY}T00:00:00+00:00", "--interval-end", "2026-01-02T00:00:00+00:00",
         "--partition-template", "dt={ds}")
    _cli(tmp, "stitch", "--manifest", f"{run}/{paths.MANIFEST}", "--run", run,
         "--templates", "encyclopedic,qa", "--styles-per-doc", "1", "--shard-tokens", "1024",
         "--max-new-tokens", "16", "--max-model-len", "1024", "--model", str(default_model_dir()),
         "--master", "local[2]", "--partitions", "2")
    groups = _cli(tmp, "plan", "--run", run, "--max-shard-groups", "2", "--", "--engine", "echo")
    folder = storage.run_folder(run)
    entries = folder.shards_plan()["shards"]
    for entry in entries:
        rephrase_shard(entry["url"], run, lambda: EchoEngine(reject_if=REJECT),
                       WorkerOptions(model="echo", checkpoint_rows=3))
    # a made-up benchmark quoting one seed document: validation/ and report.json then hold
    # the decontamination keys contracts.md lists (absent without --benchmarks)
    (tmp / "benchmarks").mkdir()
    (tmp / "benchmarks" / "quiz.jsonl").write_text(json.dumps({"text": (
        "Document 3 explains how module number 3 of a library reads files, parses their "
        "lines and reports errors to the caller in a clear way.")}) + "\n")
    _cli(tmp, "validate", *[a for e in entries for a in ("--shard", e["url"])], "--run", run,
         "--benchmarks", f"file://{tmp}/benchmarks")
    _cli(tmp, "join", "--run", run)
    _cli(tmp, "report", "--run", run, "--dag-id", "synthetic_rephrase",
         "--airflow-run-id", "manual__contract", "--gpu-hour-usd", "2.5")

    documents = [(paths.MANIFEST_SUMMARY, "ManifestSummary", folder.manifest_summary()),
                 (paths.SHARDS_JSON, "ShardsJson", folder.shards_plan()),
                 (paths.JOINED_SUMMARY, "JoinedJson", folder.joined()),
                 (paths.REPORT_JSON, "ReportJson", folder.report())]
    for entry in entries:
        documents += [(paths.commit(entry["name"]), "CommittedJson", folder.commit(entry["name"])),
                      (paths.validation(entry["name"]), "ValidationJson",
                       folder.validation(entry["name"]))]
    documents += [(f"plan's summary [{i}]", "PlanGroup", g) for i, g in enumerate(groups)]
    return Written(folder.run_url, documents)


def test_the_run_reaches_every_branch_of_the_shapes(written):
    (_, plan), = written.of("ShardsJson")
    assert len(plan["shards"]) >= 2 and plan["quarantined"] == 2
    commits = [c for _, c in written.of("CommittedJson")]
    assert sum(c["rows_quarantined"] for c in commits) == 1  # the rejected document
    (_, report), = written.of("ReportJson")
    assert report["complete"] is True, report["missing"]
    assert audit(written.run_url).problems == []  # every row accounted for, read the same way


def test_every_file_has_its_shape(written):
    problems = []
    for where, name, value in written.documents:
        problems += check(value, getattr(contract, name), where)[0]
    assert problems == []


@pytest.mark.parametrize("name", ["ManifestSummary", "ShardsJson", "CommittedJson",
                                  "ValidationJson", "PlanGroup", "JoinedJson", "ReportJson"])
def test_contracts_md_lists_what_is_written(written, name):
    keys: set[str] = set()
    for where, value in written.of(name):
        keys |= check(value, getattr(contract, name), where)[1]
    where = written.of(name)[0][0]
    listed = documented_keys()[name]
    assert sorted(listed - keys) == [], (
        f"{CONTRACTS_MD.name} lists these keys of {where} ({name}), which the run did not "
        "write")
    assert sorted(keys - listed) == [], (
        f"{where} ({name}) holds these keys, which {CONTRACTS_MD.name} does not list")


def test_the_json_only_figures_are_the_reports(written):
    """What the UI shows for a run without report.json (report_figures' build_report on
    the JSON files alone) equals report.json wherever it does not need the parquet."""
    (_, report), = written.of("ReportJson")
    files = RunFolder(written.run_url, storage.read_json_or_none).read()
    so_far = build_report(written.run_url, files, [shard_figures(s) for s in files.shards],
                          gpu_hour_usd=2.5)
    for key in ("run_url", "complete", "missing", "documents_in", "manifest", "prompts",
                "stitch", "shards", "cost"):
        assert so_far[key] == report[key], key
    assert so_far["rephrase"] == {**report["rephrase"], "quarantined_by_reason": {}}
    assert so_far["tokens"] == {**report["tokens"], "prompt": None}
    assert report["quality"]["examples"]  # the echo engine's outputs are rejected too
    assert so_far["quality"] == {**report["quality"], "examples": []}
