"""The endpoint engine against the offline engine, on the same model and prompts.

One vLLM OpenAI-compatible server (``python -m vllm.entrypoints.openai.api_server`` from
.venv-worker) serves the embedded model with the offline engine's CPU defaults (its dtype:
float32 without native bfloat16, max_model_len 2048, eager, seed 0). Then, in alternating
sittings (offline, endpoint, offline, endpoint, ...), ``synthfactory rephrase`` rephrases
the same shard into a fresh run folder with ``--engine vllm`` and with ``--engine
endpoint``; each sitting's figure is its own summary's output tokens / generation seconds
(model load and server start not counted, on either side). Every sitting's parts are read
back: each prompt row exactly once, or the sitting counts as lost / duplicated.

Prompts: the Python standard library's docstrings under the ``encyclopedic`` template
(what ``make demo`` rephrases), 128 new tokens at most per row, greedy. Run it alone
(2 cores: the server and the client share them), and give ``uptime``'s load with it.

    .venv-worker/bin/python benchmarks/endpoint.py [--prompts 32] [--sittings 3]

Last line: ``RESULT endpoint prompts=N offline_tokens_per_s=X endpoint_tokens_per_s=Y
ratio=Y/X lost=0 duplicated=0 isa=I`` (medians over the sittings; I: the CPU's vector
extensions, benchmarks/machine.py). ``machine: isa=I load ...`` lines (uptime's load)
come before and after the sittings.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import print_machine, result_line  # noqa: E402  (this folder is on sys.path)

from synthfactory import storage  # noqa: E402
from synthfactory.corpus import iter_docstrings  # noqa: E402
from synthfactory.model import default_model_dir  # noqa: E402
from synthfactory.stitch.prompt_table import prompt_table  # noqa: E402
from synthfactory.stitch.templates import load_template  # noqa: E402
from tests.support.openai_server import VllmServer  # noqa: E402

BUDGET = 128  # max new tokens per row, the sweep's default


def write_shard(run: Path, rows: int) -> str:
    template = load_template("encyclopedic")
    docs = iter_docstrings(Path(sysconfig.get_paths()["stdlib"]), 400, 1200, per_module=1)
    texts = [doc for _, (_, doc) in zip(range(rows), docs, strict=False)]
    table = prompt_table(template, [f"doc-{i:04d}" for i in range(len(texts))], texts,
                         BUDGET, prompt_tokens=[len(t) // 4 for t in texts])
    url = f"file://{run}/prompts/shard-00000.parquet"
    storage.write_table(table, url)
    return url


def sitting(engine: str, rows: int, tmp: Path, index: int, options: list[str]) -> dict:
    """One rephrase with ``--engine engine`` and that engine's own ``options``."""
    run = tmp / f"{engine}-{index}"
    shard = write_shard(run, rows)
    result = run / "summary.json"
    argv = [sys.executable, "-m", "synthfactory.cli", "rephrase", "--shard", shard,
            "--model", str(default_model_dir()), "--temperature", "0",
            "--checkpoint-rows", "8", "--engine", engine, *options]
    env = {**os.environ, "SYNTHFACTORY_RESULT_FILE": str(result)}
    proc = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{engine} sitting {index} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = json.loads(result.read_text())
    keys = Counter()
    for folder in ("generated/shard-00000", "quarantine/rephrase/shard-00000"):
        for url in storage.list_files(f"file://{run}/{folder}", suffix=".parquet"):
            keys.update(storage.read_table(url, columns=["id"]).column("id").to_pylist())
    figure = summary["output_tokens"] / summary["generation_s"]
    print(f"sitting {index} {engine:8s} {figure:7.1f} tokens/s "
          f"({summary['output_tokens']} tokens in {summary['generation_s']:.1f} s)", flush=True)
    return {"tokens_per_s": figure,
            "lost": sum(1 for i in range(rows) if keys[f"doc-{i:04d}"] == 0),
            "duplicated": sum(n - 1 for n in keys.values() if n > 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--sittings", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="endpoint-bench-") as name:
        tmp = Path(name)
        print_machine()
        server = VllmServer(tmp / "server.log", max_model_len=2048).start()
        try:
            runs: dict[str, list[dict]] = {"vllm": [], "endpoint": []}
            for index in range(args.sittings):
                # each engine with its own options: no branch on its name
                for engine, options in (("vllm", []), ("endpoint", ["--endpoint", server.url])):
                    runs[engine].append(sitting(engine, args.prompts, tmp, index, options))
        finally:
            server.stop()
        print_machine()
    offline = statistics.median(r["tokens_per_s"] for r in runs["vllm"])
    endpoint = statistics.median(r["tokens_per_s"] for r in runs["endpoint"])
    lost = sum(r["lost"] for rs in runs.values() for r in rs)
    duplicated = sum(r["duplicated"] for rs in runs.values() for r in rs)
    print(result_line("endpoint", prompts=args.prompts, offline_tokens_per_s=f"{offline:.1f}",
                      endpoint_tokens_per_s=f"{endpoint:.1f}",
                      ratio=f"{endpoint / offline:.2f}", lost=lost, duplicated=duplicated))


if __name__ == "__main__":
    main()
