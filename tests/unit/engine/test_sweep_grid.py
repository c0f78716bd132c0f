"""Grid files become the configurations the sweep runs, each with a stable key."""

from __future__ import annotations

import json

import pytest

from synthfactory.errors import SynthfactoryError
from synthfactory.sweep.grid import config_key, config_label, expand_grid, load_grid


def test_product_form_expands_to_every_combination_after_the_baseline():
    configs = expand_grid({"max_num_seqs": [8, 16], "enable_prefix_caching": [True, False],
                           "dtype": "bfloat16"})
    assert configs[0] == {}
    assert len(configs) == 1 + 4
    assert {"max_num_seqs": 16, "enable_prefix_caching": False, "dtype": "bfloat16"} in configs
    # a non-list value is one fixed value, e.g. a speculative decoding object
    spec = {"method": "ngram", "num_speculative_tokens": 3}
    assert expand_grid({"speculative_config": spec}, baseline=False) == [
        {"speculative_config": spec}]


def test_list_form_keeps_order_and_drops_duplicates_and_the_baseline_can_be_off():
    grid = [{"max_num_seqs": 4}, {}, {"max_num_seqs": 4}, {"max_num_seqs": 2}]
    assert expand_grid(grid) == [{}, {"max_num_seqs": 4}, {"max_num_seqs": 2}]
    assert expand_grid(grid[:1], baseline=False) == [{"max_num_seqs": 4}]


@pytest.mark.parametrize("grid, message", [
    ([{"max_num_seqs": 4}, "fast"], r"--grid\[1\]: expected an object"),
    ([{"model": "other"}], r"'model' is set by the sweep"),
    ({"max_num_seqs": []}, r"'max_num_seqs' has an empty list"),
    (42, "expected a list of engine-argument objects"),
    ([], "no configurations"),
])
def test_bad_grids_are_refused_with_the_entry_named(grid, message):
    with pytest.raises(SynthfactoryError, match=message):
        expand_grid(grid, baseline=False)


def test_config_key_is_stable_and_ignores_key_order():
    a = config_key({"max_num_seqs": 8, "dtype": "bfloat16"})
    assert a == config_key({"dtype": "bfloat16", "max_num_seqs": 8})
    assert a != config_key({"dtype": "bfloat16", "max_num_seqs": 9})
    assert len(a) == 12
    # pinned: a rerun in another process (or release) must find the same key
    assert config_key({}) == "44136fa355b3"
    assert config_label({}) == "defaults"
    assert config_label({"max_num_seqs": 8, "dtype": "half"}) == 'dtype="half",max_num_seqs=8'


def test_grid_comes_from_inline_json_a_json_file_or_a_yaml_file(tmp_path):
    assert load_grid('[{"max_num_seqs": 2}]') == [{"max_num_seqs": 2}]
    path = tmp_path / "grid.json"
    path.write_text(json.dumps({"max_num_seqs": [2, 4]}))
    assert load_grid(str(path)) == {"max_num_seqs": [2, 4]}
    yaml_path = tmp_path / "grid.yaml"
    yaml_path.write_text("max_num_seqs: [2, 4]\nenforce_eager: [true]\n")
    assert load_grid(f"file://{yaml_path}") == {"max_num_seqs": [2, 4], "enforce_eager": [True]}
    with pytest.raises(SynthfactoryError, match="not found"):
        load_grid(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("[{")
    with pytest.raises(SynthfactoryError, match="bad.json: not valid JSON"):
        load_grid(str(tmp_path / "bad.json"))
