"""The gate over an Arrow table: columns in, the same rows plus verdict columns out."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from synthfactory.errors import PermanentError
from synthfactory.quality.gate import SCORE_COLUMNS, Row, Verdict, assess, score_columns
from synthfactory.quality_bounds import Bounds

REQUIRED = ("id", "source_text", "output_text", "finish_reason")
OPTIONAL = ("template",)
# a qa_pairs template's parsed pairs (null for every other template): quality/domain.py
QA_PAIRS = pa.list_(pa.struct([("question", pa.string()), ("answer", pa.string())]))
VERDICT_FIELDS = [pa.field("usable", pa.bool_()), pa.field("reasons", pa.list_(pa.string())),
                  pa.field("clean_text", pa.string()), pa.field("qa_pairs", QA_PAIRS)]
# each verdict's grounding scores (quality/grounding.py; null where not scored) and both
# texts' word counts, in the gate's order: what a team thresholds on later
_SCORE_TYPES = {"invented_terms": pa.list_(pa.string()), "repeated_sentences": pa.int32(),
                "source_words": pa.int32(), "output_words": pa.int32()}
SCORE_FIELDS = [pa.field(name, _SCORE_TYPES.get(name, pa.float64())) for name in SCORE_COLUMNS]


def check_columns(table: pa.Table, source: str) -> None:
    """One line naming the first missing or mistyped column."""
    for name in REQUIRED + OPTIONAL:
        if name not in table.column_names:
            if name in OPTIONAL:
                continue
            raise PermanentError(f"{source}: missing column {name!r} "
                                 f"(columns: {table.column_names})")
        kind = table.schema.field(name).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_null(kind)):
            raise PermanentError(f"{source}: column {name!r} must be string, got {kind}")


def verdicts_of(table: pa.Table, bounds_for: Callable[[str | None], Bounds],
                duplicate_jaccard: float) -> list[Verdict]:
    return assess(rows_of(table), bounds_for, duplicate_jaccard)


def rows_of(table: pa.Table) -> list[Row]:
    columns = {name: table.column(name).to_pylist() for name in REQUIRED}
    templates = (table.column("template").to_pylist() if "template" in table.column_names
                 else [None] * table.num_rows)
    return [Row(columns["source_text"][i] or "", columns["output_text"][i] or "",
                columns["finish_reason"][i], templates[i]) for i in range(table.num_rows)]


def with_verdicts(table: pa.Table, verdicts: list[Verdict]) -> pa.Table:
    scores = score_columns(rows_of(table), verdicts)
    values = [[v.usable for v in verdicts], [v.reasons for v in verdicts],
              [v.clean_text for v in verdicts], [v.qa_pairs for v in verdicts],
              *(scores[f.name] for f in SCORE_FIELDS)]
    for field, column in zip(VERDICT_FIELDS + SCORE_FIELDS, values, strict=True):
        if field.name in table.column_names:  # re-gating a gated table replaces its verdicts
            table = table.drop_columns([field.name])
        table = table.append_column(field, pa.array(column, type=field.type))
    return table
