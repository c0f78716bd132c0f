"""The one reader of a run folder's JSON files, for the engine and the Airflow plugin.

The caller brings the I/O: ``read_json(url)`` returns the parsed file, or None when it
does not exist (yet). The engine passes ``synthfactory.storage.read_json_or_none``
(pyarrow filesystems); the Airflow plugin passes plain file I/O and boto3, as the
API server has no pyarrow. Parquet files are the engine's business, not this module's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from synthfactory.contract import paths
from synthfactory.contract.report_shapes import (
    ReportJson,
)
from synthfactory.contract.run_format import RunFiles, ShardFiles, upgrade, upgrade_shard
from synthfactory.contract.shapes import (
    CommittedJson,
    JoinedJson,
    ManifestSummary,
    ShardEntry,
    ShardsJson,
    ValidationJson,
)

ReadJson = Callable[[str], Any]

# Why a file is absent, named after the DAG task that writes it.
NOT_WRITTEN = {
    paths.MANIFEST_SUMMARY: "crawl_metadata has not finished",
    paths.SHARDS_JSON: "stitch_prompts has not finished",
    paths.COMMITTED: "shard.rephrase is running or failed",
    paths.VALIDATION: "shard.validate has not finished",
    paths.JOINED_SUMMARY: "join_chunks has not finished",
    paths.REPORT_JSON: "the run is in progress, or failed before write_report",
}


def not_written(path: str, kind: str | None = None) -> str:
    """``prompts/shards.json: not written (stitch_prompts has not finished)``."""
    return f"{path}: not written ({NOT_WRITTEN[kind or path]})"


class RunFolder:
    def __init__(self, run_url: str, read_json: ReadJson):
        self.run_url = run_url.rstrip("/")
        self._read_json = read_json

    def url(self, path: str) -> str:
        return f"{self.run_url}/{path}"

    def _read(self, path: str) -> Any:
        return self._read_json(self.url(path))

    def manifest_summary(self) -> ManifestSummary | None:
        return cast(ManifestSummary | None, self._read(paths.MANIFEST_SUMMARY))

    def shards_plan(self) -> ShardsJson | None:
        return cast(ShardsJson | None, self._read(paths.SHARDS_JSON))

    def commit(self, shard: str) -> CommittedJson | None:
        return cast(CommittedJson | None, self._read(paths.commit(shard)))

    def validation(self, shard: str) -> ValidationJson | None:
        return cast(ValidationJson | None, self._read(paths.validation(shard)))

    def joined(self) -> JoinedJson | None:
        return cast(JoinedJson | None, self._read(paths.JOINED_SUMMARY))

    def report(self) -> ReportJson | None:
        return cast(ReportJson | None, self._read(paths.REPORT_JSON))

    def shard(self, entry: ShardEntry) -> ShardFiles:
        """One shard's JSON files so far, in the current shape (``upgrade_shard``): for a
        reader of a few shards, where ``read`` would read them all."""
        name = entry["name"]
        return upgrade_shard(ShardFiles(entry, self.commit(name), self.validation(name)))

    def read(self) -> RunFiles:
        """Whatever stage the run reached: absent files become ``missing`` lines; a folder
        of an older format comes back upgraded to the current shape (``upgrade``)."""
        missing = []
        manifest = self.manifest_summary()
        if manifest is None:
            missing.append(not_written(paths.MANIFEST_SUMMARY))
        plan = self.shards_plan()
        if plan is None:
            missing.append(not_written(paths.SHARDS_JSON))
        shards = []
        for entry in (plan or {}).get("shards") or []:
            name = entry["name"]
            shard = ShardFiles(entry, self.commit(name), self.validation(name))  # upgraded below
            if shard.commit is None:
                missing.append(not_written(paths.commit(name), paths.COMMITTED))
            if shard.validation is None:
                missing.append(not_written(paths.validation(name), paths.VALIDATION))
            shards.append(shard)
        joined = self.joined()
        if joined is None and plan is not None:  # as the shards' lines: once there is a plan
            missing.append(not_written(paths.JOINED_SUMMARY))
        return upgrade(RunFiles(manifest, plan, tuple(shards), tuple(missing), joined))
