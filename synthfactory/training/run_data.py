"""Read a run's generated parts (docs/contracts.md) for the smoke test.

Only ``generated/shard-XXXXX/part-KKKKK.parquet`` files count: manifests, quarantine
parts and anything else under ``generated/`` are skipped by name.
"""

from __future__ import annotations

import numpy as np

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.errors import SynthfactoryError


def generated_parts(run_url: str) -> list[str]:
    root = storage.join(run_url, paths.GENERATED)
    parts = [
        url
        for url in storage.list_files(root, suffix=".parquet")
        if url.rsplit("/", 1)[-1].startswith("part-")
    ]
    if not parts:
        raise SynthfactoryError(
            f"{run_url}: no generated parts under {root}/shard-*/part-*.parquet"
        )
    return parts


def _column(run_url: str, name: str) -> list:
    values: list = []
    for url in generated_parts(run_url):
        table = storage.read_table(url)
        if name not in table.column_names:
            raise SynthfactoryError(f"{url}: missing column {name!r}")
        values.extend(table.column(name).to_pylist())
    return values


def read_output_lengths(run_url: str) -> np.ndarray:
    """Token lengths of the generated outputs; empty outputs (0 tokens) are left out."""
    raw = np.array([v for v in _column(run_url, "output_tokens") if v is not None], dtype=np.int64)
    lengths = raw[raw > 0]
    if lengths.size == 0:
        raise SynthfactoryError(f"{run_url}: every generated output has 0 tokens")
    return lengths


def read_output_texts(run_url: str) -> list[str]:
    return [t for t in _column(run_url, "output_text") if t]
