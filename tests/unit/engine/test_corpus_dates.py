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
