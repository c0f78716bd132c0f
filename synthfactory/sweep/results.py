"""The sweep's folder (``--out``): one JSON record per trial as it finishes
(``trials/{key}-r{round}.json``, so a crash mid-sweep keeps what was measured and a
rerun reuses it), the sample it was measured on (``sweep.json``), and
``results.parquet``."""

from __future__ import annotations

import json

import pyarrow as pa

from synthfactory import storage
from synthfactory.errors import SynthfactoryError

SCHEMA = pa.schema([
    ("key", pa.string()), ("label", pa.string()), ("role", pa.string()),
    ("round", pa.int64()), ("config", pa.string()), ("grid_config", pa.string()),
    ("status", pa.string()), ("error_kind", pa.string()),
    ("error", pa.string()), ("device", pa.string()), ("startup_s", pa.float64()),
    ("warmup_s", pa.float64()), ("generation_s", pa.float64()), ("requests", pa.int64()),
    ("prompt_tokens", pa.int64()), ("output_tokens", pa.int64()),
    ("output_tokens_per_s", pa.float64()), ("prompt_tokens_per_s", pa.float64()),
    ("peak_rss_mb", pa.float64()), ("cpu_share", pa.float64()),
    ("cost_per_billion_output_tokens", pa.float64()),
    ("engine_args", pa.string()), ("effective", pa.string()), ("wall_s", pa.float64()),
])
JSON_COLUMNS = ("config", "grid_config", "engine_args", "effective")


class SweepFolder:
    def __init__(self, out_url: str):
        self.url = storage.normalize(out_url)

    def trial_url(self, key: str, round_: int) -> str:
        return storage.join(self.url, "trials", f"{key}-r{round_}.json")

    def log_url(self, key: str, round_: int) -> str:
        return storage.join(self.url, "logs", f"{key}-r{round_}.log")

    @property
    def table_url(self) -> str:
        return storage.join(self.url, "results.parquet")

    @property
    def png_url(self) -> str:
        return storage.join(self.url, "sweep.png")

    @property
    def winner_url(self) -> str:
        return storage.join(self.url, "winner.json")

    def claim(self, sample: dict) -> None:
        """Results are only comparable on one sample and one set of candidates: refuse
        to resume into a folder measured on another shard, model, row count, token
        budget or grid."""
        url = storage.join(self.url, "sweep.json")
        if storage.exists(url):
            earlier = storage.read_json(url)
            changed = {k: (earlier.get(k), v) for k, v in sample.items() if earlier.get(k) != v}
            if changed:
                detail = "; ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in changed.items())
                raise SynthfactoryError(f"--out {self.url}: holds a sweep of another sample "
                                        f"or grid ({detail}); use a new --out")
            return
        storage.write_json(url, sample)

    def load(self, key: str, round_: int) -> dict | None:
        url = self.trial_url(key, round_)
        return storage.read_json(url) if storage.exists(url) else None

    def save(self, record: dict, log: bytes | None = None) -> None:
        if log is not None:
            storage.write_bytes(self.log_url(record["key"], record["round"]), log)
        storage.write_json(self.trial_url(record["key"], record["round"]), record)

    def write_table(self, records: list[dict]) -> None:
        rows = [{name: _cell(record.get(name), name) for name in SCHEMA.names}
                for record in records]
        storage.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), self.table_url)


def _cell(value, name: str):
    if name in JSON_COLUMNS:
        return None if value is None else json.dumps(value, sort_keys=True)
    return value
