"""Partition templates and data intervals: what a scheduled run or a backfill selects."""

from datetime import UTC, datetime

import pytest

from synthfactory.crawl.interval import Interval, PartitionTemplate
from synthfactory.errors import SynthfactoryError


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_daily_run_selects_exactly_its_day():
    template = PartitionTemplate("dt={ds}")
    interval = Interval.parse("2026-11-29T00:00:00+00:00", "2026-11-30T00:00:00+00:00")
    assert [template.render(s) for s in template.spans(interval)] == ["dt=2026-11-29/"]


def test_backfill_spans_every_day_and_hourly_run_lands_in_its_day():
    template = PartitionTemplate("dt={ds}")
    week = Interval.parse("2026-11-01T00:00:00Z", "2026-11-08T00:00:00Z")
    assert [template.render(s) for s in template.spans(week)] == [
        f"dt=2026-11-0{d}/" for d in range(1, 8)
    ]
    hour = Interval.parse("2026-11-29T06:00:00+00:00", "2026-11-29T07:00:00+00:00")
    assert [template.render(s) for s in template.spans(hour)] == ["dt=2026-11-29/"]


def test_offsets_are_converted_to_utc():
    # 01:00 in UTC+02:00 is 23:00 the day before in UTC
    interval = Interval.parse("2026-11-30T01:00:00+02:00", "2026-11-30T02:00:00+02:00")
    assert interval.start == utc(2026, 11, 29, 23)
    assert PartitionTemplate("dt={ds}").render(interval.start) == "dt=2026-11-29/"


def test_hive_columns_and_values_from_a_nested_template():
    template = PartitionTemplate("year={yyyy}/month={mm}/day={dd}/hour={hh}")
    assert template.columns == ["year", "month", "day", "hour"]
    values, start = template.match("year=2026/month=11/day=29/hour=05/part-0.parquet")
    assert values == ("2026", "11", "29", "05")
    assert start == utc(2026, 11, 29, 5)
    assert template.render(start) == "year=2026/month=11/day=29/hour=05/"


def test_non_hive_segment_uses_the_placeholder_name():
    template = PartitionTemplate("{ds_nodash}")
    assert template.columns == ["ds_nodash"]
    assert template.match("20261129/a.parquet") == (("20261129",), utc(2026, 11, 29))


@pytest.mark.parametrize(
    "key",
    [
        "dt=2026-13-45/part.parquet",  # not a date
        "dt=2026-11-29",  # no object below the partition
        "other/dt=2026-11-29/part.parquet",  # not at the top of the source
        "dt=2026-11-29x/part.parquet",
    ],
)
def test_keys_outside_the_template_do_not_match(key):
    assert PartitionTemplate("dt={ds}").match(key) is None


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("dt={ds", "expected '}'"),
        ("dt={day}", "unknown placeholder {day}"),
        ("dt={ds:%Y}", "unknown placeholder"),
        ("dt=static", "needs a full date"),
        ("year={yyyy}/month={mm}", "needs a full date"),
        ("a={ds}/b={ds}", "appears twice"),
        ("", "empty"),
    ],
)
def test_malformed_templates_are_named_in_the_error(template, problem):
    with pytest.raises(SynthfactoryError, match="partition template") as error:
        PartitionTemplate(template)
    assert problem in str(error.value)


@pytest.mark.parametrize(
    ("start", "end", "problem"),
    [
        ("2026-11-29", None, "go together"),
        ("yesterday", "2026-11-30", "'yesterday': not an ISO-8601"),
        ("2026-11-30", "2026-11-29", "end must come after the start"),
    ],
)
def test_bad_intervals(start, end, problem):
    with pytest.raises(SynthfactoryError, match=problem):
        Interval.parse(start, end)
