"""Length specs, the seeded length source and the overlong policy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from synthfactory.errors import SynthfactoryError
from synthfactory.training.length_source import LengthSource, LengthSourceConfig
from synthfactory.training.lengths import (
    BucketLengthSpec,
    EmpiricalLengthSpec,
    LengthBucket,
    ParametricLengthSpec,
    load_spec,
    spec_from_dict,
)
from tests.support.training import make_run, write_spec

BIMODAL = {
    "type": "buckets",
    "buckets": [
        {"min_len": 1, "max_len": 128, "weight": 3.0},
        {"min_len": 1024, "max_len": 2000, "weight": 1.0},
    ],
}


@pytest.mark.parametrize(
    ("min_len", "max_len", "weight", "problem"),
    [
        (0, 10, 1.0, "min_len must be an integer >= 1"),
        (5, 4, 1.0, "max_len must be an integer >= min_len"),
        (1, 10, 0.0, "weight must be finite and > 0"),
        (1, 10, math.nan, "weight must be finite and > 0"),
        (1, 10, math.inf, "weight must be finite and > 0"),
    ],
)
def test_bucket_validation_names_the_problem(min_len, max_len, weight, problem):
    with pytest.raises(SynthfactoryError, match=problem):
        LengthBucket(min_len, max_len, weight)


def test_bucket_lengths_stay_in_buckets_and_follow_weights():
    spec = spec_from_dict(BIMODAL)
    lengths = spec.sample(np.random.default_rng(0), 20000)
    short = (lengths >= 1) & (lengths <= 128)
    long = (lengths >= 1024) & (lengths <= 2000)
    assert np.all(short | long)
    assert abs(short.mean() - 0.75) < 0.02
    assert lengths.min() == 1 and lengths.max() == 2000  # both ends are reachable


@pytest.mark.parametrize("dist", ["uniform", "normal", "lognormal", "zipf"])
def test_parametric_lengths_are_clamped_integers(dist):
    spec = ParametricLengthSpec(dist, min_len=16, max_len=300)
    lengths = spec.sample(np.random.default_rng(1), 5000)
    assert lengths.dtype == np.int64
    assert lengths.min() >= 16 and lengths.max() <= 300
    assert len(np.unique(lengths)) > 10


def test_parametric_params_shape_the_draws():
    narrow = ParametricLengthSpec("normal", 1, 1000, {"mean": 500, "std": 5})
    lengths = narrow.sample(np.random.default_rng(2), 5000)
    assert abs(lengths.mean() - 500) < 1 and lengths.std() < 7


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        ({"type": "parametric", "dist": "zipf", "min_len": 1, "max_len": 9,
          "params": {"alpha": 1.0}}, "'alpha' must be > 1"),
        ({"type": "parametric", "dist": "normal", "min_len": 1, "max_len": 9,
          "params": {"std": -1}}, "'std' must be > 0"),
        ({"type": "parametric", "dist": "gamma", "min_len": 1, "max_len": 9}, "unknown dist"),
        ({"type": "parametric", "dist": "normal", "min_len": 1, "max_len": 9,
          "params": {"mu": 3}}, r"unknown params \['mu'\]"),
        ({"type": "buckets", "buckets": []}, "at least one bucket"),
        ({"type": "buckets", "buckets": [{"min_len": 3}]}, "missing"),
        ({"type": "buckets", "buckets": [{"min_len": 1, "max_len": 2, "wieght": 1}]},
         "unknown keys"),
        ({"type": "histogram"}, "unknown type 'histogram'"),
        ({"buckets": []}, "'type' key"),
    ],
)
def test_bad_spec_json_names_the_file_and_problem(tmp_path, obj, problem):
    path = write_spec(tmp_path, obj)
    with pytest.raises(SynthfactoryError, match=problem) as err:
        load_spec(path)
    assert "spec.json" in str(err.value)


def test_spec_round_trips_through_json_form():
    for obj in (BIMODAL, {"type": "parametric", "dist": "lognormal", "min_len": 1,
                          "max_len": 4096, "params": {"mean": 5.0, "sigma": 0.5}}):
        assert spec_from_dict(obj).to_dict() == obj


def test_empirical_spec_from_run_uses_only_the_joined_parts(tmp_path):
    run = make_run(tmp_path, [5, 7, 0, 9, 11, 13])
    spec = spec_from_dict({"type": "empirical", "source": run})
    assert isinstance(spec, EmpiricalLengthSpec)
    # The strays (10**6 tokens: an unlisted joined part, a generated part) are skipped;
    # 0-token outputs are left out.
    assert sorted(spec.lengths.tolist()) == [5, 7, 9, 11, 13]
    assert set(spec.sample(np.random.default_rng(0), 500).tolist()) == {5, 7, 9, 11, 13}


def test_empirical_spec_without_parts_says_where_it_looked(tmp_path):
    with pytest.raises(SynthfactoryError, match="no joined/_JOINED.json; run `synthfactory join"):
        spec_from_dict({"type": "empirical", "source": str(tmp_path)})


def _source(spec=None, **kw) -> LengthSource:
    spec = spec or spec_from_dict(BIMODAL)
    return LengthSource(LengthSourceConfig(spec, **{"max_len": 4096, "chunk_size": 64, **kw}))


def test_source_is_reproducible_and_ranks_differ():
    a = _source(seed=3, dp_rank=0).take(300)
    b = _source(seed=3, dp_rank=0).take(300)
    other_rank = _source(seed=3, dp_rank=1).take(300)
    other_seed = _source(seed=4, dp_rank=0).take(300)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, other_rank)
    assert not np.array_equal(a, other_seed)


@pytest.mark.parametrize("consumed", [10, 63, 64, 65, 200])
def test_source_resumes_exactly_including_across_chunk_boundary(consumed):
    # chunk_size 64: 63/64/65 sit around the first boundary, 200 is mid chunk 3.
    reference = _source(seed=7).take(consumed + 150)
    first = _source(seed=7)
    first.take(consumed)
    state = first.get_state()
    resumed = _source(seed=7)
    resumed.set_state(dict(state))
    assert np.array_equal(resumed.take(150), reference[consumed:])
    assert resumed.get_state()["emitted"] == consumed + 150


def test_drop_policy_counts_drops_and_keeps_lengths_in_context():
    source = _source(max_len=500, overlong="drop")
    lengths = source.take(1000)
    assert lengths.max() <= 500
    # About a quarter of draws are 1024..2000 long: dropped, and counted.
    assert 250 < source.dropped < 420
    assert source.truncated == 0
    assert source.emitted == 1000


def test_truncate_policy_counts_truncations():
    source = _source(max_len=500, overlong="truncate")
    lengths = source.take(1000)
    assert lengths.max() == 500
    assert source.truncated == int((lengths == 500).sum())
    assert source.dropped == 0


def test_drop_counters_survive_resume():
    source = _source(max_len=500, overlong="drop", seed=1)
    source.take(100)
    state = source.get_state()
    source.take(100)
    resumed = _source(max_len=500, overlong="drop", seed=1)
    resumed.set_state(state)
    resumed.take(100)
    assert resumed.get_state() == source.get_state()


def test_drop_policy_refuses_a_spec_that_can_never_fit():
    spec = BucketLengthSpec((LengthBucket(600, 700),))
    with pytest.raises(SynthfactoryError, match="drop everything"):
        LengthSourceConfig(spec, max_len=512, overlong="drop")
    with pytest.raises(SynthfactoryError, match="overlong policy 'keep'"):
        LengthSourceConfig(spec, max_len=512, overlong="keep")
