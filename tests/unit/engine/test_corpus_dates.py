"""The demo corpus ends yesterday by default: the day that a daily run triggered today
(from the UI or `make demo`) reads, on any date."""

from datetime import UTC, datetime, timedelta

from synthfactory.cli import main


def test_default_end_date_is_yesterday_in_utc(tmp_path):
    before = datetime.now(UTC).date()
    assert main(["corpus", "--out", f"file://{tmp_path}", "--days", "2",
                 "--docs-per-day", "1"]) == 0
    after = datetime.now(UTC).date()  # the test may straddle midnight
    days = sorted(p.name for p in tmp_path.glob("dt=*"))
    assert days in [[f"dt={d - timedelta(days=2)}", f"dt={d - timedelta(days=1)}"]
                    for d in {before, after}]


def test_long_documents_are_whole_module_guides_with_headings(tmp_path):
    """`--long-docs-per-day`: the demo's documents longer than its window, one a day,
    each a module's documentation with a heading per class and function: a public
    module's, a different module each day."""
    import pyarrow.parquet as pq

    assert main(["corpus", "--out", f"file://{tmp_path}", "--days", "2", "--docs-per-day",
                 "3", "--long-docs-per-day", "1", "--end-date", "2026-11-30"]) == 0
    modules = []
    for day in ("2026-11-29", "2026-11-30"):
        rows = pq.read_table(tmp_path / f"dt={day}" / "part-00000.parquet").to_pylist()
        assert len(rows) == 4
        *short, guide = rows
        assert all(len(r["text"]) <= 2500 for r in short)
        assert guide["id"].endswith(".guide") and 9000 <= len(guide["text"]) <= 14000
        module = guide["id"].split("-", 1)[1].removesuffix(".guide")
        assert not module.startswith("_") and "._" not in module, module  # public only
        assert guide["text"].startswith(f"# {module}\n\n")
        assert guide["text"].count("\n## ") >= 3  # the sections the chunker cuts on
        modules.append(module)
    assert modules[0] != modules[1], modules  # each day its own long document
