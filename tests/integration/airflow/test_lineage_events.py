"""The OpenLineage events of the session's DAG run (tests/support/dag_run.py), as a
lineage backend receives them: the run goes through the provider's listener with its
file transport (one event a line), and here the file is read back.

What a user of a lineage tool would look for: a START and a COMPLETE for every step,
the seed corpus as crawl's input, the Iceberg table as register's output, the run facet
(model, templates with their hashes, rows by verdict) on validate and register, agreeing
with what the run wrote; and neither canary secret of the run anywhere in an event.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from urllib.parse import quote

import pytest

from tests.support.dag_run import LINEAGE_NAMESPACE, DagRun

DAG_ID = "synthetic_rephrase"
STEPS = ("crawl_metadata", "stitch_prompts", "plan_shards", "shard.rephrase", "shard.validate",
         "join_chunks", "register_catalog", "audit_run", "smoke_test_training", "write_report")
MAPPED = ("shard.rephrase", "shard.validate")


@pytest.fixture(scope="module")
def run(dag_run) -> DagRun:
    assert dag_run.first.returncode == 0, (dag_run.first.stdout + dag_run.first.stderr)[-4000:]
    return dag_run


@pytest.fixture(scope="module")
def lines(run) -> list[str]:
    assert run.lineage_events.exists(), "the DAG run emitted no OpenLineage event"
    return run.lineage_events.read_text().splitlines()


def _task(event: dict) -> str | None:
    name = event["job"]["name"]
    return name[len(DAG_ID) + 1:] if name.startswith(DAG_ID + ".") else None


def _run_id(event: dict) -> str | None:
    return ((event["run"]["facets"].get("airflow") or {}).get("dagRun") or {}).get("run_id")


@pytest.fixture(scope="module")
def first_run(lines) -> dict[str, list[dict]]:
    """The first DAG run's task events, by task id (the rerun's follow in the file)."""
    events = [json.loads(line) for line in lines]
    task_events = [e for e in events if _task(e) and _run_id(e)]
    assert task_events, "no task event"
    first = min(task_events, key=lambda e: e["eventTime"])
    by_task = defaultdict(list)
    for event in task_events:
        if _run_id(event) == _run_id(first):
            by_task[_task(event)].append(event)
    return by_task


def _complete(events: list[dict]) -> list[dict]:
    return [e for e in events if e["eventType"] == "COMPLETE"]


def _names(datasets: list[dict]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def _facet(event: dict) -> dict:
    facet = event["run"]["facets"].get("synthfactory")
    assert facet, f"{event['job']['name']} {event['eventType']}: no synthfactory run facet"
    return facet


def _folder_json(run: DagRun, pattern: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(run.run_folder.glob(pattern))]


def _map_index(event: dict) -> int | None:
    return (event["run"]["facets"]["airflow"].get("taskInstance") or {}).get("map_index")


def test_every_step_has_start_and_complete_events(run, first_run):
    counts = {task: Counter(e["eventType"] for e in events) for task, events in first_run.items()}
    for task in STEPS:  # (a retried try adds a FAIL and another START: not counted here)
        assert counts.get(task, {}).get("START", 0) >= 1, (task, counts)
        assert counts[task].get("COMPLETE", 0) >= 1, (task, counts)
    db = sqlite3.connect(run.tmp / "airflow" / "airflow.db")
    plan = json.loads(db.execute("SELECT value FROM xcom WHERE task_id = 'plan_shards' "
                                 "LIMIT 1").fetchone()[0])
    for task in MAPPED:  # a START and a COMPLETE per shard group (map index)
        for kind in ("START", "COMPLETE"):
            indices = sorted({_map_index(e) for e in first_run[task] if e["eventType"] == kind})
            assert indices == list(range(len(plan))), (task, kind, indices)
    assert {e["job"]["namespace"] for events in first_run.values() for e in events} == {
        LINEAGE_NAMESPACE}
    print("OpenLineage task events of the first run:",
          json.dumps({t: dict(c) for t, c in sorted(counts.items())}))


def test_crawl_reads_the_source_corpus(run, first_run):
    source = run.conf["source"]
    assert source.startswith("file://")
    for event in first_run["crawl_metadata"]:
        assert _names(event["inputs"]) == [("file", source[len("file://"):])]
        assert _names(event["outputs"]) == [("file", str(run.run_folder / "manifest"))]


def test_stitch_and_the_shards_chain_through_the_run_folder(run, first_run):
    def outputs(task):
        return {n for e in _complete(first_run[task]) for n in _names(e["outputs"])}

    def inputs(task):
        return {n for e in _complete(first_run[task]) for n in _names(e["inputs"])}

    folder = str(run.run_folder)
    assert ("file", f"{folder}/manifest") in inputs("stitch_prompts")
    assert outputs("stitch_prompts") == {("file", f"{folder}/prompts")} <= inputs("shard.rephrase")
    assert outputs("shard.rephrase") == {("file", f"{folder}/generated")}
    assert ("file", f"{folder}/generated") in inputs("shard.validate")
    assert ("file", f"{folder}/verdicts") in outputs("shard.validate") & inputs("join_chunks")
    assert outputs("join_chunks") == {("file", f"{folder}/joined")} == inputs(
        "register_catalog")


def test_register_writes_the_iceberg_table(first_run):
    for event in first_run["register_catalog"]:
        assert _names(event["outputs"]) == [("iceberg://synthfactory", "synthetic.rephrased")]


def test_run_facets_carry_model_templates_and_rows_by_verdict(run, first_run):
    commits = _folder_json(run, "generated/*/_COMMITTED.json")
    validations = _folder_json(run, "validation/shard-*.json")
    (plan,) = _folder_json(run, "prompts/shards.json")
    usable = sum(v["quality"]["usable"] for v in validations)
    rejected = sum(v["quality"]["rejected"] for v in validations)
    quarantined = sum(c["rows_quarantined"] for c in commits)
    assert usable + rejected == sum(c["rows_generated"] for c in commits) > 0

    (register,) = _complete(first_run["register_catalog"])
    facet = _facet(register)
    assert facet["model"].endswith("SmolLM2-135M-Instruct")
    assert facet["rows"] == {"usable": usable, "rejected": rejected, "quarantined": quarantined}
    templates = {t["id"]: t for t in facet["templates"]}
    assert set(templates) == set(run.conf["templates"]) == {t["id"] for t in plan["templates"]}
    for entry in plan["templates"]:  # stitch's content hash where it wrote one
        expected = entry.get("hash") or f"{entry['id']}@{entry['version']}"
        assert templates[entry["id"]]["hash"] == expected

    validate = [_facet(e) for e in _complete(first_run["shard.validate"])]
    assert {f["model"] for f in validate} == {facet["model"]}
    assert all({t["id"] for t in f["templates"]} == set(templates) for f in validate)
    for verdict, total in (("usable", usable), ("rejected", rejected),
                           ("quarantined", quarantined)):
        assert sum(f["rows"][verdict] for f in validate) == total, verdict
    for event in first_run["register_catalog"] + first_run["shard.validate"]:
        if event["eventType"] == "START":
            assert "synthfactory" not in event["run"]["facets"]


def test_no_event_holds_the_catalog_password_or_the_aws_secret(run, lines):
    text = "\n".join(lines)
    found = [name for name, secret in run.canaries.items()
             if secret in text or quote(secret, safe="") in text]
    assert found == []
    # the search sees the events' real content
    assert "synthetic.rephrased" in text and str(run.run_folder) in text
