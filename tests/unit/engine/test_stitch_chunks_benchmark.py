"""benchmarks/stitch_chunks.py without Spark: its options, the ABAB order of its runs, its
RESULT figures and the checks on the two sides' shards.json (running it takes minutes)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.support.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))  # it imports machine and stitch from there
        spec = importlib.util.spec_from_file_location("benchmarks_stitch_chunks",
                                                      BENCHMARKS / "stitch_chunks.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module


def test_options(bench):
    args = bench.parse_args([])
    assert (args.docs, args.files, args.rounds, args.styles_per_doc) == (40_000, 8, 3, 2)
    assert (args.max_model_len, args.max_new_tokens, args.shard_tokens) == (2048, 256, 2_000_000)
    assert bench.parse_args(["--docs", "2000", "--rounds", "1"]).docs == 2000
    for bad in (["--rounds", "0"], ["--docs", "500"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def test_runs_alternate_on_off(bench):
    assert bench.schedule(3) == [True, False, True, False, True, False]


def test_result_figures_are_medians(bench, monkeypatch):
    seconds = {True: [10.0, 12.0, 30.0], False: [8.0, 9.0, 10.0]}  # one slow outlier
    assert bench.rates(900, seconds) == ("75", "100", "0.750")
    monkeypatch.setenv("SYNTHFACTORY_CPU_FLAGS", "avx2")
    line = bench.result_line("stitch_chunks", docs=900, docs_per_s="75",
                             baseline_docs_per_s="100", ratio="0.750")
    assert line == ("RESULT stitch_chunks docs=900 docs_per_s=75 baseline_docs_per_s=100 "
                    "ratio=0.750 isa=avx2")


def _plan(**changes):
    plan = {"shards": [{"name": "shard-00000", "rows": 4, "tokens": 99}], "rows_in": 3,
            "prompt_rows": 4, "quarantined": 1, "quarantine_reasons": {"null text": 1},
            "seed_tokens": 50, "covered_tokens": 50, "chunked_documents": 0, "chunks": 0}
    return {**plan, **changes}


def test_the_two_sides_must_agree_and_chunk_nothing(bench):
    assert bench.problems(_plan(), _plan()) == []
    assert bench.problems(_plan(chunked_documents=1, chunks=3), _plan()) == [
        "chunking on cut 1 documents: the corpus needs chunks"]
    assert bench.problems(_plan(), _plan(covered_tokens=40)) == ["covered_tokens: on 50 off 40"]
    assert bench.problems(_plan(), _plan(shards=[])) == ["the shards differ"]
