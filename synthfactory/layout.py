"""The URLs of one pipeline run's files: one prefix per run, so a backfill rerun of the
same interval writes the same keys. The names are the contract's
(``synthfactory.contract.paths``); this joins them with ``synthfactory.storage``."""

from __future__ import annotations

from dataclasses import dataclass

from synthfactory import storage
from synthfactory.contract import paths


@dataclass(frozen=True)
class RunLayout:
    run_url: str  # {root}/{pipeline}/{interval}

    def url(self, path: str) -> str:
        """The URL of a path relative to the run (one of ``contract.paths``)."""
        return storage.join(self.run_url, path)

    @property
    def manifest(self) -> str:
        return self.url(paths.MANIFEST)

    @property
    def manifest_summary(self) -> str:
        return self.url(paths.MANIFEST_SUMMARY)

    @property
    def prompts(self) -> str:
        return self.url(paths.PROMPTS)

    @property
    def shards_json(self) -> str:
        return self.url(paths.SHARDS_JSON)

    @property
    def prompt_templates(self) -> str:
        return self.url(paths.PROMPT_TEMPLATES)

    @property
    def generated(self) -> str:
        return self.url(paths.GENERATED)

    @property
    def quarantine(self) -> str:
        return self.url(paths.QUARANTINE)

    @property
    def stitch_quarantine(self) -> str:
        return self.url(paths.STITCH_QUARANTINE)

    @property
    def validation(self) -> str:
        return self.url(paths.VALIDATION)

    def prompt_shard(self, index: int) -> str:
        return self.url(paths.prompt_shard(index))

    def generated_shard(self, index: int) -> str:
        return self.url(paths.generated_shard(paths.shard_name(index)))

    def shard_output(self, shard: str) -> str:
        return self.url(paths.generated_shard(shard))

    def commit(self, shard: str) -> str:
        return self.url(paths.commit(shard))

    def shard_validation(self, shard: str) -> str:
        return self.url(paths.validation(shard))

    def shard_verdicts(self, shard: str) -> str:
        return self.url(paths.verdicts(shard))

    def shard_rejected(self, shard: str) -> str:
        return self.url(paths.rejected(shard))

    def rephrase_quarantine(self, shard: str) -> str:
        return self.url(paths.rephrase_quarantine(shard))

    def shard_attempts(self, shard: str) -> str:
        return self.url(paths.attempts(shard))


def shard_name(shard_url: str) -> str:
    """``.../prompts/shard-00003.parquet`` -> ``shard-00003``."""
    return shard_url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".parquet")


def run_url_of_shard(shard_url: str) -> str:
    """``{run}/prompts/shard-00003.parquet`` -> ``{run}``."""
    return shard_url.rstrip("/").rsplit("/", 2)[0]
