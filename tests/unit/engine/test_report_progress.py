"""The run against its plan (report.json's `progress`, which the Run report shows while a
run runs): rows and tokens of the committed shards, the rate of every shard group
together over the committed window, the time left at that rate, the slowest shards.
The same build_report makes report.json and the UI's view so far."""

from __future__ import annotations

from synthfactory import storage
from synthfactory.contract import RunFolder
from synthfactory.report_figures import build_report, shard_figures
from tests.support.run_folders import build_run


def _progress(run_url: str) -> dict:
    files = RunFolder(run_url, storage.read_json_or_none).read()
    return build_report(run_url, files, [shard_figures(s) for s in files.shards])["progress"]


def test_a_run_half_done_has_its_rate_and_time_left(tmp_path):
    run = build_run(storage.normalize(str(tmp_path)), shard_rows=(6, 6, 6), quarantined=1)
    # shard 0 ran 00:00-00:01, shard 1 00:00:30-00:02:00 (another group), shard 2 not yet
    timings = storage.read_json(run.commit_url(1))["timings"]
    run.edit_commit(1, timings={**timings, "started": "2024-01-02T00:00:30+00:00",
                                "finished": "2024-01-02T00:02:00+00:00", "wall_s": 90.0})
    storage.delete(run.commit_url(2))
    progress = _progress(run.run_url)
    tokens = sum(storage.read_json(run.commit_url(i))["output_tokens"] for i in (0, 1))
    assert progress["rows_planned"] == 18 and progress["rows_done"] == 12
    assert progress["done_share"] == round(12 / 18, 4)
    assert progress["window_s"] == 120.0  # first start to last end, not the sum of walls
    assert progress["rows_per_s"] == round(12 / 120, 4)
    assert progress["tokens_per_s"] == round(tokens / 120, 2)
    assert progress["eta_s"] == 60.0  # 6 rows left at 0.1 rows/s
    assert [s["name"] for s in progress["slowest"]] == ["shard-00001", "shard-00000"]


def test_before_any_commit_there_is_no_rate_and_no_eta(tmp_path):
    run = build_run(storage.normalize(str(tmp_path)), shard_rows=(4, 4))
    for index in (0, 1):
        storage.delete(run.commit_url(index))
    progress = _progress(run.run_url)
    assert (progress["rows_planned"], progress["rows_done"]) == (8, 0)
    assert progress["rows_per_s"] is None and progress["eta_s"] is None
    assert progress["slowest"] == []


def test_a_finished_run_has_nothing_left(tmp_path):
    run = build_run(storage.normalize(str(tmp_path)), shard_rows=(5, 4))
    progress = _progress(run.run_url)
    assert progress["rows_done"] == progress["rows_planned"] == 9
    assert progress["done_share"] == 1.0 and progress["eta_s"] == 0.0
