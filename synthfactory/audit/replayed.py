"""Each replayed attempt against its origin (docs/adr/0150): the origin commit still
holds (its parts hash to its checksum) and its attempt has the same request key and
output, word for word. An origin that is gone (its run folder deleted since) cannot be
compared: counted apart, not a problem, since a replayed attempt's output is in this
run's own parts and its commit's checksum covers it."""

from __future__ import annotations

import pyarrow as pa

from synthfactory.audit.report import AuditReport
from synthfactory.rephrase.replay import origin as origins


class OriginCache:
    """Each origin loaded and checked once per audit."""

    def __init__(self):
        self.loaded: dict[tuple[str, str, str], origins.Origin | None] = {}

    def get(self, run: str, shard: str, commit: str) -> origins.Origin | None:
        key = (run, shard, commit)
        if key not in self.loaded:
            self.loaded[key] = origins.load(run, shard, commit)
        return self.loaded[key]


def audit_replayed(name: str, attempts: list[pa.Table], report: AuditReport,
                   cache: OriginCache) -> None:
    for table in attempts:
        if "replayed_from" not in table.column_names:
            continue
        rows = table.select(["row", "attempt", "output_text", "request_key",
                             "replayed_from"]).to_pylist()
        for row in rows:
            if row["replayed_from"] is None:
                continue
            report.replayed += 1
            _, part, origin_row, attempt, commit = origins.parse_locator(row["replayed_from"])
            run, shard = origins.run_and_shard(row["replayed_from"])
            origin = cache.get(run, shard, commit)
            found = origin.attempt(part, origin_row, attempt) if origin else None
            if origin is None:
                report.replay_origins_gone += 1
            elif (found is None or found["output_text"] != row["output_text"]
                  or found.get("request_key") != row["request_key"]):
                report.problems.append(
                    f"{name}: row {row['row']} attempt {row['attempt']} was replayed from "
                    f"{row['replayed_from']}, whose attempt "
                    + ("is not there" if found is None else "differs"))
