"""The sweep command with its trial process replaced by a model of one (no vLLM): the
backed-off entries measured in rounds against the defaults, failures recorded without
stopping the sweep, the decision written with its figures, resume, GPU-only entries."""

from __future__ import annotations

import json

import pytest

from synthfactory import storage
from synthfactory.cli import build_parser
from synthfactory.errors import SynthfactoryError
from synthfactory.rephrase.engine_args import tuned_engine_args
from synthfactory.sweep import command
from tests.support.shards import write_prompt_shard


def _fake_trial(calls: list, later: dict | None = None):
    """Throughput grows with max_num_seqs (defaults: 16 -> 160 tokens/s); dtype float64
    fails as vLLM would. ``later`` maps a max_num_seqs to the figures of its trials in
    order (a lucky first figure the later rounds do not confirm)."""

    def run_trial(spec, workdir, timeout_s):
        config = spec["config"]
        seqs = config.get("max_num_seqs", 16)
        nth = calls.count(config)
        calls.append(config)
        (workdir / "trial.log").write_text(f"trial of {config}\n")
        if config.get("dtype") == "float64":
            return {"status": "failed", "error_kind": "error", "returncode": 1,
                    "error": "ValueError: the CPU backend does not support float64"}
        figures = (later or {}).get(seqs)
        tps = figures[nth] if figures else 10.0 * seqs
        return {"status": "ok", "device": "cpu", "startup_s": 1.0, "warmup_s": 0.1,
                "generation_s": 2.0, "requests": len(spec["rows"]), "prompt_tokens": 100,
                "output_tokens": int(tps * 2), "output_tokens_per_s": tps,
                "prompt_tokens_per_s": 50.0, "peak_rss_mb": 900.0 + seqs, "returncode": 0}

    return run_trial


def _args(tmp_path, grid, **over):
    parser = build_parser("sweep")
    argv = ["--shard", str(tmp_path / "run/prompts/shard-00000.parquet"),
            "--model", str(tmp_path / "model"), "--grid", json.dumps(grid),
            "--out", str(tmp_path / "sweep"), "--sample-rows", "4",
            "--safety-margin", "0.25", "--gpu-hour-usd", "3.6"]
    for name, value in over.items():
        argv += [f"--{name.replace('_', '-')}"] + ([] if value is None else [str(value)])
    return parser.parse_args(argv)


def _env(tmp_path, monkeypatch, later=None, cuda=False):
    write_prompt_shard(f"file://{tmp_path}/run", 0, rows=10)
    (tmp_path / "model").mkdir()
    calls: list = []
    monkeypatch.setattr(command, "run_trial", _fake_trial(calls, later))
    monkeypatch.setattr(command, "has_cuda", lambda: cuda)
    return calls


@pytest.fixture
def sweep_env(tmp_path, monkeypatch):
    return tmp_path, _env(tmp_path, monkeypatch)


GRID = [{"max_num_seqs": 32}, {"dtype": "float64"}, {"max_num_seqs": 8}]
FAST, SLOW = {"max_num_seqs": 24}, {"max_num_seqs": 6}  # 32 and 8 backed off by 0.25


def test_a_faster_configuration_wins_and_is_written_with_its_medians_spreads_rounds(
        sweep_env, capsys):
    tmp_path, calls = sweep_env
    summary = command.run(_args(tmp_path, GRID))
    # only backed-off entries are measured, each round after the defaults; the failure
    # is out and did not stop the rest; the slower survivor left after round 2
    assert calls == [{}, FAST, {"dtype": "float64"}, SLOW, {}, SLOW, FAST, {}, FAST]
    assert summary["configs"] == 4 and summary["failed"] == 1
    assert summary["failures"] == {'dtype="float64"': "error"}
    decision = summary["decision"]
    assert decision["winner"] == "finalist" and decision["rounds"] == 3
    assert decision["defaults"]["median"] == 160.0 and decision["finalist"]["median"] == 240.0
    assert summary["gain"] == 1.5

    assert tuned_engine_args(str(tmp_path / "model")) == FAST
    tuned = json.loads((tmp_path / "model/synthfactory-engine.json").read_text())
    provenance = tuned["provenance"]
    assert provenance["grid_config"] == {"max_num_seqs": 32}
    assert provenance["decision"]["defaults"]["tokens_per_s"] == [160.0] * 3
    assert provenance["decision"]["finalist"]["tokens_per_s"] == [240.0] * 3
    assert provenance["decision"]["spread"] == 0.0 and provenance["measured"]["rounds"] == 3
    # 3.6 an hour at 240 tokens/s: 3.6 / (240 * 3600) * 1e9
    assert provenance["cost_per_billion_output_tokens"] == pytest.approx(4166.67)

    table = storage.read_table(f"file://{tmp_path}/sweep/results.parquet").to_pylist()
    assert [(r["round"], r["label"], r["role"], r["status"]) for r in table][:4] == [
        (1, "defaults", "baseline", "ok"), (1, "max_num_seqs=24", "candidate", "ok"),
        (1, 'dtype="float64"', "candidate", "failed"), (1, "max_num_seqs=6", "candidate", "ok")]
    assert json.loads(table[1]["grid_config"]) == {"max_num_seqs": 32}
    assert "float64" in table[2]["error"]
    assert (tmp_path / "sweep/sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(list((tmp_path / "sweep/logs").iterdir())) == 9
    out = capsys.readouterr().out
    assert "* max_num_seqs=24 (backed off)" in out and "out r2" in out and "failed r1" in out
    assert "decision: max_num_seqs=24 replaces the defaults" in out and "gain 1.50" in out


def test_a_loser_with_one_lucky_run_does_not_replace_the_defaults(tmp_path, monkeypatch,
                                                                    capsys):
    # max_num_seqs=24 measures 400 tokens/s once, then 100 in every later round:
    # the highest single figure of the sweep, but the defaults' 160 stays
    calls = _env(tmp_path, monkeypatch, later={24: [400.0, 100.0, 100.0]})
    summary = command.run(_args(tmp_path, GRID))
    assert calls.count(FAST) == 3  # the lucky run carried it to the end...
    decision = summary["decision"]
    assert decision["winner"] == "defaults" and summary["gain"] == 1.0  # ...not to the model
    assert tuned_engine_args(str(tmp_path / "model")) == {}
    winner = json.loads((tmp_path / "sweep/winner.json").read_text())
    assert winner["engine_args"] == {} and winner["provenance"]["decision"]["finalist"][
        "tokens_per_s"] == [400.0, 100.0, 100.0]
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("decision:")]
    assert lines == [decision["line"]] and "the defaults stay" in lines[0]


def test_rounds_below_three_are_refused_before_measuring(sweep_env):
    tmp_path, calls = sweep_env
    with pytest.raises(SynthfactoryError, match="--rounds 2: use at least 3"):
        command.run(_args(tmp_path, GRID, rounds=2))
    assert calls == []


def test_more_rounds_measure_the_finalist_and_the_defaults_more_often(sweep_env):
    tmp_path, calls = sweep_env
    summary = command.run(_args(tmp_path, GRID, rounds=5))
    assert summary["rounds"] == 5 and calls.count({}) == 5 and calls.count(FAST) == 5


def test_rerun_reuses_every_round_and_retry_failed_reruns_the_failure(sweep_env):
    tmp_path, calls = sweep_env
    first = command.run(_args(tmp_path, GRID))
    calls.clear()
    again = command.run(_args(tmp_path, GRID))
    assert calls == [] and again["skipped"] == 9 and again["measured"] == 0
    assert again["decision"] == first["decision"]
    calls.clear()
    command.run(_args(tmp_path, GRID, retry_failed=None))
    assert calls == [{"dtype": "float64"}]
    calls.clear()  # more rounds extend the sweep: only rounds 4 and 5 are new
    longer = command.run(_args(tmp_path, GRID, rounds=5))
    assert calls == [{}, FAST, {}, FAST] and longer["decision"]["rounds"] == 5


def test_resuming_with_another_grid_is_refused(sweep_env):
    # a new candidate's round 1 would be measured now, against defaults measured then
    tmp_path, calls = sweep_env
    command.run(_args(tmp_path, GRID))
    with pytest.raises(SynthfactoryError, match="another sample or grid.*candidates"):
        command.run(_args(tmp_path, GRID + [{"max_num_seqs": 4}]))


def test_gpu_only_entries_are_skipped_on_the_cpu_with_a_line_and_run_on_a_gpu(
        tmp_path, monkeypatch, capsys):
    suffix = {"speculative_config": {"method": "suffix", "num_speculative_tokens": 8}}
    grid = [{"max_num_seqs": 32}, {"gpu_memory_utilization": 0.9}, suffix]
    calls = _env(tmp_path, monkeypatch)
    summary = command.run(_args(tmp_path, grid, no_apply=None))
    assert {"gpu_memory_utilization": 0.675} not in calls and suffix not in calls
    assert summary["failed"] == 0 and summary["configs"] == 2
    assert set(summary["gpu_only_skipped"]) == {"gpu_memory_utilization=0.9",
                                                'speculative_config={"method": "suffix", '
                                                '"num_speculative_tokens": 8}'}
    out = capsys.readouterr().out
    assert "skipped on the CPU build, GPU-only: gpu_memory_utilization=0.9 (the CPU " \
           "build ignores gpu_memory_utilization)" in out
    assert "suffix decoding needs the arctic-inference package" in out

    gpu = tmp_path / "gpu"
    gpu.mkdir()
    calls = _env(gpu, monkeypatch, cuda=True)
    summary = command.run(_args(gpu, grid, no_apply=None))
    assert {"gpu_memory_utilization": 0.675} in calls and suffix in calls
    assert summary["gpu_only_skipped"] == {} and summary["configs"] == 4


def test_a_grid_with_nothing_to_measure_on_the_cpu_is_refused_in_one_line(sweep_env):
    tmp_path, calls = sweep_env
    with pytest.raises(SynthfactoryError, match=r"^--grid: no configuration other than the "
                       r"defaults to measure on the CPU build \(1 GPU-only skipped\)$"):
        command.run(_args(tmp_path, [{"gpu_memory_utilization": 0.9}, {}]))
    assert calls == []


def test_no_apply_leaves_the_model_folder_untouched(sweep_env):
    tmp_path, _ = sweep_env
    summary = command.run(_args(tmp_path, GRID, no_apply=None))
    assert not (tmp_path / "model/synthfactory-engine.json").exists()
    assert summary["winner"]["applied_to"] is None
    winner = json.loads((tmp_path / "sweep/winner.json").read_text())
    assert winner["engine_args"] == FAST


def test_resuming_into_a_sweep_of_another_sample_is_refused(sweep_env):
    tmp_path, _ = sweep_env
    command.run(_args(tmp_path, GRID, no_apply=None))
    with pytest.raises(SynthfactoryError, match="another sample.*max_tokens"):
        command.run(_args(tmp_path, GRID, max_new_tokens=64))


def test_when_the_defaults_fail_the_sweep_fails_after_reporting(tmp_path, monkeypatch):
    calls = _env(tmp_path, monkeypatch)
    real = command.run_trial

    def defaults_fail_in_round_two(spec, workdir, timeout_s):
        if spec["config"] == {} and calls.count({}) == 1:
            calls.append({})
            (workdir / "trial.log").write_text("killed\n")
            return {"status": "failed", "error_kind": "out_of_memory", "returncode": -9,
                    "error": "trial process killed by SIGKILL"}
        return real(spec, workdir, timeout_s)

    monkeypatch.setattr(command, "run_trial", defaults_fail_in_round_two)
    with pytest.raises(SynthfactoryError, match="round 2: the defaults failed: trial process "
                                                "killed by SIGKILL"):
        command.run(_args(tmp_path, GRID))
    assert storage.read_table(f"file://{tmp_path}/sweep/results.parquet").num_rows == 5
    assert not (tmp_path / "model/synthfactory-engine.json").exists()


def test_sample_rows_spread_over_the_shard():
    assert command.sample_rows(10, 4) == [0, 2, 5, 7]
    assert command.sample_rows(3, 8) == [0, 1, 2]


def test_apply_to_a_model_that_is_not_a_folder_is_refused_before_measuring(sweep_env):
    tmp_path, calls = sweep_env
    with pytest.raises(SynthfactoryError, match="not a local folder"):
        command.run(_args(tmp_path, GRID, model="HuggingFaceTB/SmolLM2-135M-Instruct"))
    assert calls == []


ENDPOINT = {"engine": "endpoint", "endpoint": "http://127.0.0.1:9/v1"}


def test_an_endpoint_grid_of_server_arguments_is_refused_in_one_line(sweep_env):
    tmp_path, calls = sweep_env
    with pytest.raises(SynthfactoryError, match=r"max_num_seqs cannot be swept against an "
                                                r"endpoint .* varies max_in_flight"):
        command.run(_args(tmp_path, [{"max_num_seqs": 8}], **ENDPOINT))
    with pytest.raises(SynthfactoryError, match=r"max_in_flight=0: expected a positive"):
        command.run(_args(tmp_path, [{"max_in_flight": 0}], **ENDPOINT))
    assert calls == []


def test_an_endpoint_sweep_measures_backed_off_client_knobs_and_leaves_the_model_alone(
        sweep_env, monkeypatch, capsys):
    tmp_path, calls = sweep_env
    monkeypatch.setenv("SYNTHFACTORY_ENDPOINT_API_KEY", "sk-never-in-a-spec")
    specs = []
    fake = command.run_trial

    def run_trial(spec, workdir, timeout_s):
        specs.append(spec)
        return fake(spec, workdir, timeout_s)

    monkeypatch.setattr(command, "run_trial", run_trial)
    summary = command.run(_args(tmp_path, {"max_in_flight": [64]}, **ENDPOINT))
    assert {json.dumps(c, sort_keys=True) for c in calls} == {"{}", '{"max_in_flight": 48}'}
    assert all(s["endpoint"] == {"url": ENDPOINT["endpoint"], "served_model": None,
                                 "retry_s": 600.0} for s in specs)
    assert "sk-never" not in json.dumps(specs)
    assert summary["winner"]["applied_to"] is None
    assert not (tmp_path / "model" / "synthfactory-engine.json").exists()
    winner = storage.read_json(f"file://{tmp_path}/sweep/winner.json")
    assert winner["provenance"]["endpoint"]["url"] == ENDPOINT["endpoint"]
    assert "rephrase with" in capsys.readouterr().out


def test_an_endpoint_sweep_without_an_endpoint_is_refused(sweep_env, monkeypatch):
    tmp_path, calls = sweep_env
    monkeypatch.delenv("SYNTHFACTORY_ENDPOINT_URL", raising=False)
    with pytest.raises(SynthfactoryError, match="--engine endpoint: give --endpoint URL"):
        command.run(_args(tmp_path, [{"max_in_flight": 8}], engine="endpoint"))
