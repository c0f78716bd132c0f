"""What the rephrase step's Prometheus metrics cost (synthfactory/metrics.py): the
worker's own CPU time per generated row with metrics on against off.

A throughput ratio cannot resolve 2% on two busy cores; CPU time of this process can.
The same shard (the echo engine: no model, so the worker's loop is all there is to
measure) is rephrased in-process, alternating off and on, ``--rounds`` times each; each
run's ``time.process_time()`` is taken and the medians compared. Metrics "on" is what a
task with a Pushgateway has (a registry updated per row); the pushes themselves run in
their own thread every 15 s, not per row, and go nowhere here.

    .venv-worker/bin/python benchmarks/metrics_overhead.py [--rows 40000] [--rounds 9]

Last line: ``RESULT metrics_overhead us_per_row=X rows=N isa=...``: X = (median CPU
seconds on - median off) / N, in microseconds; it can come out negative (noise) or
above the target (200 us).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import print_machine, result_line  # noqa: E402

from synthfactory import storage  # noqa: E402
from synthfactory.metrics import RephraseMetrics, step_labels  # noqa: E402
from synthfactory.rephrase.engines import EchoEngine  # noqa: E402
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard  # noqa: E402
from synthfactory.stitch.prompt_table import prompt_table  # noqa: E402
from synthfactory.stitch.templates import load_template  # noqa: E402


def write_shard(run_url: str, rows: int) -> str:
    url = storage.join(run_url, "prompts", "shard-00000.parquet")
    texts = [f"document {i}: alpha beta gamma delta epsilon zeta eta theta" for i in range(rows)]
    storage.write_table(prompt_table(load_template("summary"),
                                     [f"doc-{i:06d}" for i in range(rows)], texts, 32), url)
    return url


def one_run(tmp: Path, index: int, rows: int, metrics: bool) -> float:
    run_url = storage.normalize(str(tmp / f"run-{index}"))
    shard = write_shard(run_url, rows)
    options = WorkerOptions(model="echo", checkpoint_rows=512, max_in_flight=256)
    if metrics:
        options = dataclasses.replace(options, metrics=RephraseMetrics(step_labels("echo")))
    started = time.process_time()
    rephrase_shard(shard, run_url, EchoEngine, options)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=40000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    print_machine()
    figures: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="metrics-overhead-") as tmp:
        one_run(Path(tmp), -1, args.rows, metrics=False)  # warm-up, not counted
        for round_ in range(args.rounds):
            for on in (False, True):
                seconds = one_run(Path(tmp), 2 * round_ + on, args.rows, metrics=on)
                figures[on].append(seconds)
                print(f"round {round_ + 1} metrics {'on ' if on else 'off'}: "
                      f"{seconds:.3f} s CPU", flush=True)
    off, on = statistics.median(figures[False]), statistics.median(figures[True])
    print(f"median CPU seconds: off {off:.3f}, on {on:.3f} ({args.rows} rows)")
    print_machine()
    print(result_line("metrics_overhead", us_per_row=f"{(on - off) / args.rows * 1e6:.1f}",
                      rows=args.rows))


if __name__ == "__main__":
    main()
