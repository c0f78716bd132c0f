"""The data leaves the factory described: ``synthfactory card`` writes a Hugging Face
dataset card that huggingface_hub parses, and ``synthfactory export`` writes the usable
rows as bounded Parquet files with the card beside them, which ``datasets.load_dataset``
reads by the files and through the card's ``configs``; a rerun rewrites nothing. On a
run validated against a made-up benchmark (tests/support/run_report_fixture.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import pytest

from synthfactory import cli, storage
from synthfactory.contract import paths
from tests.support.hub_double import HubDouble
from tests.support.moto import moto_s3
from tests.support.paths import WORKER
from tests.support.run_report_fixture import validated_run

RUN_ID = "scheduled__2026-01-03T00:00:00+00:00"
SMOKE = {"status": "ok", "steps": 10, "device": "cpu", "loss_first": 10.9, "loss_last": 9.7,
         "loss_expected": 10.8, "tokens_trained": 5120, "padding_waste_fraction": 0.05}


@pytest.fixture(scope="module")
def run_url(tmp_path_factory) -> str:
    url = validated_run(f"file://{tmp_path_factory.mktemp('export')}/out")
    storage.write_json(storage.join(url, paths.SMOKE_SUMMARY), SMOKE)
    return url


def _usable(run_url: str) -> list[dict]:
    rows = []
    for part in sorted(storage.list_files(storage.join(run_url, paths.JOINED), ".parquet")):
        rows += [r for r in storage.read_table(part).to_pylist() if r["usable"]]
    return rows


def test_the_card_is_a_hub_dataset_card_with_the_runs_facts(run_url):
    from huggingface_hub import DatasetCard

    assert cli.main(["card", "--run", run_url, "--license", "Apache-2.0", "--dag-id",
                     "synthetic_rephrase", "--airflow-run-id", RUN_ID]) == 0
    card = DatasetCard.load(storage.local_path(storage.join(run_url, paths.CARD)))
    data = card.data.to_dict()
    assert data["license"] == "apache-2.0"  # the Hub's spelling of the SPDX id
    assert data["task_categories"] == ["text-generation"]
    assert data["source_datasets"] == ["file:///corpus"]
    assert data["configs"] == [{"config_name": "default", "data_files": [
        {"split": "train", "path": "data/train-*.parquet"}]}]
    info = data["dataset_info"]
    assert [f["name"] for f in info["features"]][:3] == ["id", "text", "template_id"]
    usable = _usable(run_url)
    assert info["splits"] == [{"name": "train", "num_bytes": 0,
                               "num_examples": len(usable)}]
    text = card.text
    report = cli_report(run_url)
    for reason, rows in report["quality"]["reasons"].items():
        assert f"| {reason} | {rows} |" in text
    assert "| planted_quiz | 1 |" in text  # the made-up benchmark's contaminated row
    assert f"| Airflow run id | {RUN_ID} |" in text
    assert "| loss_last | 9.7 |" in text  # the smoke test's summary
    plan = storage.read_json(storage.join(run_url, paths.SHARDS_JSON))
    for template in plan["templates"]:
        assert f"| {template['id']} | {template['version']} |" in text
    # the card changes when the run does: a broken body (no reasons) would show here
    assert "## Quality gate" in text and "## Yield per domain" in text


def cli_report(run_url: str) -> dict:
    from synthfactory.report.collect import collect

    return collect(run_url, 1.0)[0]


def test_export_writes_bounded_files_that_load_dataset_reads_and_a_rerun_keeps(run_url,
                                                                               tmp_path):
    from datasets import load_dataset

    out = tmp_path / "export"
    argv = ["export", "--run", run_url, "--out", f"file://{out}", "--license", "cc-by-4.0",
            "--max-file-mb", "0.000001"]  # about one row per file
    assert cli.main(argv) == 0
    usable = _usable(run_url)
    files = sorted((out / "data").glob("train-*.parquet"))
    assert len(files) == len(usable) >= 2  # bounded: one row each here
    by_files = load_dataset("parquet", data_files=[str(f) for f in files], split="train",
                            cache_dir=str(tmp_path / "cache"))
    assert sorted(by_files["id"]) == sorted(r["id"] for r in usable)
    assert sorted(by_files["text"]) == sorted(r["clean_text"] for r in usable)
    # through the card's configs, as the Hub and training code read a dataset folder
    by_card = load_dataset(str(out), split="train", cache_dir=str(tmp_path / "cache"))
    assert by_card.num_rows == len(usable)
    assert list(by_card.features) == list(by_files.features)
    card = (out / "README.md").read_text()
    assert "license: cc-by-4.0" in card and "data/train-00000.parquet" in card

    before = {f.name: (hashlib.sha256(f.read_bytes()).hexdigest(), f.stat().st_mtime_ns)
              for f in [*files, out / "README.md"]}
    assert cli.main(argv) == 0  # the same run again: the same bytes, nothing rewritten
    after = {f.name: (hashlib.sha256(f.read_bytes()).hexdigest(), f.stat().st_mtime_ns)
             for f in [*sorted((out / "data").glob("train-*.parquet")), out / "README.md"]}
    assert after == before
    # a larger bound: fewer files, and none of the old ones left behind
    assert cli.main([*argv[:-1], "256"]) == 0
    assert [f.name for f in sorted((out / "data").glob("*.parquet"))] == ["train-00000.parquet"]
    again = load_dataset(str(out), split="train", cache_dir=str(tmp_path / "cache2"))
    assert again.num_rows == len(usable)


def test_export_to_s3(run_url, monkeypatch):
    with moto_s3(monkeypatch) as s3:
        s3.client().create_bucket(Bucket="exports")
        assert cli.main(["export", "--run", run_url, "--out", "s3://exports/day"]) == 0
        table = storage.read_table("s3://exports/day/data/train-00000.parquet")
        assert table.num_rows == len(_usable(run_url))
        card = storage.read_bytes("s3://exports/day/README.md").decode()
        assert "license: other" in card  # the default
        keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket="exports")["Contents"]]
        assert sorted(keys) == ["day/README.md", "day/data/train-00000.parquet"]  # no markers


def test_a_run_not_joined_yet_is_one_line(tmp_path, capsys):
    code = cli.main(["export", "--run", f"file://{tmp_path}/nothing", "--out",
                     f"file://{tmp_path}/out"])
    assert code == 3
    assert "nothing/prompts/shards.json: not found" in capsys.readouterr().err


def _export(run_url: str, out, hub: HubDouble, *extra: str) -> dict:
    """The CLI in its own process, as a task runs it: huggingface_hub reads HF_ENDPOINT
    when it is imported; the token only from the environment."""
    env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "HF_TOKEN": TOKEN,
           "HF_HUB_DISABLE_TELEMETRY": "1"}
    done = subprocess.run([str(WORKER), "export", "--run", run_url, "--out", f"file://{out}",
                           "--hub-repo", "team/synth", *extra],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert TOKEN not in done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


TOKEN = "hf_test_token_not_a_real_one"


def test_the_push_sends_the_export_once_and_only_what_changed(run_url, tmp_path):
    """Against HubDouble (tests/support/hub_double.py), a test double of the Hub's HTTP
    API on 127.0.0.1: the Hub itself cannot be reached from here."""
    out = tmp_path / "export"
    with HubDouble() as hub:
        first = _export(run_url, out, hub, "--max-file-mb", "0.000001")
        repo = hub.repos["team/synth"]
        local = {p.relative_to(out).as_posix(): p.read_bytes()
                 for p in [out / "README.md", *sorted((out / "data").glob("*.parquet"))]}
        assert repo.files == local and repo.private  # the card and every data file
        assert first["pushed"] == f"{hub.endpoint}/datasets/team/synth/commit/" \
                                  f"{repo.commits[-1]['oid']}"
        assert {c.authorization for c in hub.calls} == {f"Bearer {TOKEN}"}
        assert len(hub.commits()) == 1

        again = _export(run_url, out, hub, "--max-file-mb", "0.000001")
        assert again["pushed"] == "unchanged" and again["files_written"] == 0
        assert len(hub.commits()) == 1  # nothing new pushed

        fewer = _export(run_url, out, hub, "--max-file-mb", "256")  # one file now
        assert len(hub.commits()) == 2 and fewer["pushed"] != first["pushed"]
        assert sorted(repo.files) == ["README.md", "data/train-00000.parquet"]
        assert repo.files["data/train-00000.parquet"] == (
            out / "data" / "train-00000.parquet").read_bytes()
        assert repo.commits[-1]["deleted"]  # the earlier push's extra files
