"""Per-row generation budgets (max_new_tokens auto): each row is capped by its own
``max_new_tokens`` column, and a budget that cuts an output shows as ``length``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from synthfactory import storage
from synthfactory.contract.flag_types import AUTO, budget
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from tests.support.shards import write_prompt_shard

BUDGETS = [3, 40, 5, 8, 1, 100]


def _shard_with_budgets(run_url: str) -> str:
    url = write_prompt_shard(run_url, 0, rows=len(BUDGETS))
    table = storage.read_table(url)
    index = table.column_names.index("max_new_tokens")
    table = table.set_column(index, "max_new_tokens", pa.array(BUDGETS, pa.int32()))
    storage.write_table(table, url)
    return url


def _generated(run_url: str) -> dict[int, tuple[int, str]]:
    parts = storage.list_files(storage.join(run_url, "generated", "shard-00000"), ".parquet")
    rows = [r for p in parts for r in storage.read_table(p).to_pylist()]
    return {r["row"]: (r["output_tokens"], r["finish_reason"]) for r in rows}


def test_each_row_is_capped_by_its_own_budget(tmp_path):
    run_url = f"file://{tmp_path}/run"
    shard = _shard_with_budgets(run_url)
    rephrase_shard(shard, None, lambda: EchoEngine(per_poll=2),
                   WorkerOptions(model="echo", checkpoint_rows=4, per_row_budgets=True))
    natural = EchoEngine.WORDS  # the echo engine's own output length
    assert _generated(run_url) == {
        row: (min(natural, b), "length" if b < natural else "stop")
        for row, b in enumerate(BUDGETS)}


def test_without_per_row_budgets_the_sampling_cap_applies(tmp_path):
    run_url = f"file://{tmp_path}/run"
    shard = _shard_with_budgets(run_url)
    rephrase_shard(shard, None, lambda: EchoEngine(per_poll=2),
                   WorkerOptions(model="echo", checkpoint_rows=4))
    assert set(_generated(run_url).values()) == {(EchoEngine.WORDS, "stop")}


@pytest.mark.parametrize("text,value", [("auto", AUTO), ("AUTO", AUTO), ("128", 128)])
def test_budget_type_takes_a_number_or_auto(text, value):
    assert budget(text) == value


@pytest.mark.parametrize("text", ["0", "-3", "lots"])
def test_budget_type_refuses_anything_else(text):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        budget(text)
