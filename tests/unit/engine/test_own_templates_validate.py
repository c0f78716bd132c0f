"""A run stitched from a folder of one's own templates is validated against them: the
quality gate finds each template in the run folder's copy (prompts/templates/), not in
the folder it came from, which may have changed or gone since."""

from __future__ import annotations

import pytest

from synthfactory import storage
from synthfactory.errors import PermanentError
from synthfactory.layout import RunLayout
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from synthfactory.stitch.prompt_table import prompt_table
from synthfactory.stitch.templates import parse_template, write_copies
from synthfactory.validate import validate_shard

# Bounds no shipped template has: outputs over half their source are too long, and a
# verbatim copy passes (max_copy 1.0); short texts are not language-checked.
TERSE = parse_template({
    "id": "terse", "version": 1, "style": "terse", "system": "Be terse.", "user": "{document}",
    "quality": {"min_ratio": 0.05, "max_ratio": 0.5, "max_copy": 1.0,
                "language_min_words": 100}}, "terse.json")


def _run(tmp_path) -> tuple[str, str]:
    run = f"file://{tmp_path}/run"
    documents = [f"document number {i} alpha beta gamma delta epsilon zeta eta theta"
                 for i in range(6)]  # 11 words; the echo engine answers with the first 8
    shard = storage.join(run, "prompts", "shard-00000.parquet")
    storage.write_table(prompt_table(TERSE, [f"doc-{i}" for i in range(6)], documents, 32),
                        shard)
    rephrase_shard(shard, run, lambda: EchoEngine(), WorkerOptions(model="echo"))
    return run, shard


def test_validate_gates_rows_by_the_runs_copy_of_its_template(tmp_path):
    run, shard = _run(tmp_path)
    write_copies([TERSE], RunLayout(run).prompt_templates)
    quality = validate_shard(shard, run, 0.5)["quality"]
    # 8 of 11 words: too long for terse (0.5), within the defaults (4.0); a copy, allowed
    assert quality["reasons"]["too_long"] == 6
    assert quality["reasons"]["copy_of_source"] == 0


def test_a_shape_an_own_template_declares_is_checked_and_counted(tmp_path):
    """An own template's output_shape gates the run (the echo's 8 words are no pairs):
    wrong_format counted in the validation JSON, which lists every reason, and the
    verdicts' qa_pairs column empty for its rows."""
    from synthfactory.quality.reasons import REASONS

    run, shard = _run(tmp_path)
    shaped = parse_template({**TERSE.document(), "quality": {
        **TERSE.quality, "max_ratio": 4.0, "output_shape": "qa_pairs"}}, "terse.json")
    write_copies([shaped], RunLayout(run).prompt_templates)
    quality = validate_shard(shard, run, 0.5)["quality"]
    assert list(quality["reasons"]) == list(REASONS)
    assert quality["reasons"]["wrong_format"] == 6 and quality["usable"] == 0
    verdicts = storage.read_table(RunLayout(run).shard_verdicts("shard-00000"))
    assert verdicts.column("qa_pairs").to_pylist() == [[]] * 6


def test_without_the_copy_an_id_that_is_not_shipped_is_named(tmp_path):
    run, shard = _run(tmp_path)
    with pytest.raises(PermanentError, match=r"template 'terse': not found in file://\S+"
                                             r"synthfactory/templates"):
        validate_shard(shard, run, 0.5)


def test_the_quality_command_takes_the_same_folder(tmp_path):
    import json
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "terse.json").write_text(json.dumps(TERSE.document()))
    source = "document number one alpha beta gamma delta epsilon zeta eta theta"
    pq.write_table(pa.table({"id": ["a"], "source_text": [source],
                             "output_text": [" ".join(source.split()[:8])],
                             "finish_reason": ["stop"], "template": ["terse"]}),
                   tmp_path / "in.parquet")
    cli = [sys.executable, "-m", "synthfactory.cli", "quality", "--in",
           f"file://{tmp_path}/in.parquet", "--out", f"file://{tmp_path}/out.parquet"]
    own = subprocess.run([*cli, "--templates-url", f"file://{tmp_path}/own"],
                         capture_output=True, text=True, timeout=120)
    assert "RESULT quality rows=1 usable=0 " in own.stdout and " too_long=1 " in own.stdout, (
        own.stderr)
    shipped = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert shipped.returncode == 3 and "template 'terse': not found" in shipped.stderr
