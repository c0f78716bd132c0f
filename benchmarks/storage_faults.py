"""Benchmark: every step's console script meets every fault of the wire and the disk
(issue 50), then the run is audited: nothing lost, nothing duplicated.

One moto server (the real S3 protocol, in this process) behind ``WireFaults``
(tests/support/wire_faults.py), which every S3 client of the steps talks to: pyarrow's
C++ client, boto3, Spark's Python workers, pyiceberg. For each fault kind a fresh day is
run through the whole chain, crawl to export, each step under the fault for its whole
life:

- ``none``: no fault (the baseline of the slow-storage ratios);
- ``slowdown``: 10% of requests answered 503 SlowDown or 500, sustained;
- ``reset_request``: one request in 7 reset after part of its body went up;
- ``reset_response``: one request in 7 reset after the server answered, part of the
  answer's body sent (a PUT's empty answer lost whole);
- ``latency``: 200 ms added to every request, as S3 across regions;
- ``disk_full``: the run's ``file://`` root on a small tmpfs, filled before each step but
  for a few KiB; the step must fail at once, in one line, exit 3, nothing half-written;
  then the space is freed and the step run again.

A step that fails is run again without the fault ("a rerun completes"); its line says
``failed_clean`` when it failed as a user needs it to (one ``error:`` line, no
traceback, an exit code of 1 or 3, no temp file and no unfinished multipart upload
left), ``failed_dirty`` otherwise. After the chain a clean audit gives ``lost`` and
``duplicated`` for every line of the kind.

    .venv-worker/bin/python benchmarks/storage_faults.py [--docs 24] [--write-doc]

One line a trial: ``RESULT storage_fault kind=K step=S outcome=completed|failed_clean
retries=N lost=L duplicated=D isa=I`` (``retries``: the requests the fault met in that
step, each one the client had to repeat; I: the CPU's vector extensions), then one a step
for slow storage: ``RESULT storage_latency step=S rows_per_s=R baseline_rows_per_s=B
ratio=R/B isa=I``, the
step's rows over its process's wall time, 200 ms against 0 ms. ``--write-doc`` writes
docs/storage-faults.md from these lines.

Rephrase runs the echo engine with ``--echo-delay-s`` per poll standing in for a
model's decoding time: what matters is whether its storage work stalls the engine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests.support

from machine import print_machine, result_line  # noqa: E402

from tests.support.ports import free_port  # noqa: E402
from tests.support.wire_faults import WireFaults  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "storage-faults.md"
DAY = dt.date(2026, 1, 1)  # any day: the corpus is made for it
STEPS = ("crawl", "stitch", "rephrase", "validate", "join", "register", "audit", "card",
         "export")
WIRE = {
    "none": {},
    "slowdown": {"slowdown_rate": 0.1, "server_errors": True},
    "reset_request": {"reset": "request", "reset_rate": 0.2, "methods": ("PUT",)},
    "reset_response": {"reset": "response", "reset_rate": 0.15},
    "latency": {"delay_s": 0.2},
}
KINDS = (*WIRE, "disk_full")
S3_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
          "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
STEP_TIMEOUT = 900
ECHO_DELAY_S = "0.05"
LEFT_FREE = 8 << 10  # bytes a full disk leaves free before each step


def _argv(step: str, run: str, root: str, day_corpus: str, shards: list[str]) -> list[str]:
    """The step's command line, as the DAG's steps build it (a small day)."""
    start = dt.datetime.combine(DAY, dt.time(), dt.UTC)
    catalog = ["--catalog-uri", f"sqlite:///{root}/catalog.db", "--warehouse",
               f"{run.rsplit('/', 1)[0]}/warehouse"]
    each_shard = [a for s in shards for a in ("--shard", s)]
    return {
        "crawl": ["crawl", "--source", day_corpus, "--out", f"{run}/manifest",
                  "--interval-start", start.isoformat(),
                  "--interval-end", (start + dt.timedelta(days=1)).isoformat(),
                  "--partition-template", "dt={ds}"],
        "stitch": ["stitch", "--manifest", f"{run}/manifest", "--run", run,
                   "--templates", "encyclopedic,qa", "--styles-per-doc", "1",
                   "--shard-tokens", "2048", "--max-new-tokens", "16",
                   "--max-model-len", "1024", "--model", _model(), "--master", "local[2]",
                   "--partitions", "2"],
        "rephrase": ["rephrase", *each_shard, "--engine", "echo", "--echo-delay-s",
                     ECHO_DELAY_S, "--model", "echo", "--checkpoint-rows", "4"],
        "validate": ["validate", *each_shard],
        "join": ["join", "--run", run],
        "register": ["register", "--run", run, "--table", "synthetic.rephrased", *catalog],
        "audit": ["audit", "--run", run, "--table", "synthetic.rephrased", *catalog],
        "card": ["card", "--run", run],
        "export": ["export", "--run", run, "--out", f"{run}/export"],
    }[step]


def _model() -> str:
    from synthfactory.model import default_model_dir

    return str(default_model_dir())


class Step:
    """One run of a step's console script: its exit code, last stderr line, wall time
    and result file."""

    def __init__(self, argv: list[str], env: dict[str, str], tmp: Path):
        result = tmp / f"result-{uuid.uuid4().hex}.json"
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "synthfactory.cli", *argv],
                              env={**env, "SYNTHFACTORY_RESULT_FILE": str(result)},
                              capture_output=True, text=True, timeout=STEP_TIMEOUT)
        self.seconds = time.perf_counter() - started
        self.code = proc.returncode
        self.stderr = proc.stderr
        lines = proc.stderr.strip().splitlines()
        self.last = lines[-1] if lines else ""
        self.result = json.loads(result.read_text()) if result.exists() else {}


def _clean_failure(step: Step, name: str, leftovers: list[str], kind: str) -> bool:
    """One ``error:`` line, no traceback, nothing half-written; a full disk names what
    it needs and is not retried (exit 3), a wire fault may be (exit 1)."""
    codes = (3,) if kind == "disk_full" else (1, 3)
    named = "no space left on the disk" in step.last if kind == "disk_full" else True
    return (step.code in codes and named and "Traceback" not in step.stderr
            and step.last.startswith(f"synthfactory {name}: error:") and not leftovers)


def _uploads(client, bucket: str) -> list[str]:
    return [u["Key"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


def _tmp_files(folder: str) -> list[str]:
    return [str(p) for p in Path(folder).rglob(".*.tmp")] if os.path.isdir(folder) else []


def _fill(disk: Path) -> None:
    """Fill the tmpfs but for LEFT_FREE bytes."""
    stat = os.statvfs(disk)
    free = stat.f_bavail * stat.f_frsize
    with open(disk / "filler", "ab") as out:
        out.write(b"\0" * max(0, free - LEFT_FREE))


def chain(kind: str, server, endpoint: str, tmp: Path, docs: int) -> list[dict]:
    """A fresh day through every step under ``kind``; one record a step."""
    import boto3

    bucket = f"faults-{kind.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    clean_env = {**os.environ, **S3_ENV, "AWS_ENDPOINT_URL": endpoint}
    root = tmp / kind
    root.mkdir()
    disk = root / "disk"
    if kind == "disk_full":
        disk.mkdir()
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)],
                                 capture_output=True, text=True)
        if mounted.returncode:
            sys.exit(f"disk_full needs the right to mount a tmpfs: {mounted.stderr.strip()}")
        top = f"file://{disk}"
    else:
        top = f"s3://{bucket}"
    corpus, run = f"{top}/corpus", f"{top}/data/synthetic_rephrase/{DAY}"
    made = Step(["corpus", "--out", corpus, "--days", "1", "--docs-per-day", str(docs),
                 "--end-date", DAY.isoformat(), "--max-chars", "900"], clean_env, root)
    assert made.code == 0, made.stderr[-2000:]
    records, shards = [], []
    try:
        for name in STEPS:
            argv = _argv(name, run, str(root), corpus, shards)
            record = {"kind": kind, "step": name}
            if kind == "disk_full":
                _fill(disk)
                step = Step(argv, clean_env, root)
                leftovers = _tmp_files(str(disk))
                record["retries"] = 0
                (disk / "filler").unlink()
            else:
                # a seed of the trial's own: one shared seed gave every step the same
                # first draws, and a step of few requests met no fault at all
                seed = zlib.crc32(f"{kind}/{name}".encode())
                with WireFaults(server.port, seed=seed, **WIRE[kind]) as proxy:
                    step = Step(argv, {**clean_env, "AWS_ENDPOINT_URL": proxy.endpoint}, root)
                record["retries"] = proxy.throttled + proxy.resets
                leftovers = _uploads(client, bucket)
            record.update(seconds=step.seconds, code=step.code, line=step.last,
                          # what the step itself counted and showed (ADR 0155)
                          counted=sum((step.result or {}).get("storage_retries", {}).values()))
            if step.code == 0:
                record["outcome"] = "completed"
            else:
                record["outcome"] = ("failed_clean" if _clean_failure(step, name, leftovers, kind)
                                     else "failed_dirty")
                record["leftovers"] = leftovers
                step = Step(argv, clean_env, root)  # the rerun, the fault gone
                assert step.code == 0, f"{kind} {name} rerun failed:\n{step.stderr[-3000:]}"
            record["rows"] = _rows(name, step.result, docs)
            if name == "stitch":
                shards = [s["url"] for s in _read_json(f"{run}/prompts/shards.json",
                                                       clean_env)["shards"]]
            records.append(record)
        audit = Step(_argv("audit", run, str(root), corpus, shards), clean_env, root)
        assert audit.code == 0, audit.stderr[-3000:]
        for record in records:
            record.update(lost=audit.result["lost"], duplicated=audit.result["duplicated"])
    finally:
        if kind == "disk_full":
            subprocess.run(["umount", "-l", str(disk)], check=False)
    return records


def _rows(step: str, result: dict, docs: int) -> int:
    """The rows a step handled: the day's documents for all but rephrase and the steps
    after stitch, whose unit is a prompt row (a document a template)."""
    return result.get("prompt_rows") or result.get("rows_in") or docs


def _read_json(url: str, env: dict) -> dict:
    code = ("import json, sys; from synthfactory import storage; "
            "print(json.dumps(storage.read_json(sys.argv[1])))")
    out = subprocess.run([sys.executable, "-c", code, url], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def _doc(records: list[dict], ratios: list[tuple[str, float, float]], header: str) -> str:
    by = {(r["kind"], r["step"]): r for r in records}
    cell = {"completed": "completed", "failed_clean": "failed clean, rerun completed",
            "failed_dirty": "**failed dirty**"}
    lines = ["# Storage and wire faults: every step, every fault", "",
             "Written by `benchmarks/storage_faults.py --write-doc` from its own trials; do "
             "not edit by hand. Each cell: the step's outcome under the fault (a rerun "
             "without it follows a failure), the requests the fault met (each one the "
             "client repeated) and the retries the step counted itself in its summary's "
             "`storage_retries` (a floor: pyarrow's retries inside its C++ client are not "
             "seen, docs/adr/0155). Every kind's chain ends with a clean audit: the lost and "
             "duplicated rows of the whole day.", "", header, "",
             "| step | " + " | ".join(k for k in KINDS if k != "none") + " |",
             "|---|" + "---|" * (len(KINDS) - 1)]
    for step in STEPS:
        cells = []
        for kind in KINDS:
            if kind == "none":
                continue
            r = by[(kind, step)]
            faults = (f", {r['retries']} faulted, {r['counted']} counted"
                      if kind not in ("disk_full", "latency") else "")
            cells.append(f"{cell[r['outcome']]}{faults}")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    lines += ["", "| kind | lost | duplicated |", "|---|---|---|"]
    for kind in KINDS:
        r = by[(kind, STEPS[0])]
        lines.append(f"| {kind} | {r['lost']} | {r['duplicated']} |")
    lines += ["", "Disk full, each step's one line (the path, the bytes it needs, the bytes "
              "free):", ""]
    for step in STEPS:
        r = by[("disk_full", step)]
        lines.append(f"- {step}: " + (f"`{r['line']}` (exit {r['code']})" if r["code"]
                                      else "completed (its writes fit in what was left)"))
    lines += ["", "Slow storage: each step's rows a second (its process's wall time) with "
              "200 ms added to every request, against none:", "",
              "| step | rows/s at 0 ms | rows/s at 200 ms | ratio |", "|---|---|---|---|"]
    for step, base, slow in ratios:
        lines.append(f"| {step} | {base:.2f} | {slow:.2f} | {slow / base:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--write-doc", action="store_true")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    from moto.server import ThreadedMotoServer

    from synthfactory.hardware import load_line

    os.environ.update(S3_ENV)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's one line a request
    with tempfile.TemporaryDirectory(prefix="storage-faults-") as tmp:
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
        server.start()
        server.port = server._port
        endpoint = f"http://127.0.0.1:{server.port}"
        print_machine()
        before = load_line()
        records = []
        try:
            for kind in kinds:
                records += chain(kind, server, endpoint, Path(tmp), args.docs)
        finally:
            server.stop()
        print_machine()
        after = load_line()
    ratios = []
    if {"none", "latency"} <= set(kinds):
        by = {(r["kind"], r["step"]): r for r in records}
        for step in STEPS:
            base, slow = by[("none", step)], by[("latency", step)]
            ratios.append((step, base["rows"] / base["seconds"], slow["rows"] / slow["seconds"]))
    if args.write_doc and set(kinds) == set(KINDS):
        header = (f"Measured with `{' '.join(sys.argv)}` ({args.docs} documents a day; "
                  f"{before} before, {after} after).")
        DOC.write_text(_doc(records, ratios, header))
        print(f"wrote {DOC.relative_to(REPO)}")
    for r in records:  # the RESULT lines last: scripts read them
        if r["outcome"] != "completed":
            print(f"# {r['kind']} {r['step']}: exit {r['code']}: {r['line']}")
        print(result_line("storage_fault", kind=r["kind"], step=r["step"],
                          outcome=r["outcome"], retries=r["retries"], lost=r["lost"],
                          duplicated=r["duplicated"]))
    for step, base_rate, slow_rate in ratios:
        print(result_line("storage_latency", step=step, rows_per_s=f"{slow_rate:.2f}",
                          baseline_rows_per_s=f"{base_rate:.2f}",
                          ratio=f"{slow_rate / base_rate:.2f}"))

if __name__ == "__main__":
    main()
