"""The safety back-off, the price of a billion tokens, the file the worker reads."""

from __future__ import annotations

import pytest

from synthfactory.errors import SynthfactoryError
from synthfactory.rephrase.engine_args import tuned_engine_args
from synthfactory.sweep.winner import back_off, cost_per_billion, devices, write_tuned


def test_back_off_scales_batch_and_memory_knobs_and_keeps_the_rest():
    config = {"max_num_seqs": 256, "max_num_batched_tokens": 8192,
              "gpu_memory_utilization": 0.95, "dtype": "bfloat16", "enforce_eager": True}
    assert back_off(config, 0.1) == {"max_num_seqs": 230, "max_num_batched_tokens": 7372,
                                     "gpu_memory_utilization": 0.855, "dtype": "bfloat16",
                                     "enforce_eager": True}
    assert back_off(config, 0.0) == config
    assert back_off({}, 0.2) == {}  # knobs left to the defaults were not pushed to an edge
    assert back_off({"max_num_seqs": 1}, 0.5) == {"max_num_seqs": 1}


def test_back_off_keeps_the_token_budget_at_least_the_sequence_budget():
    assert back_off({"max_num_seqs": 64, "max_num_batched_tokens": 64}, 0.5) == {
        "max_num_seqs": 32, "max_num_batched_tokens": 32}
    backed = back_off({"max_num_seqs": 100, "max_num_batched_tokens": 105}, 0.05)
    assert backed["max_num_batched_tokens"] >= backed["max_num_seqs"]


@pytest.mark.parametrize("margin", [-0.1, 1.0, 2])
def test_a_margin_outside_zero_to_one_is_refused(margin):
    with pytest.raises(SynthfactoryError, match="--safety-margin"):
        back_off({"max_num_seqs": 8}, margin)


def test_cost_per_billion_output_tokens():
    # 1000 tokens/s = 3.6 M tokens an hour; at 2.50 an hour a billion costs 694.44
    assert cost_per_billion(1000.0, 2.5) == pytest.approx(694.44)
    assert cost_per_billion(1000.0, 2.5, device_count=2) == pytest.approx(1388.89)
    assert cost_per_billion(1000.0, None) is None
    assert cost_per_billion(None, 2.5) is None
    assert devices({"tensor_parallel_size": 4}, "cuda") == 4
    assert devices({"tensor_parallel_size": 4}, "cpu") == 1


def test_the_winner_is_read_back_as_the_workers_tuned_engine_args(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    write_tuned(str(model), {"max_num_seqs": 6}, {"sweep": "file:///s", "safety_margin": 0.25})
    assert tuned_engine_args(str(model)) == {"max_num_seqs": 6}
    with pytest.raises(SynthfactoryError, match="not a local folder"):
        write_tuned(str(tmp_path / "absent"), {}, {})
