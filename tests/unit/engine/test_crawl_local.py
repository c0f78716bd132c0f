"""``synthfactory crawl`` over a file:// corpus, the embedded default the demo DAG runs."""

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory.cli import build_parser, main
from synthfactory.crawl import command
from synthfactory.errors import EXIT_PERMANENT, PermanentError, SynthfactoryError

DAY = ["--interval-start", "2026-11-29T00:00:00+00:00",
       "--interval-end", "2026-11-30T00:00:00+00:00"]


def crawl(*argv: str) -> dict:
    parser = build_parser("crawl")  # the steps table's flags, as the CLI parses them
    return command.run(parser.parse_args(list(argv)))


def manifest(folder) -> pa.Table:
    return pq.read_table(str(folder))  # the way Spark and pyarrow read the folder


@pytest.fixture
def corpus(tmp_path):
    """Seed-corpus layout: {corpus}/dt=YYYY-MM-DD/part-NNNNN.parquet (columns id, text)."""
    root = tmp_path / "corpus"
    for day in ("2026-11-28", "2026-11-29", "2026-11-30"):
        for part in range(3):
            folder = root / f"dt={day}"
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({"id": [f"{day}-{part}"], "text": ["t"]}),
                           folder / f"part-{part:05d}.parquet")
    (root / "dt=2026-11-29" / "_SUCCESS").write_text("")
    return root


def test_demo_command_selects_the_interval_day_with_full_file_urls(corpus, tmp_path):
    out = tmp_path / "run" / "manifest"
    summary = crawl("--source", f"file://{corpus}", "--out", f"file://{out}",
                    "--partition-template", "dt={ds}", *DAY)
    table = manifest(out)
    assert table.column_names == ["key", "size", "etag", "last_modified", "dt"]
    expected = [f"file://{corpus}/dt=2026-11-29/part-0000{i}.parquet" for i in range(3)]
    assert sorted(table["key"].to_pylist()) == expected
    assert set(table["dt"].to_pylist()) == {"2026-11-29"}
    # the keys are readable parquet files: what the stitch step does next
    assert pq.read_table(expected[0][len("file://"):]).column_names == ["id", "text"]
    assert table["size"].to_pylist() == [os.path.getsize(k[7:]) for k in table["key"].to_pylist()]
    on_disk = json.loads((out / "_SUMMARY.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    assert summary["objects"] == 3 and summary["partitions"] == 1
    assert summary["bytes"] == sum(table["size"].to_pylist())
    assert summary["skipped"] == {"not_suffix": 1}  # _SUCCESS is counted, not dropped silently
    assert not (out / "_CHECKPOINT.json").exists()


def test_without_interval_every_object_once_across_many_small_parts(corpus, tmp_path):
    out = tmp_path / "m"
    summary = crawl("--source", str(corpus), "--out", str(out), "--partition-template",
                    "dt={ds}", "--rows-per-part", "2", "--max-keys", "1", "--workers", "3")
    keys = manifest(out)["key"].to_pylist()
    assert len(keys) == len(set(keys)) == 9
    assert summary["parts"] == 5 and summary["partitions"] == 3


def test_rerun_into_the_same_folder_leaves_no_stale_parts(corpus, tmp_path):
    out = tmp_path / "m"
    crawl("--source", str(corpus), "--out", str(out), "--rows-per-part", "1", "--max-keys", "1")
    assert len(list(out.glob("part-*.parquet"))) == 9
    crawl("--source", str(corpus), "--out", str(out), "--partition-template", "dt={ds}", *DAY)
    assert len(list(out.glob("part-*.parquet"))) == 1
    assert manifest(out).num_rows == 3


def test_last_modified_window_scopes_without_a_template(corpus, tmp_path):
    old = corpus / "dt=2026-11-28" / "part-00000.parquet"
    inside = 1_764_400_000  # 2025-11-29T07:06:40Z
    for path in corpus.rglob("*.parquet"):
        os.utime(path, (inside, inside))
    os.utime(old, (inside - 86_400, inside - 86_400))
    summary = crawl("--source", str(corpus), "--out", str(tmp_path / "m"),
                    "--interval-start", "2025-11-29T00:00:00Z",
                    "--interval-end", "2025-11-30T00:00:00Z")
    keys = manifest(tmp_path / "m")["key"].to_pylist()
    assert len(keys) == 8 and f"file://{old}" not in keys
    assert summary["skipped"]["outside_modified_window"] == 1


def test_an_interval_without_its_partition_fails_naming_it_and_how_to_create_it(tmp_path):
    (tmp_path / "empty" / "dt=2026-11-28").mkdir(parents=True)  # another day only
    (tmp_path / "empty" / "dt=2026-11-28" / "part-0.parquet").write_bytes(b"x")
    with pytest.raises(PermanentError) as raised:
        crawl("--source", str(tmp_path / "empty"), "--out", str(tmp_path / "m"),
              "--partition-template", "dt={ds}", *DAY)
    message = str(raised.value)
    assert f"expected file://{tmp_path}/empty/dt=2026-11-29/ holding *.parquet files" in message
    assert "[2026-11-29T00:00:00+00:00, 2026-11-30T00:00:00+00:00)" in message
    assert f"synthfactory corpus --out file://{tmp_path}/empty --end-date 2026-11-29" in message
    # through the console script: one line, the non-retryable exit code
    code = main(["crawl", "--source", str(tmp_path / "empty"), "--out", str(tmp_path / "m"),
                 "--partition-template", "dt={ds}", *DAY])
    assert code == EXIT_PERMANENT


def test_empty_source_gives_an_empty_manifest_with_columns_and_a_warning(tmp_path):
    (tmp_path / "empty").mkdir()
    summary = crawl("--source", str(tmp_path / "empty"), "--out", str(tmp_path / "m"),
                    "--partition-template", "dt={ds}", *DAY, "--allow-missing-partition")
    table = manifest(tmp_path / "m")
    assert table.num_rows == 0 and table.column_names[-1] == "dt"
    assert summary["objects"] == 0 and "manifest is empty" in summary["warnings"][0]


def test_keys_outside_the_template_are_reported(corpus, tmp_path):
    (corpus / "stray.parquet").write_bytes(b"x")
    summary = crawl("--source", str(corpus), "--out", str(tmp_path / "m"),
                    "--partition-template", "dt={ds}")
    assert summary["skipped"]["unmatched_template"] == 1
    assert "stray.parquet" in summary["warnings"][0]


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--source", "file:///no/such/corpus"], "file:///no/such/corpus: no such folder"),
        (["--source", "ftp://host/x"], "unsupported URL scheme"),
        (["--partition-template", "dt={date}"], "unknown placeholder {date}"),
        (["--scope", "partition"], "needs --partition-template"),
    ],
)
def test_bad_input_is_a_clear_error(corpus, tmp_path, argv, problem):
    base = {"--source": str(corpus), "--out": str(tmp_path / "m")}
    pairs = dict(zip(argv[::2], argv[1::2], strict=True))
    full = [x for k, v in {**base, **pairs}.items() for x in (k, v)]
    with pytest.raises(SynthfactoryError, match=problem.replace("{", r"\{").replace("}", r"\}")):
        crawl(*full)


def test_zero_workers_is_refused_while_parsing(corpus, tmp_path, capsys):
    with pytest.raises(SystemExit):  # argparse's error, before anything is listed
        crawl("--source", str(corpus), "--out", str(tmp_path / "m"), "--workers", "0")
    assert "argument --workers: must be at least 1, got 0" in capsys.readouterr().err


def test_cli_prints_the_error_and_exits_3(tmp_path, capsys):
    code = main(["crawl", "--source", str(tmp_path / "absent"), "--out", str(tmp_path / "m")])
    assert code == EXIT_PERMANENT  # an absent folder is absent on the retry too
    assert f"file://{tmp_path}/absent: no such folder" in capsys.readouterr().err
