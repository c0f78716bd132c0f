"""Bad inputs end in one line naming the input and the problem: never a traceback,
never a hang (issue 12, docs/bad-inputs.md lists every case).

Each case runs the real console script as a user would, in a fresh folder, and
checks: its exact exit code (2 argparse, 3 a bad input, 1 only where a retry may cure
it: docs/adr/0131), no Python traceback anywhere on stderr, a last stderr line that
names the input (flag, path or variable) and the problem, within a time limit
(``rephrase --max-in-flight 0`` used to spin forever). Cases that would need Spark or
vLLM must be refused before either starts; the one Spark case is marked slow. The
table of docs/bad-inputs.md and the cases here are checked against each other.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory import cli, storage
from synthfactory.join import join_run
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from synthfactory.validate import validate_shard
from tests.support.paths import ROOT
from tests.support.shards import write_prompt_shard

SCRIPT = Path(sys.executable).with_name("synthfactory")  # .venv-worker/bin/synthfactory
UNREACHABLE_DB = "postgresql+psycopg2://synth@127.0.0.1:1/catalog"  # nothing listens on :1
DEFAULT_TIMEOUT = 90  # generous: a loaded 2-core machine takes 5-20 s to start a step


@dataclass(frozen=True)
class Case:
    id: str
    code: int  # the exit code: whether Airflow retries it (docs/contracts.md)
    argv: list[str]  # after `synthfactory`; {name}: a path of the world ({{ for a brace})
    expect: tuple[str, ...]  # the last stderr line holds each: the input and the problem
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    marks: tuple = ()


CASES = [
    # corpus
    Case("corpus-out-under-a-file", 3, ["corpus", "--out", "{a_file}/corpus", "--days", "1"],
         ("a-file.txt/corpus", "cannot create the folder", "a-file.txt is a file, not a folder")),
    Case("corpus-days-0", 2, ["corpus", "--out", "{tmp}/corpus", "--days", "0"],
         ("argument --days", "must be at least 1, got 0")),
    Case("corpus-end-date-not-a-date", 3,
         ["corpus", "--out", "{tmp}/corpus", "--end-date", "2026-13-45"],
         ("--end-date '2026-13-45'", "not a YYYY-MM-DD date")),
    # model
    Case("model-out-under-a-file", 3, ["model", "prepare", "--out", "{a_file}/model"],
         ("--out", "a-file.txt/model", "a-file.txt is a file, not a folder")),
    Case("model-unknown-action", 2, ["model", "convert"],
         ("argument action", "invalid choice: 'convert'")),
    # crawl
    Case("crawl-max-attempts-0", 2,
         ["crawl", "--source", "{tmp}/corpus", "--out", "{tmp}/manifest",
          "--request-attempts", "0"],
         ("argument --request-attempts", "must be at least 1, got 0")),
    Case("crawl-aws-max-attempts-not-an-integer", 3,
         ["crawl", "--source", "s3://bucket/corpus", "--out", "{tmp}/manifest"],
         ("AWS_MAX_ATTEMPTS='ten'", "not an integer"),
         env={"AWS_MAX_ATTEMPTS": "ten", "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
              "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
              "AWS_REGION": "us-east-1"}),
    Case("crawl-aws-retry-mode-unknown", 3,
         ["crawl", "--source", "s3://bucket/corpus", "--out", "{tmp}/manifest"],
         ("retry mode 'fast'", "AWS_RETRY_MODE", "expected one of"),
         env={"AWS_RETRY_MODE": "fast", "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
              "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
              "AWS_REGION": "us-east-1"}),
    Case("crawl-workers-0", 2,
         ["crawl", "--source", "{tmp}/corpus", "--out", "{tmp}/manifest", "--workers", "0"],
         ("argument --workers", "must be at least 1, got 0")),
    Case("crawl-interval-end-before-start", 3,
         ["crawl", "--source", "{tmp}/corpus", "--out", "{tmp}/manifest",
          "--interval-start", "2026-01-02", "--interval-end", "2026-01-01"],
         ("interval [2026-01-02, 2026-01-01)", "the end must come after the start")),
    Case("crawl-source-unsupported-scheme", 3,
         ["crawl", "--source", "gs://bucket/corpus", "--out", "{tmp}/manifest"],
         ("gs://bucket/corpus", "unsupported URL scheme 'gs'")),
    # stitch
    Case("stitch-partitions-0", 2,
         ["stitch", "--manifest", "{manifest}", "--run", "{tmp}/run2", "--templates", "summary",
          "--shard-tokens", "4096", "--model", "{model}", "--partitions", "0"],
         ("argument --partitions", "must be at least 1, got 0")),
    Case("stitch-max-new-tokens-0", 2,
         ["stitch", "--manifest", "{manifest}", "--run", "{tmp}/run2", "--templates", "summary",
          "--shard-tokens", "4096", "--model", "{model}", "--max-new-tokens", "0"],
         ("argument --max-new-tokens", "must be at least 1, got 0")),
    Case("stitch-no-manifest-parts", 3,
         ["stitch", "--manifest", "{tmp}/empty", "--run", "{tmp}/run2", "--templates", "summary",
          "--shard-tokens", "4096"],
         ("empty", "no manifest part-*.parquet files")),
    Case("stitch-unknown-template", 3,
         ["stitch", "--manifest", "{manifest}", "--run", "{tmp}/run2", "--templates", "nope",
          "--shard-tokens", "4096"],
         ("template 'nope'", "not found")),
    Case("stitch-routing-unknown-template", 3,
         ["stitch", "--manifest", "{manifest}", "--run", "{tmp}/run2", "--routing", "on",
          "--templates-url", "{routing_folder}", "--shard-tokens", "4096"],
         ("routing", "routing_folder/routing.json", "routes.math.*",
          "unknown template 'nope'")),
    Case("stitch-bad-master", 3,
         ["stitch", "--manifest", "{manifest}", "--run", "{tmp}/run2", "--templates", "summary",
          "--shard-tokens", "4096", "--model", "{model}", "--master", "bogus://x"],
         ("--master bogus://x", "not a Spark master URL")),
    Case("stitch-model-without-tokenizer", 3,
         ["stitch", "--manifest", "{manifest}", "--run", "{tmp}/run2", "--templates", "summary",
          "--shard-tokens", "4096", "--model", "{tmp}/empty"],
         ("empty/tokenizer.json", "tokenizer.json not found")),
    Case("stitch-spark-failure-not-ours", 3,
         ["stitch", "--manifest", "{manifest}", "--run", "{tmp}/run2", "--templates", "summary",
          "--shard-tokens", "4096", "--model", "{model}", "--master", "local[1]",
          "--partitions", "1"],
         ("--manifest", "the Spark job failed", "ArrowNotImplementedError",
          "Unsupported cast from list"),
         timeout=900, marks=(pytest.mark.slow,)),  # ~1.5 min alone; much more under load
    # plan
    Case("plan-entry-missing-tokens", 3,
         ["plan", "--run", "{plan_no_tokens}", "--max-shard-groups", "2"],
         ("shards.json: shards[0] (shard-00000)", "missing 'tokens'")),
    Case("plan-entry-missing-rows", 3,
         ["plan", "--run", "{plan_no_rows}", "--max-shard-groups", "2"],
         ("shards.json: shards[0] (shard-00000)", "missing 'rows'")),
    Case("plan-entry-missing-url", 3,
         ["plan", "--run", "{plan_no_url}", "--max-shard-groups", "2"],
         ("shards.json: shards[0] (shard-00000)", "missing 'url'")),
    Case("plan-max-groups-0", 2, ["plan", "--run", "{run}", "--max-shard-groups", "0"],
         ("argument --max-shard-groups", "must be at least 1, got 0")),
    Case("plan-no-shards-json", 3, ["plan", "--run", "{tmp}/empty", "--max-shard-groups", "2"],
         ("empty/prompts/shards.json", "not found")),
    Case("plan-shards-json-not-json", 3,
         ["plan", "--run", "{plan_not_json}", "--max-shard-groups", "2"],
         ("shards.json", "not valid JSON")),
    # estimate
    Case("estimate-gpus-0", 2,
         ["estimate", "--tokens", "1e9", "--tokens-per-s-per-gpu", "500", "--gpus", "0"],
         ("argument --gpus", "must be at least 1, got 0"), timeout=30),
    Case("estimate-run-without-report", 3,
         ["estimate", "--tokens", "1e9", "--run", "{tmp}", "--gpus", "8"],
         ("--run", "no report/report.json there"), timeout=30),
    # rephrase
    Case("rephrase-max-in-flight-0", 2,
         ["rephrase", "--shard", "{shard}", "--max-in-flight", "0"],
         ("argument --max-in-flight", "must be at least 1, got 0"), timeout=30),
    Case("rephrase-engine-endpoint-without-url", 3,
         ["rephrase", "--shard", "{shard}", "--engine", "endpoint"],
         ("--engine endpoint", "give --endpoint URL"), timeout=30),
    Case("rephrase-endpoint-with-credentials", 3,
         ["rephrase", "--shard", "{shard}", "--engine", "endpoint", "--endpoint",
          "http://me:sk-1@llm:8000"],
         ("--endpoint http://***@llm", "credentials in the URL would be logged"), timeout=30),
    Case("rephrase-engine-args-missing-file", 3,
         ["rephrase", "--shard", "{shard}", "--engine-args", "@{tmp}/missing.json"],
         ("--engine-args @", "missing.json", "file not found")),
    Case("rephrase-engine-args-not-an-object", 3,
         ["rephrase", "--shard", "{shard}", "--engine-args", "[1, 2]"],
         ("--engine-args", "expected a JSON object")),
    Case("rephrase-engine-key-vllm-rejects", 3,
         ["rephrase", "--shard", "{shard}", "--engine-args", '{{"max_num_seq": 8}}'],
         ("--engine-args", "'max_num_seq'", "not a vLLM engine argument")),
    Case("rephrase-sampling-key-in-engine-args", 3,
         ["rephrase", "--shard", "{shard}", "--engine-args", '{{"temperature": 0.2}}'],
         ("--engine-args", "'temperature'", "is a sampling parameter")),
    Case("rephrase-top-p-above-1", 2, ["rephrase", "--shard", "{shard}", "--top-p", "1.5"],
         ("argument --top-p", "must be in (0, 1], got 1.5")),
    Case("rephrase-tuned-file-bad-key", 3,
         ["rephrase", "--shard", "{shard}", "--model", "{tuned_model}"],
         ("synthfactory-engine.json", "'max_batch'", "not a vLLM engine argument")),
    Case("rephrase-shard-missing", 3,
         ["rephrase", "--shard", "{tmp}/prompts/shard-00009.parquet"],
         ("--shard", "shard-00009.parquet", "not found")),
    Case("rephrase-max-attempts-0", 2,
         ["rephrase", "--shard", "{shard}", "--max-attempts", "0"],
         ("argument --max-attempts", "must be at least 1, got 0"), timeout=30),
    Case("rephrase-max-attempts-negative", 2,
         ["rephrase", "--shard", "{shard}", "--max-attempts=-1"],
         ("argument --max-attempts", "must be at least 1, got -1"), timeout=30),
    Case("rephrase-max-attempts-not-a-number", 2,
         ["rephrase", "--shard", "{shard}", "--max-attempts", "x"],
         ("argument --max-attempts", "'x'"), timeout=30),
    Case("rephrase-checkpoint-rows-0", 2,
         ["rephrase", "--shard", "{shard}", "--checkpoint-rows", "0"],
         ("argument --checkpoint-rows", "must be at least 1, got 0")),
    # one window (docs/adr/0133): refused before any engine starts
    Case("rephrase-engine-window-below-the-shards", 3,
         ["rephrase", "--shard", "{shard}", "--max-model-len", "2048", "--engine-args",
          '{{"max_model_len": 1024}}'],
         ("--engine-args", "max_model_len 1024",
          "smaller than the window the shards were cut for, 2048")),
    Case("plan-max-model-len-after-dashes", 3,
         ["plan", "--run", "{run}", "--max-shard-groups", "2", "--", "--max-model-len", "1024"],
         ("--max-model-len after --", "prompts/shards.json", "restitch")),
    # validate
    Case("validate-not-a-shard-name", 3, ["validate", "--shard", "{not_a_shard}"],
         ("--shard", "prompts.parquet", "not a prompt shard name")),
    Case("validate-shard-not-committed", 3, ["validate", "--shard", "{shard}"],
         ("shard-00000", "not committed")),
    Case("validate-max-repetition-above-1", 2,
         ["validate", "--shard", "{shard}", "--max-repetition", "2"],
         ("argument --max-repetition", "must be between 0 and 1")),
    # validate --benchmarks (quality/decontaminate.py): before any shard is read
    Case("validate-benchmark-named-column-missing", 3,
         ["validate", "--shard", "{shard}", "--benchmarks", "file://{tmp}/bench-quiz",
          "--benchmark-columns", "prompt"],
         ("--benchmarks", "quiz.parquet", "no column 'prompt'", "(columns: question, answer)")),
    Case("validate-benchmark-unreadable", 3,
         ["validate", "--shard", "{shard}", "--benchmarks", "file://{tmp}/bench-broken"],
         ("--benchmarks", "broken.parquet", "unreadable")),
    Case("validate-benchmarks-missing", 3,
         ["validate", "--shard", "{shard}", "--benchmarks", "file://{tmp}/no-such-folder"],
         ("--benchmarks", "no-such-folder", "no such folder or file")),
    Case("validate-decontaminate-n-below-5", 3,
         ["validate", "--shard", "{shard}", "--benchmarks", "file://{tmp}/bench-quiz",
          "--decontaminate-n", "4"],
         ("--decontaminate-n 4", "at least 5")),
    Case("validate-benchmark-named-column-not-text", 3,
         ["validate", "--shard", "{shard}", "--benchmarks", "file://{tmp}/bench-mmlu",
          "--benchmark-columns", "question,answer"],
         ("--benchmarks", "mmlu.parquet", "column 'answer' holds int64",
          "not strings or lists of strings", "columns: question, subject, choices, answer")),
    Case("validate-benchmark-without-text", 3,
         ["validate", "--shard", "{shard}", "--benchmarks", "file://{tmp}/bench-numbers"],
         ("--benchmarks", "numbers.parquet", "no column of strings or lists of strings",
          "(columns: id, label)")),
    Case("validate-benchmark-columns-empty-name", 2,
         ["validate", "--shard", "{shard}", "--benchmarks", "file://{tmp}/bench-quiz",
          "--benchmark-columns", "question,,answer"],
         ("argument --benchmark-columns", "'question,,answer'", "an empty column name"),
         timeout=30),
    # plan makes validate's check of the benchmark files' columns before the rephrase wave
    Case("plan-benchmark-named-column-missing", 3,
         ["plan", "--run", "{run}", "--max-shard-groups", "2", "--benchmarks",
          "file://{tmp}/bench-quiz", "--benchmark-columns", "prompt"],
         ("--benchmarks", "quiz.parquet", "no column 'prompt'", "(columns: question, answer)")),
    # card and export (synthfactory/export/): before any file is read or written
    Case("card-license-not-spdx", 3,
         ["card", "--run", "{committed}", "--license", "Apache-3.0"],
         ("--license 'Apache-3.0'", "not an SPDX license id")),
    Case("export-license-not-spdx", 3,
         ["export", "--run", "{committed}", "--out", "{tmp}/export", "--license", "free"],
         ("--license 'free'", "not an SPDX license id")),
    Case("export-out-under-a-file", 3,
         ["export", "--run", "{committed}", "--out", "{a_file}/export"],
         ("a-file.txt/export", "a-file.txt is a file, not a folder")),
    Case("export-hub-repo-without-token", 3,
         ["export", "--run", "{committed}", "--out", "{tmp}/export", "--hub-repo", "team/x"],
         ("--hub-repo team/x", "no token", "HF_TOKEN")),
    # quality
    Case("quality-in-missing", 3,
         ["quality", "--in", "{tmp}/rows.parquet", "--out", "{tmp}/gated.parquet"],
         ("--in", "rows.parquet", "not found")),
    Case("quality-max-copy-above-1", 2,
         ["quality", "--in", "{tmp}/rows.parquet", "--out", "{tmp}/gated.parquet",
          "--max-copy", "2"],
         ("argument --max-copy", "must be between 0 and 1")),
    # judge: the engine and its model checked by the registry before the table is read
    Case("judge-engine-unknown", 3,
         ["judge", "--in", "{tmp}/rows.parquet", "--out", "{tmp}/judged.parquet",
          "--engine", "gpt"],
         ("--engine 'gpt'", "expected one of ('vllm', 'echo', 'endpoint')")),
    Case("judge-model-not-a-folder", 3,
         ["judge", "--in", "{tmp}/rows.parquet", "--out", "{tmp}/judged.parquet",
          "--model", "{tmp}/no-model"],
         ("--model", "no-model", "not a model folder")),
    # replay (docs/adr/0150): where to replay from, checked before any shard is read
    Case("rephrase-replay-from-nowhere", 3,
         ["rephrase", "--shard", "{shard}", "--engine", "echo", "--replay-from",
          "{tmp}/nowhere"],
         ("--replay-from", "nowhere", "neither a folder with a replay index")),
    Case("replay-index-missing", 3, ["replay", "--index", "{tmp}/empty"],
         ("--index", "empty", "no replay index there")),
    # register
    Case("register-catalog-unreachable", 1,
         ["register", "--run", "{committed}", "--table", "synth.rephrased",
          "--catalog-uri", UNREACHABLE_DB],
         ("127.0.0.1:1", "cannot reach the catalog database", "Connection refused"),
         timeout=60),
    Case("register-not-a-run", 3,
         ["register", "--run", "{tmp}/empty", "--table", "synth.rephrased",
          "--catalog-uri", "sqlite:///{tmp}/catalog.db"],
         ("empty/prompts/shards.json", "not found")),
    Case("register-table-without-namespace", 3,
         ["register", "--run", "{committed}", "--table", "rephrased",
          "--catalog-uri", "sqlite:///{tmp}/catalog.db"],
         ("--table 'rephrased'", "expected NAMESPACE.TABLE")),
    # join
    Case("join-not-a-run", 3, ["join", "--run", "{tmp}/empty"],
         ("empty/prompts/shards.json", "not found")),
    Case("join-shard-not-committed", 3, ["join", "--run", "{run}"],
         ("1 of 1 shards are not committed", "finish `synthfactory rephrase` for them first")),
    # catalog
    Case("catalog-list-unknown-namespace", 3,
         ["catalog", "list", "--namespace", "nope", "--catalog-uri", "sqlite:///{tmp}/catalog.db",
          "--warehouse", "{tmp}/warehouse"],
         ("--namespace nope", "no such namespace")),
    Case("catalog-show-unknown-table", 3,
         ["catalog", "show", "nope.table", "--catalog-uri", "sqlite:///{tmp}/catalog.db",
          "--warehouse", "{tmp}/warehouse"],
         ("nope.table", "no such table")),
    Case("catalog-list-unreachable", 1, ["catalog", "list", "--catalog-uri", UNREACHABLE_DB],
         ("127.0.0.1:1", "cannot reach the catalog database"), timeout=60),
    Case("catalog-no-action", 2, ["catalog"],
         ("the following arguments are required: action",)),
    # smoke
    Case("smoke-d-model-not-divisible-by-heads", 3,
         ["smoke", "--spec", "{spec}", "--d-model", "30", "--heads", "4"],
         ("--d-model 30", "not divisible by --heads 4")),
    Case("smoke-spec-missing", 3, ["smoke", "--spec", "{tmp}/nope.json"],
         ("nope.json", "not found")),
    Case("smoke-steps-0", 2, ["smoke", "--spec", "{spec}", "--steps", "0"],
         ("argument --steps", "must be at least 1, got 0")),
    Case("smoke-dp-rank-not-below-dp", 3,
         ["smoke", "--spec", "{spec}", "--dp", "2", "--dp-rank", "2"],
         ("--dp-rank 2", "must be below --dp 2")),
    # preview-lengths
    Case("preview-spec-missing", 3, ["preview-lengths", "--spec", "{tmp}/nope.json"],
         ("nope.json", "not found")),
    Case("preview-spec-unknown-type", 3, ["preview-lengths", "--spec", "{bad_spec}"],
         ("bad-spec.json", "unknown type 'gaussian'")),
    Case("preview-png-under-a-file", 3,
         ["preview-lengths", "--spec", "{spec}", "--samples", "200", "--steps", "2",
          "--png", "{a_file}/lengths.png"],
         ("a-file.txt/lengths.png", "cannot write", "a-file.txt is a file, not a folder")),
    Case("preview-seq-len-0", 2, ["preview-lengths", "--spec", "{spec}", "--seq-len", "0"],
         ("argument --seq-len", "must be at least 1, got 0")),
    # sweep
    Case("sweep-grid-is-a-folder", 3,
         ["sweep", "--shard", "{shard}", "--grid", "{tmp}/empty", "--out", "{tmp}/sweep",
          "--no-apply"],
         ("--grid", "empty", "is a folder")),
    Case("sweep-trial-timeout-0", 2,
         ["sweep", "--shard", "{shard}", "--grid", "{grid}", "--out", "{tmp}/sweep",
          "--no-apply", "--trial-timeout", "0"],
         ("argument --trial-timeout", "must be greater than 0")),
    Case("sweep-grid-engine-key-vllm-rejects", 3,
         ["sweep", "--shard", "{shard}", "--grid", '{{"max_num_seq": [4, 8]}}',
          "--out", "{tmp}/sweep", "--no-apply"],
         ("--grid configuration max_num_seq=4", "not a vLLM engine argument")),
    Case("sweep-grid-missing-file", 3,
         ["sweep", "--shard", "{shard}", "--grid", "{tmp}/nope.json", "--out", "{tmp}/sweep",
          "--no-apply"],
         ("--grid", "nope.json", "not found")),
]


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, str]]:
    # Not tmp_path_factory: pytest keeps only the last 3 base folders of a user, so on a
    # machine where other sessions start pytest, a folder can vanish mid-module.
    tmp = Path(tempfile.mkdtemp(prefix="synthfactory-bad-inputs-"))
    try:
        yield build_world(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_world(tmp: Path) -> dict[str, str]:
    """Every input the cases point at, built once in a fresh folder."""
    paths = {"tmp": str(tmp)}
    (tmp / "empty").mkdir()
    (tmp / "a-file.txt").write_text("a regular file, where a folder is expected\n")
    paths["a_file"] = str(tmp / "a-file.txt")

    # A prompt shard and its run (shards.json), as stitch writes them.
    run = f"file://{tmp}/run"
    shard = write_prompt_shard(run, 0, rows=6)
    entry = {"name": "shard-00000", "url": shard, "rows": 6, "tokens": 600}
    storage.write_json(f"{run}/prompts/shards.json", {"shards": [entry], "prompt_rows": 6})
    paths.update(run=run, shard=shard)
    storage.write_table(storage.read_table(shard), f"{run}/prompts/prompts.parquet")
    paths["not_a_shard"] = f"{run}/prompts/prompts.parquet"
    for key in ("tokens", "rows", "url"):
        other = f"file://{tmp}/plan-no-{key}"
        without = {k: v for k, v in entry.items() if k != key}
        storage.write_json(f"{other}/prompts/shards.json", {"shards": [without]})
        paths[f"plan_no_{key}"] = other
    storage.write_bytes(f"file://{tmp}/plan-not-json/prompts/shards.json", b'{"shards": [')
    paths["plan_not_json"] = f"file://{tmp}/plan-not-json"

    # Benchmark folders: a quiz as GSM8K comes (question, answer), one as MMLU comes
    # (an int answer), one with no text at all, one file that is not Parquet.
    (tmp / "bench-quiz").mkdir()
    pq.write_table(pa.table({"question": ["What is 2+2?"], "answer": ["4"]}),
                   tmp / "bench-quiz" / "quiz.parquet")
    (tmp / "bench-mmlu").mkdir()
    pq.write_table(pa.table({"question": ["Which is even?"], "subject": ["arithmetic"],
                             "choices": [["1", "2"]], "answer": [1]}),
                   tmp / "bench-mmlu" / "mmlu.parquet")
    (tmp / "bench-numbers").mkdir()
    pq.write_table(pa.table({"id": [1], "label": [0]}), tmp / "bench-numbers" / "numbers.parquet")
    (tmp / "bench-broken").mkdir()
    (tmp / "bench-broken" / "broken.parquet").write_bytes(b"PAR1 not a parquet file")

    # A committed, validated run (the real worker, with the echo engine for the model).
    committed = f"file://{tmp}/committed"
    done = write_prompt_shard(committed, 0, rows=4)
    storage.write_json(f"{committed}/prompts/shards.json", {
        "shards": [{"name": "shard-00000", "url": done, "rows": 4, "tokens": 400}],
        "prompt_rows": 4})
    rephrase_shard(done, None, lambda: EchoEngine(), WorkerOptions(model="echo"))
    validate_shard(done, committed, 0.5)
    join_run(committed)
    paths["committed"] = committed

    # A model folder whose tuned engine file holds a key vLLM does not know.
    tuned = tmp / "tuned-model"
    tuned.mkdir()
    (tuned / "synthfactory-engine.json").write_text(json.dumps({"engine_args": {"max_batch": 8}}))
    paths["tuned_model"] = str(tuned)

    # Seed documents whose id column is a list: Spark's reader fails with pyarrow's error.
    (tmp / "corpus").mkdir()
    pq.write_table(pa.table({"id": pa.array([[1, 2], [3]]), "text": ["a document", "another"]}),
                   tmp / "corpus" / "part-00000.parquet")
    (tmp / "manifest").mkdir()
    pq.write_table(pa.table({"key": [f"file://{tmp}/corpus/part-00000.parquet"]}),
                   tmp / "manifest" / "part-00000.parquet")
    paths["manifest"] = str(tmp / "manifest")
    paths["model"] = _word_level_model(tmp / "model")

    # A templates folder whose routing table names a template the folder lacks.
    routing = tmp / "routing_folder"
    routing.mkdir()
    (routing / "plain.json").write_text(json.dumps(
        {"id": "plain", "version": 1, "style": "plain", "system": "s",
         "user": "Rewrite: {document}"}))
    (routing / "routing.json").write_text(json.dumps(
        {"buckets": {"names": ["all"], "edges": [], "unscored": "all"},
         "routes": {"web": {"*": ["plain"]}, "code": {"*": ["plain"]},
                    "math": {"*": ["nope"]}}}))
    paths["routing_folder"] = f"file://{routing}"

    paths["spec"] = str(ROOT / "examples" / "lengths" / "bimodal.json")
    (tmp / "bad-spec.json").write_text(json.dumps({"type": "gaussian", "mean": 100}))
    paths["bad_spec"] = str(tmp / "bad-spec.json")
    (tmp / "grid.json").write_text(json.dumps({"max_num_seqs": [4]}))
    paths["grid"] = str(tmp / "grid.json")
    return paths


def _word_level_model(folder: Path) -> str:
    """A model folder holding only a tiny real tokenizer.json (stitch counts tokens)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    folder.mkdir()
    (folder / "tokenizer.json").write_text(tokenizer.to_str())
    return str(folder)


def run_cli(argv: list[str], cwd: str, env: dict[str, str] | None = None,
            timeout: float = DEFAULT_TIMEOUT) -> tuple[int | None, str, float]:
    """(exit code or None on timeout, stderr, seconds) of the real console script."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("SYNTHFACTORY_", "AWS_", "PYICEBERG_"))}
    clean |= {"SYNTHFACTORY_HOME": cwd, **(env or {})}
    started = time.monotonic()
    # its own session, so a hung case is killed with everything it started (Spark's JVM)
    child = subprocess.Popen([str(SCRIPT), *argv], cwd=cwd, env=clean, text=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        _, stderr = child.communicate()
        return None, stderr, time.monotonic() - started
    return child.returncode, stderr, time.monotonic() - started


def last_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.id, marks=c.marks) for c in CASES])
def test_bad_input_is_one_line_naming_it(case: Case, world: dict[str, str]):
    argv = [arg.format(**world) for arg in case.argv]
    code, stderr, seconds = run_cli(argv, world["tmp"], case.env, case.timeout)
    name = case.argv[0]
    assert code is not None, f"hung: no exit within {case.timeout}s ({seconds:.0f}s)"
    assert code == case.code, f"exit {code}, not {case.code}; stderr:\n{stderr[-2000:]}"
    assert "Traceback" not in stderr, stderr[-4000:]
    line = last_line(stderr)
    assert line.startswith(f"synthfactory {name}: error: "), stderr[-2000:]
    missing = [e for e in case.expect if e not in line]
    assert not missing, f"{missing} not in the last line: {line}"
    # Every case here is a known bad input: a specific message, not the catch-all's.
    assert "rerun with --debug for the traceback" not in line, line


DOC = ROOT / "docs" / "bad-inputs.md"
# a row of its table: | N | case id | `command` | exit C: `the last line` |
DOC_ROW = re.compile(r"^\| (\d+) \| ([a-z0-9-]+) \| .* \| exit (\d+): ")


def documented_cases(text: str) -> list[tuple[int, str, int]]:
    """(row number, case id, exit code) of each row of docs/bad-inputs.md's table."""
    rows = [line for line in text.splitlines() if re.match(r"\| \d+ \|", line)]
    parsed = [DOC_ROW.match(line) for line in rows]
    unread = [line for line, match in zip(rows, parsed, strict=True) if not match]
    assert not unread, f"rows of docs/bad-inputs.md not in the table's shape: {unread}"
    return [(int(m[1]), m[2], int(m[3])) for m in parsed]


def differences(rows: list[tuple[int, str, int]], cases: list[Case]) -> list[str]:
    """What differs between the doc's rows and the cases: each a line, none when equal."""
    documented = {case_id: code for _, case_id, code in rows}
    tested = {case.id: case.code for case in cases}
    found = []
    if [n for n, _, _ in rows] != list(range(1, len(rows) + 1)):
        found.append("rows not numbered 1..N")
    if len(documented) != len(rows) or len(tested) != len(cases):
        found.append("a case id used twice")
    found += [f"{i}: in docs/bad-inputs.md, not tested" for i in documented if i not in tested]
    found += [f"{i}: tested, not in docs/bad-inputs.md" for i in tested if i not in documented]
    found += [f"{i}: exit {documented[i]} in docs/bad-inputs.md, {code} in the test"
              for i, code in tested.items() if i in documented and documented[i] != code]
    return found


def test_the_docs_table_is_the_cases_with_their_exit_codes():
    assert differences(documented_cases(DOC.read_text()), CASES) == []


def test_the_table_check_sees_a_changed_code_and_a_missing_row():
    rows = documented_cases(DOC.read_text())
    changed = [(n, i, 1 if i == "plan-no-shards-json" else code) for n, i, code in rows]
    assert differences(changed, CASES) == [
        "plan-no-shards-json: exit 1 in docs/bad-inputs.md, 3 in the test"]
    assert differences(rows[:-1], CASES) == [f"{rows[-1][1]}: tested, not in docs/bad-inputs.md"]


def test_matrix_covers_every_subcommand():
    covered = {case.argv[0] for case in CASES}
    assert set(cli.COMMANDS) - covered <= {"audit", "report"}  # others' issue-12 items
    assert len(CASES) >= 30


# The catch-all: an exception nobody turned into ours is still one line, with a hint.

class _Boom(RuntimeError):
    pass


@pytest.fixture
def exploding_plan(monkeypatch):
    import synthfactory.plan as plan

    def run(args):
        raise _Boom("the disk\nis on fire")

    monkeypatch.setattr(plan, "run", run)


def test_unexpected_error_is_one_line_with_a_hint(exploding_plan, capsys, monkeypatch):
    monkeypatch.setenv("SYNTHFACTORY_DEBUG", "0")  # restored after: main() may set it
    code = cli.main(["plan", "--run", "file:///nowhere", "--max-shard-groups", "1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert last_line(err) == ("synthfactory plan: error: _Boom: the disk is on fire "
                              "(rerun with --debug for the traceback)")


@pytest.mark.parametrize("where", ["first", "last", "env"])
def test_debug_shows_the_traceback(exploding_plan, capsys, monkeypatch, where):
    monkeypatch.setenv("SYNTHFACTORY_DEBUG", "0")  # restored after: main() may set it
    argv = ["plan", "--run", "file:///nowhere", "--max-shard-groups", "1"]
    if where == "env":
        monkeypatch.setenv("SYNTHFACTORY_DEBUG", "1")
    else:
        argv = ["--debug", *argv] if where == "first" else [*argv, "--debug"]
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback (most recent call last)" in err and "_Boom: the disk" in err
    assert last_line(err) == "synthfactory plan: error: _Boom: the disk is on fire"


def test_debug_after_double_dash_is_passed_on():
    argv, debug = cli.split_debug(["plan", "--run", "x", "--", "--debug"])
    assert (argv, debug) == (["plan", "--run", "x", "--", "--debug"], False)


def test_interrupt_exits_130(monkeypatch, capsys):
    import synthfactory.plan as plan

    def run(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(plan, "run", run)
    assert cli.main(["plan", "--run", "file:///nowhere", "--max-shard-groups", "1"]) == 130
    assert last_line(capsys.readouterr().err) == "synthfactory plan: interrupted"


def test_a_full_scratch_disk_anywhere_is_one_line_naming_it_not_retried(monkeypatch, capsys,
                                                                          tmp_path):
    """A library's write into a full scratch folder (the export's temp files, a cache):
    ENOSPC that storage.py did not see still ends in one line that names the file and the
    bytes free where it was going, exit 3 (a full disk stays full until someone acts),
    not the catch-all's retryable exit 1. Any other OSError stays the catch-all's."""
    import errno

    import synthfactory.plan as plan

    target = tmp_path / "scratch" / "datasets-cache.arrow"
    raised = [OSError(errno.ENOSPC, "No space left on device", str(target))]

    def run(args):
        raise raised[0]

    monkeypatch.setattr(plan, "run", run)
    monkeypatch.setenv("SYNTHFACTORY_DEBUG", "0")
    argv = ["plan", "--run", "file:///nowhere", "--max-shard-groups", "1"]
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = last_line(err)
    assert line.startswith(f"synthfactory plan: error: {target}: cannot write (no space "
                           "left on the disk: "), line
    assert line.endswith(f" bytes are free in {tmp_path})"), line  # the folder that exists
    raised[0] = OSError(errno.EACCES, "Permission denied", str(target))
    assert cli.main(argv) == 1


def test_bad_option_is_still_argparse_usage(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["plan", "--run", "x", "--max-shard-groups", "zero"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith("usage: synthfactory plan")
    assert last_line(err) == ("synthfactory plan: error: argument --max-shard-groups: "
                              "'zero' is not an integer")
