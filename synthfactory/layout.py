"""The storage layout of one pipeline run (DESIGN.md): one prefix per run, so a
backfill rerun of the same interval writes the same keys."""

from __future__ import annotations

from dataclasses import dataclass

from synthfactory import storage


@dataclass(frozen=True)
class RunLayout:
    run_url: str  # {root}/{pipeline}/{interval}

    @classmethod
    def for_interval(cls, root: str, pipeline: str, interval: str) -> RunLayout:
        return cls(storage.join(root, pipeline, interval))

    @property
    def manifest(self) -> str:
        return storage.join(self.run_url, "manifest")

    @property
    def prompts(self) -> str:
        return storage.join(self.run_url, "prompts")

    @property
    def shards_json(self) -> str:
        return storage.join(self.prompts, "shards.json")

    @property
    def generated(self) -> str:
        return storage.join(self.run_url, "generated")

    @property
    def quarantine(self) -> str:
        return storage.join(self.run_url, "quarantine")

    @property
    def validation(self) -> str:
        return storage.join(self.run_url, "validation")

    def prompt_shard(self, index: int) -> str:
        return storage.join(self.prompts, f"shard-{index:05d}.parquet")

    def generated_shard(self, index: int) -> str:
        return storage.join(self.generated, f"shard-{index:05d}")


def shard_name(shard_url: str) -> str:
    """``.../prompts/shard-00003.parquet`` -> ``shard-00003``."""
    return shard_url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".parquet")


def run_url_of_shard(shard_url: str) -> str:
    """``{run}/prompts/shard-00003.parquet`` -> ``{run}``."""
    return shard_url.rstrip("/").rsplit("/", 2)[0]
