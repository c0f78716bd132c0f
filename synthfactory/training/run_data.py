"""Read a run's joined rows (docs/contracts.md) for the smoke test: one row per document
and template, a chunked document's outputs joined back (``synthfactory join``), so the
lengths are those a training job reading the table meets.

Only the parts ``joined/_JOINED.json`` lists count: a part left by an earlier join, or
anything else under ``joined/``, is skipped. Every joined row counts, usable or not, as
every generated row did before the join: the smoke test checks lengths and packing,
not the quality gate.
"""

from __future__ import annotations

import numpy as np

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.errors import SynthfactoryError


def joined_parts(run_url: str) -> list[str]:
    summary = storage.run_folder(run_url).joined()
    if summary is None:
        raise SynthfactoryError(
            f"{run_url}: no {paths.JOINED_SUMMARY}; run `synthfactory join --run {run_url}` "
            "first")
    parts = [storage.join(run_url, paths.JOINED, p["name"]) for p in summary["parts"]
             if p["rows"]]
    if not parts:
        raise SynthfactoryError(f"{run_url}: {paths.JOINED_SUMMARY} lists no joined rows")
    return parts


def _column(run_url: str, name: str) -> list:
    values: list = []
    for url in joined_parts(run_url):
        table = storage.read_table(url)
        if name not in table.column_names:
            raise SynthfactoryError(f"{url}: missing column {name!r}")
        values.extend(table.column(name).to_pylist())
    return values


def read_output_lengths(run_url: str) -> np.ndarray:
    """Token lengths of the joined outputs; empty outputs (0 tokens) are left out."""
    raw = np.array([v for v in _column(run_url, "output_tokens") if v is not None], dtype=np.int64)
    lengths = raw[raw > 0]
    if lengths.size == 0:
        raise SynthfactoryError(f"{run_url}: every joined output has 0 tokens")
    return lengths


def read_output_texts(run_url: str) -> list[str]:
    return [t for t in _column(run_url, "output_text") if t]
