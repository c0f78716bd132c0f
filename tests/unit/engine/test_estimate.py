"""``synthfactory estimate`` against plans worked by hand, its measured inputs (a run's
report, a sweep's winner) and its one-line refusals of bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from synthfactory import cli, storage
from synthfactory.contract import paths
from synthfactory.sweep.results import SweepFolder

# The hand-worked plan: 1e9 output tokens at 500 tokens/s per GPU, 8 GPUs, $2 a
# GPU-hour, 60 s of engine start-up per task, 20-minute shards, 24-hour daily runs.
PLAN = ["--tokens", "1e9", "--tokens-per-s-per-gpu", "500", "--gpus", "8",
        "--gpu-hour-usd", "2", "--startup-s", "60"]


def _estimate(capsys, *argv: str) -> tuple[dict, str]:
    """(the JSON summary, everything printed before it)."""
    assert cli.main(["estimate", *argv]) == 0
    *table, last = capsys.readouterr().out.strip().splitlines()
    return json.loads(last), "\n".join(table)


def test_a_plan_worked_by_hand(capsys):
    plan, _ = _estimate(capsys, *PLAN, "--json")
    # generating: 1e9 / 500 = 2,000,000 GPU-seconds = 555.556 GPU-hours
    assert plan["generating_gpu_hours"] == 555.556
    # a shard is 20 min of one GPU: 500 x 1,200 s = 600,000 output tokens;
    # 1e9 / 600,000 = 1,666.7 -> 1,667 shards
    assert plan["shard_output_tokens"] == 600_000 and plan["shards"] == 1667
    # a group must end within the day: (86,400 - 60) / 1,200 = 71.95 -> 71 shards;
    # a run keeps 8 GPUs busy: 8 x 71 = 568 shards a run; 1,667 / 568 = 2.93 -> 3 runs
    assert plan["shards_per_group_max"] == 71 and plan["runs"] == 3
    # runs of 556, 556 and 555 shards, each cut into 8 groups (plan.py's grouping) = 24
    assert plan["max_shard_groups"] == 8 and plan["shard_groups"] == 24
    # start-up: 24 tasks x 60 s = 1,440 s = 0.4 GPU-hours; 555.556 + 0.4 = 555.956
    assert plan["startup_gpu_hours"] == 0.4 and plan["gpu_hours"] == 555.956
    # dollars: 555.9556 x $2 = $1,111.91
    assert plan["usd"] == 1111.91
    # wall-clock: 556 shards in 8 groups is at most 70 a group (556 / 8 = 69.5), so a run
    # takes 60 + 70 x 1,200 = 84,060 s; 3 runs back to back = 252,180 s = 70.05 h
    assert plan["wall_clock_hours"] == 70.05
    # crawl: one partition a daily run, each under 1,000 files: 3 list requests
    assert plan["partitions"] == 3 and plan["crawl_list_requests"] == 3
    # stitch: sources as long as their rephrasings, 1e9 tokens / 265,000 per core-second
    # = 3,773.6 core-seconds = 1.048 core-hours
    assert plan["stitch_core_hours"] == 1.048
    assert plan["warnings"] == []


def test_the_table_says_each_figure_and_where_it_comes_from(capsys):
    plan, table = _estimate(capsys, *PLAN)
    lines = {line.split("  ")[1].strip(): line for line in table.splitlines()[1:]}
    assert "555.956" not in table and "556.0" in lines["GPU-hours"]  # one decimal
    assert "generating 555.6 + start-up 0.4" in lines["GPU-hours"]
    assert "$1,111.91" in lines["cost"] and "$2.00 per GPU-hour" in lines["cost"]
    assert "70.0 h" in lines["wall-clock"] and "3 runs back to back" in lines["wall-clock"]
    assert "1,667" in lines["shards"] and "24" in lines["shard groups"]
    assert "--startup-s" in lines["engine start-up per task"]
    assert "measured, docs/stitch.md" in lines["stitch core-hours"]
    assert plan["runs"] == 3  # and the JSON summary still ends the output


def test_documents_styles_and_lengths_give_the_tokens_and_size_stitch(capsys):
    # 1,000,000 documents x 2 styles x 500 tokens = 1e9 output tokens, as above;
    # stitch reads 1,000,000 x 600 = 6e8 source tokens: 6e8 / 265,000 / 3,600 = 0.629
    plan, _ = _estimate(capsys, "--docs", "1e6", "--styles-per-doc", "2",
                        "--tokens-per-output", "500", "--tokens-per-doc", "600",
                        "--tokens-per-s-per-gpu", "500", "--gpus", "8", "--json")
    assert plan["tokens"] == 1_000_000_000 and plan["docs"] == 1_000_000
    assert plan["stitch_source_tokens"] == 600_000_000 and plan["stitch_core_hours"] == 0.629
    # a measured stitch rate of one's own replaces the project's
    plan, _ = _estimate(capsys, "--tokens", "1e9", "--tokens-per-s-per-gpu", "500",
                        "--gpus", "8", "--stitch-tokens-per-core-s", "100000", "--json")
    assert plan["stitch_core_hours"] == round(1e9 / 100_000 / 3600, 3)  # 2.778


def test_gpus_beyond_max_map_length_get_no_task_and_the_estimate_says_so(capsys):
    plan, table = _estimate(capsys, "--tokens", "1e9", "--tokens-per-s-per-gpu", "500",
                            "--gpus", "2000", "--max-map-length", "1024")
    # 1,667 shards fit one run (1,024 x 72 >= 1,667), cut into 1,024 groups of 1 or 2:
    # the run takes 2 x 20 min; the GPU-hours do not change with the GPU count
    assert plan["gpus_busy"] == 1024 and plan["runs"] == 1 and plan["shard_groups"] == 1024
    assert plan["wall_clock_hours"] == round(2 * 1200 / 3600, 3)
    assert plan["gpu_hours"] == 555.556
    assert "only 1024 of 2000 GPUs get a task" in table


def test_list_requests_count_1000_keys_a_request(capsys):
    # 30 partitions of 2,740 files: 3 requests each (1,000 + 1,000 + 740 keys)
    plan, _ = _estimate(capsys, *PLAN, "--partitions", "30", "--files-per-partition", "2740",
                        "--json")
    assert plan["crawl_list_requests"] == 90


def _report(run_url: str, token_yield: dict | None = None, attempts: dict | None = None
            ) -> None:
    """A report.json with two committed shards and one still running."""
    shards = [
        {"name": "shard-00000", "committed": True, "output_tokens": 6000, "device_seconds": 20.0},
        {"name": "shard-00001", "committed": True, "output_tokens": 3000, "device_seconds": 10.0},
        {"name": "shard-00002", "committed": False, "output_tokens": 500,
         "device_seconds": None},
    ]
    tokens = {"output": 9500, "device_seconds": 30.0, "devices": ["cuda"], "startup_s": 24.0,
              "engine_starts": 2, "generation_s": 30.0, "wall_s": 40.0,
              "generating_fraction": 0.75}
    storage.write_json(storage.join(run_url, paths.REPORT_JSON),
                       {"run_url": run_url, "shards": shards, "tokens": tokens,
                        **({"token_yield": token_yield} if token_yield else {}),
                        **({"attempts": attempts} if attempts else {})})


def test_a_runs_token_yield_sizes_the_seed_and_the_generation(tmp_path, capsys):
    """The run made 2,375 usable tokens of its 9,500 output tokens (25%) from 19,000 seed
    tokens (yield 0.125): 1e6 usable tokens need 4e6 generated and 8e6 seed tokens."""
    run_url = f"file://{tmp_path}/run"
    _report(run_url, {"seed_tokens": 19000, "usable_tokens": 2375, "yield": 0.125})
    plan, table = _estimate(capsys, "--tokens", "1e6", "--run", run_url, "--gpus", "1",
                            "--startup-s", "0")
    assert plan["usable_tokens"] == 1_000_000 and plan["tokens"] == 4_000_000
    assert (plan["measured_usable_share"], plan["measured_token_yield"]) == (0.25, 0.125)
    assert plan["seed_tokens_needed"] == 8_000_000 == plan["stitch_source_tokens"]
    # 4e6 generated tokens at 300 tokens/s: 13,333 GPU-seconds
    assert plan["gpu_hours"] == round(4e6 / 300 / 3600, 3)
    assert "seed tokens needed" in table and "8,000,000" in table
    # a run reported before the join has no yield: --tokens are output tokens, as before
    _report(run_url)
    plan, _ = _estimate(capsys, "--tokens", "1e6", "--run", run_url, "--gpus", "1",
                        "--startup-s", "0", "--json")
    assert plan["tokens"] == 1_000_000 and plan["seed_tokens_needed"] is None


def test_a_run_with_attempts_plans_from_its_generated_tokens_per_usable_token(
        tmp_path, capsys):
    """A run whose retries generated 2.5 tokens for each usable one (docs/adr/0141):
    1e6 usable tokens need 2.5e6 generated, whatever its output figure says."""
    run_url = f"file://{tmp_path}/run"
    _report(run_url, {"seed_tokens": 19000, "usable_tokens": 2375, "yield": 0.125},
            {"generated_per_usable": 2.5, "generated_tokens": 9000, "usable_tokens": 3600})
    plan, table = _estimate(capsys, "--tokens", "1e6", "--run", run_url, "--gpus", "1",
                            "--startup-s", "0")
    assert plan["tokens"] == 2_500_000 and plan["measured_usable_share"] == 0.4
    assert "2.50 generated tokens per usable token" in table


def test_a_run_gives_tokens_per_gpu_second_and_start_up_per_task(tmp_path, capsys):
    run_url = f"file://{tmp_path}/run"
    _report(run_url)
    plan, table = _estimate(capsys, "--tokens", "1.08e8", "--run", run_url, "--gpus", "4",
                            "--shard-minutes", "30", "--gpu-hour-usd", "3")
    # committed shards only: 9,000 tokens / 30 device-seconds = 300 tokens/s per GPU;
    # start-up: 24 s over 2 engines started = 12 s a task
    assert plan["tokens_per_s_per_gpu"] == 300 and plan["startup_s_per_task"] == 12
    assert plan["rate_source"].startswith(f"run {run_url}") and "cuda" in plan["rate_source"]
    # 1.08e8 / 300 = 360,000 GPU-seconds = 100 GPU-hours; shards of 300 x 1,800 = 540,000
    # tokens: 200; (86,400 - 12) / 1,800 = 47.99 -> 47 a group, 4 x 47 = 188 a run -> 2 runs
    # of 100 shards in 4 groups = 8 tasks x 12 s = 0.027 GPU-hours
    assert (plan["shards"], plan["runs"], plan["shard_groups"]) == (200, 2, 8)
    assert plan["gpu_hours"] == 100.027 and plan["usd"] == 300.08
    # a run: 12 + 25 x 1,800 = 45,012 s; two: 90,024 s = 25.007 h
    assert plan["wall_clock_hours"] == 25.007
    assert plan["measured_generating_fraction"] == 0.75 and "75.0%" in table
    # a start-up given by hand wins over the run's
    plan, _ = _estimate(capsys, "--tokens", "1.08e8", "--run", run_url, "--gpus", "4",
                        "--startup-s", "0", "--json")
    assert plan["startup_s_per_task"] == 0 and plan["startup_source"] == "--startup-s"


def test_a_sweep_gives_its_winners_tokens_per_gpu(tmp_path, capsys):
    folder = SweepFolder(f"file://{tmp_path}/sweep")
    storage.write_json(folder.winner_url, {
        "engine_args": {"tensor_parallel_size": 2, "max_num_seqs": 230},
        "provenance": {"device": "cuda",
                       "measured": {"output_tokens_per_s": 20000.0, "startup_s": 80.0},
                       "backed_off_measured": {"output_tokens_per_s": 18400.0,
                                               "startup_s": 95.0}},
        "applied_to": "/models/x/synthfactory-engine.json"})
    plan, _ = _estimate(capsys, "--tokens", "1e9", "--from-sweep", folder.url, "--gpus", "8",
                        "--json")
    # the backed-off winner, which rephrase runs: 18,400 tokens/s on 2 GPUs = 9,200 each
    assert plan["tokens_per_s_per_gpu"] == 9200 and plan["startup_s_per_task"] == 95


def test_a_sweep_without_an_applied_winner_gives_the_defaults(tmp_path, capsys):
    folder = SweepFolder(f"file://{tmp_path}/sweep")
    folder.write_table([
        {"key": "defaults", "role": "baseline", "status": "ok", "device": "cpu",
         "output_tokens_per_s": 150.2, "startup_s": 30.0, "config": {}},
        {"key": "b", "role": "grid", "status": "ok", "device": "cpu",
         "output_tokens_per_s": 160.0, "startup_s": 31.0, "config": {"max_num_seqs": 8}},
    ])
    storage.write_json(folder.winner_url, {"engine_args": {"max_num_seqs": 8},
                                           "applied_to": None, "not_applied": "slower"})
    plan, _ = _estimate(capsys, "--tokens", "1e9", "--from-sweep", folder.url, "--gpus", "8",
                        "--json")
    assert plan["tokens_per_s_per_gpu"] == 150.2 and plan["startup_s_per_task"] == 30
    assert "the defaults" in plan["rate_source"]


def _refused(tmp_path, *argv: str) -> tuple[int, str]:
    """Exit code and the last stderr line of the console script."""
    proc = subprocess.run([sys.executable, "-m", "synthfactory.cli", "estimate", *argv],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "Traceback" not in proc.stderr
    return proc.returncode, proc.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, code, expect", [
    (["--tokens", "1e9", "--tokens-per-s-per-gpu", "500", "--gpus", "0"], 2,
     ("argument --gpus", "must be at least 1, got 0")),
    (["--tokens", "0", "--tokens-per-s-per-gpu", "500", "--gpus", "8"], 2,
     ("argument --tokens", "must be greater than 0")),
    (["--tokens", "1e9", "--gpus", "8"], 2,
     ("one of the arguments --tokens-per-s-per-gpu --from-sweep --run is required",)),
    (["--docs", "1e6", "--tokens-per-s-per-gpu", "500", "--gpus", "8"], 3,
     ("--docs", "give --tokens-per-output too")),
    (["--tokens", "1e9", "--tokens-per-s-per-gpu", "500", "--gpus", "8",
      "--shard-minutes", "1500"], 3,
     ("--shard-minutes 1500", "does not fit in a 24-hour run")),
    (["--tokens", "1e9", "--run", "{tmp}/no-run", "--gpus", "8"], 3,
     ("--run {tmp}/no-run", "no report/report.json there", "synthfactory report")),
    (["--tokens", "1e9", "--from-sweep", "{tmp}/no-sweep", "--gpus", "8"], 3,
     ("--from-sweep {tmp}/no-sweep", "neither winner.json nor results.parquet")),
])
def test_bad_input_ends_in_one_line_naming_it(tmp_path, argv, code, expect):
    returncode, line = _refused(tmp_path, *[a.format(tmp=tmp_path) for a in argv])
    assert returncode == code
    for text in expect:
        assert text.format(tmp=tmp_path) in line
