"""plan never maps more shard groups than the deployment's max_map_length (issue 40):
Airflow's API server refuses a plan XCom longer than ``[core] max_map_length`` and the
run fails after stitch, so plan merges shards into that many groups and says so in one
line. Tested at the limit: as many groups as the limit allows pass untouched and
silent, one more is merged."""

from __future__ import annotations

import json
import logging

from synthfactory import cli, storage


def _plan(tmp_path, capsys, shards: int, *flags: str) -> list[dict]:
    run = f"file://{tmp_path}/run"
    entries = [{"name": f"shard-{i:05d}", "url": f"{run}/prompts/shard-{i:05d}.parquet",
                "rows": 2, "tokens": 100} for i in range(shards)]
    storage.write_json(f"{run}/prompts/shards.json", {"shards": entries})
    assert cli.main(["plan", "--run", run, *flags, "--", "--engine", "echo"]) == 0
    return json.loads(capsys.readouterr().out.splitlines()[-1])  # the summary line


def _every_shard_once(groups: list[dict], shards: int) -> None:
    names = [name for group in groups for name in group["shards"]]
    assert names == [f"shard-{i:05d}" for i in range(shards)]  # in order, none twice


def test_groups_at_the_limit_are_mapped_as_asked_without_a_word(tmp_path, capsys, caplog):
    with caplog.at_level(logging.WARNING):
        groups = _plan(tmp_path, capsys, 8, "--max-shard-groups", "8", "--max-map-length", "8")
    assert len(groups) == 8
    _every_shard_once(groups, 8)
    assert "max_map_length" not in caplog.text


def test_one_group_over_the_limit_is_merged_and_said_in_one_line(tmp_path, capsys, caplog):
    with caplog.at_level(logging.WARNING):
        groups = _plan(tmp_path, capsys, 9, "--max-shard-groups", "9", "--max-map-length", "8")
    assert len(groups) == 8
    _every_shard_once(groups, 9)
    said = [r.getMessage() for r in caplog.records if "max_map_length" in r.getMessage()]
    assert len(said) == 1 and "9 shards merged into 8 groups" in said[0], said


def test_fewer_shards_than_the_limit_need_no_merge_whatever_max_groups_says(tmp_path, capsys,
                                                                            caplog):
    with caplog.at_level(logging.WARNING):
        groups = _plan(tmp_path, capsys, 3, "--max-shard-groups", "5000", "--max-map-length", "4")
    assert len(groups) == 3
    assert "max_map_length" not in caplog.text


def test_thousands_of_shards_stay_under_the_default_limit(tmp_path, capsys):
    groups = _plan(tmp_path, capsys, 3000, "--max-shard-groups", "4000", "--max-map-length", "1024")
    assert len(groups) == 1024
    _every_shard_once(groups, 3000)
