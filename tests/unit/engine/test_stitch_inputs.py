"""What counts as a stitch's inputs (stitch/inputs.py): whatever changes a prompt row
changes the hash, and how the work is spread does not. A stitch that finds shards.json
with the same hash starts no Spark (tests/integration/engine/test_stitch_spark.py)."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory.layout import RunLayout
from synthfactory.stitch.config import StitchConfig
from synthfactory.stitch.inputs import ROW_OPTIONS, fingerprint, manifest_entries
from synthfactory.stitch.templates import load_templates

FILES = [("file:///seeds/a.parquet", 10, "e1"), ("file:///seeds/b.parquet", 20, "e2")]


@pytest.fixture
def cfg():
    return StitchConfig(files=[f for f, _, _ in FILES], run=RunLayout("file:///data/run"),
                        templates=load_templates(["qa", "summary"]), model_dir="/models/m",
                        shard_tokens=4096)


def test_how_the_work_is_spread_is_no_input(cfg):
    spread = dataclasses.replace(cfg, master="spark://elsewhere:7077", partitions=64,
                                 run=RunLayout("s3://other/run"))
    assert fingerprint(spread, FILES, "{}") == fingerprint(cfg, FILES, "{}")


@pytest.mark.parametrize("change", [
    {"max_new_tokens": "auto"}, {"shard_tokens": 8192}, {"styles_per_doc": 2},
    {"max_model_len": 4096}, {"text_column": "body"}, {"id_column": "doc"},
    {"quality_column": "q"}, {"min_quality": 0.5}, {"domain_column": "domain"}, {"seed": 1},
    {"chunking": False}])
def test_each_option_that_changes_a_row_is_an_input(cfg, change):
    assert set(change) <= set(ROW_OPTIONS)
    assert fingerprint(dataclasses.replace(cfg, **change), FILES, "{}") != \
        fingerprint(cfg, FILES, "{}")


def test_the_files_their_etags_the_templates_and_the_tokenizer_are_inputs(cfg):
    base = fingerprint(cfg, FILES, "{}")
    corrected = [FILES[0], ("file:///seeds/b.parquet", 20, "e2-corrected")]
    assert fingerprint(cfg, corrected, "{}") != base
    assert fingerprint(cfg, FILES[:1], "{}") != base
    assert fingerprint(dataclasses.replace(cfg, templates=load_templates(["qa"])),
                       FILES, "{}") != base
    assert fingerprint(cfg, FILES, '{"model": "another"}') != base


def test_the_manifest_is_read_once_per_file_in_order_whatever_its_parts(tmp_path):
    manifest = tmp_path / "manifest"
    manifest.mkdir()
    pq.write_table(pa.table({"key": ["file:///b", "file:///a"], "size": [2, 1],
                             "etag": ["y", "x"]}), manifest / "part-00001.parquet")
    pq.write_table(pa.table({"key": ["file:///a"], "size": [1], "etag": ["x"]}),
                   manifest / "part-00000.parquet")
    pq.write_table(pa.table({"key": ["file:///c"]}), manifest / "_SUMMARY.parquet")
    assert manifest_entries(f"file://{manifest}") == [("file:///a", 1, "x", None),
                                                      ("file:///b", 2, "y", None)]


def test_a_stitch_is_done_only_from_the_same_inputs_with_every_shard_there(cfg, tmp_path):
    """What the check before Spark reads: shards.json written from these inputs, every
    shard it names in the prompts folder; anything else is stitched again."""
    import json

    from synthfactory.stitch.command import _stitched

    run = RunLayout(f"file://{tmp_path}/run")
    cfg = dataclasses.replace(cfg, run=run, inputs="sha256:these")
    prompts = tmp_path / "run" / "prompts"
    prompts.mkdir(parents=True)
    shard = prompts / "shard-00000.parquet"
    pq.write_table(pa.table({"id": ["a"]}), shard)
    plan = {"shards": [{"name": "shard-00000", "url": f"file://{shard}"}],
            "inputs": "sha256:these"}
    (prompts / "shards.json").write_text(json.dumps(plan))
    assert _stitched(cfg) == plan
    assert _stitched(dataclasses.replace(cfg, inputs="sha256:others")) is None
    shard.unlink()
    assert _stitched(cfg) is None  # a shard deleted since
    pq.write_table(pa.table({"id": ["a"]}), shard)
    (prompts / "shards.json").write_text("{not json")
    assert _stitched(cfg) is None
