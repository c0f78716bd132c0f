"""``synthfactory crawl`` against a real S3 protocol: moto server over HTTP, real boto3."""

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest

from synthfactory.cli import build_parser
from synthfactory.crawl import command
from synthfactory.errors import SynthfactoryError
from tests.support.paths import ROOT
from tests.support.wire_faults import WireFaults

BUCKET = "crawl-corpus"
DAYS = [f"2026-11-{d:02d}" for d in range(1, 31)]  # 30 prefixes
PER_DAY = 100
DAY = ["--interval-start", "2026-11-29T00:00:00+00:00",
       "--interval-end", "2026-11-30T00:00:00+00:00"]


def crawl(*argv: str) -> dict:
    parser = build_parser("crawl")  # the steps table's flags, as the CLI parses them
    return command.run(parser.parse_args(list(argv)))


def keys_of(folder) -> list[str]:
    return pq.read_table(str(folder), columns=["key"])["key"].to_pylist()


@pytest.fixture(scope="module")
def corpus(crawl_s3):
    """3,000 objects over 30 daily prefixes, plus markers and strays that must not count."""
    crawl_s3.create_bucket(BUCKET)
    keys = [f"corpus/dt={day}/part-{i:05d}.parquet" for day in DAYS for i in range(PER_DAY)]
    crawl_s3.seed(BUCKET, keys, body=b"0123456789")
    crawl_s3.seed(BUCKET, [f"corpus/dt={day}/_SUCCESS" for day in DAYS[:3]])
    crawl_s3.seed(BUCKET, ["corpus-other/dt=2026-11-29/part-00000.parquet"])  # sibling prefix
    return [f"s3://{BUCKET}/{k}" for k in keys]


def test_every_key_exactly_once_none_missing(corpus, tmp_path):
    summary = crawl("--source", f"s3://{BUCKET}/corpus", "--out", str(tmp_path / "m"),
                    "--workers", "4", "--max-keys", "40", "--rows-per-part", "500")
    keys = keys_of(tmp_path / "m")
    assert len(keys) == len(set(keys))
    assert sorted(keys) == sorted(corpus)
    assert summary["objects"] == 3000 and summary["bytes"] == 30_000
    assert summary["partitions"] == 30 and summary["skipped"] == {"not_suffix": 3}
    # 1 delimiter listing of the root + 3 continuation-token pages for each of 30 prefixes
    assert summary["requests"] == 1 + 30 * 3


def test_page_size_is_capped_at_1000_even_though_moto_is_not(crawl_s3, tmp_path):
    crawl_s3.create_bucket("crawl-flat")
    crawl_s3.seed("crawl-flat", [f"k/{i:05d}.parquet" for i in range(2500)])
    summary = crawl("--source", "s3://crawl-flat/k", "--out", str(tmp_path / "m"),
                    "--fanout-depth", "0", "--max-keys", "5000")
    assert summary["objects"] == 2500 and summary["requests"] == 3  # 1000 + 1000 + 500


def test_daily_run_lists_only_its_partition(corpus, tmp_path):
    summary = crawl("--source", f"s3://{BUCKET}/corpus", "--out", str(tmp_path / "m"),
                    "--partition-template", "dt={ds}", *DAY)
    table = pq.read_table(str(tmp_path / "m"))
    assert table.column_names == ["key", "size", "etag", "last_modified", "dt"]
    assert sorted(table["key"].to_pylist()) == [k for k in corpus if "dt=2026-11-29/" in k]
    assert set(table["dt"].to_pylist()) == {"2026-11-29"}
    assert summary["requests"] == 1  # one targeted page, not a relisting of the source


def test_backfill_fanout_and_targeted_listing_agree(corpus, tmp_path):
    week = ["--interval-start", "2026-11-03T00:00:00Z", "--interval-end", "2026-11-10T00:00:00Z"]
    targeted = crawl("--source", f"s3://{BUCKET}/corpus", "--out", str(tmp_path / "a"),
                     "--partition-template", "dt={ds}", *week)
    # the same selection by fanning out over everything and filtering each key
    both = crawl("--source", f"s3://{BUCKET}/corpus", "--out", str(tmp_path / "b"),
                 "--partition-template", "dt={ds}", "--scope", "both",
                 "--interval-start", "2026-11-03T00:00:00Z",
                 "--interval-end", "2026-11-10T00:00:00Z")
    assert targeted["objects"] == 700 and targeted["partitions"] == 7
    assert sorted(keys_of(tmp_path / "a")) == sorted(
        k for k in corpus if any(f"dt=2026-11-{d:02d}/" in k for d in range(3, 10)))
    # "both" also demands LastModified inside the window: seeded today, so none qualify
    assert both["objects"] == 0 and both["skipped"]["outside_modified_window"] == 700


def test_last_modified_window(crawl_s3, tmp_path):
    crawl_s3.create_bucket("crawl-mtime")
    crawl_s3.seed("crawl-mtime", ["x/a.parquet", "x/b.parquet"],
                  last_modified=datetime(2026, 11, 29, 12, tzinfo=UTC))
    crawl_s3.seed("crawl-mtime", ["x/c.parquet"], last_modified=datetime(2026, 11, 28, tzinfo=UTC))
    summary = crawl("--source", "s3://crawl-mtime/x", "--out", str(tmp_path / "m"), *DAY)
    assert sorted(keys_of(tmp_path / "m")) == ["s3://crawl-mtime/x/a.parquet",
                                               "s3://crawl-mtime/x/b.parquet"]
    assert summary["scope"] == "last-modified"


def test_a_run_of_503_slowdown_is_retried(corpus, crawl_s3, tmp_path, monkeypatch):
    # every other request answered 503 until 12 are spent: each page is retried once
    with WireFaults(crawl_s3.port, fail_first=12, every=2) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        summary = crawl("--source", f"s3://{BUCKET}/corpus", "--out", str(tmp_path / "m"),
                        "--workers", "4", "--retry-mode", "standard", "--request-attempts", "8")
    assert proxy.throttled == 12
    assert summary["retries"] == 12
    assert sorted(keys_of(tmp_path / "m")) == sorted(corpus)


def test_endless_throttling_gives_up_with_a_clear_error(crawl_s3, tmp_path, monkeypatch):
    with WireFaults(crawl_s3.port, fail_first=10**6) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        with pytest.raises(SynthfactoryError, match=r"still throttled \(SlowDown\) after 2 "):
            crawl("--source", f"s3://{BUCKET}/corpus", "--out", str(tmp_path / "m"),
                  "--retry-mode", "standard", "--request-attempts", "2")
    assert proxy.throttled == 2  # one try and one retry: --request-attempts counts them all


def test_missing_bucket(crawl_s3, tmp_path):
    with pytest.raises(SynthfactoryError, match="s3://crawl-absent/x/: bucket 'crawl-absent' "
                                                "does not exist"):
        crawl("--source", "s3://crawl-absent/x", "--out", str(tmp_path / "m"))


def test_access_denied(crawl_s3, tmp_path, monkeypatch):
    # moto does not enforce IAM; the proxy answers the exact 403 body S3 sends
    with WireFaults(crawl_s3.port, deny=True) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        with pytest.raises(SynthfactoryError, match=f"s3://{BUCKET}/corpus/: access denied"):
            crawl("--source", f"s3://{BUCKET}/corpus", "--out", str(tmp_path / "m"))


def test_empty_prefix_is_an_empty_manifest_and_a_warning(corpus, tmp_path):
    summary = crawl("--source", f"s3://{BUCKET}/nothing-here", "--out", str(tmp_path / "m"))
    assert keys_of(tmp_path / "m") == []
    assert summary["warnings"] == [f"s3://{BUCKET}/nothing-here: no objects in scope; "
                                   "the manifest is empty"]


def test_resume_after_sigkill_lists_the_rest_once(corpus, crawl_s3, tmp_path):
    out = tmp_path / "m"
    argv = ["--source", f"s3://{BUCKET}/corpus", "--out", str(out), "--workers", "2",
            "--max-keys", "25", "--rows-per-part", "100"]
    full = crawl(*argv[:4], "--out", str(tmp_path / "full"), *argv[6:])
    with WireFaults(crawl_s3.port, delay_s=0.02) as proxy:  # slow enough to kill midway
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint, "PYTHONPATH": str(ROOT)}
        child = subprocess.Popen([sys.executable, "-m", "synthfactory.cli", "crawl", *argv],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        checkpoint = out / "_CHECKPOINT.json"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            if checkpoint.exists() and json.loads(checkpoint.read_text())["parts_written"] >= 10:
                break
            time.sleep(0.01)
        assert child.poll() is None, "the crawl finished before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert not (out / "_SUMMARY.json").exists()
    resumed = crawl(*argv)
    keys = keys_of(out)
    assert len(keys) == len(set(keys)) == 3000
    assert sorted(keys) == sorted(corpus)
    assert resumed["resumed"] is True and resumed["objects"] == 3000
    assert resumed["requests_this_run"] < full["requests"] - 30  # did not relist everything
