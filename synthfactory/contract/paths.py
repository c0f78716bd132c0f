"""Where each step writes inside a run folder, relative to the run URL
``{root}/{pipeline}/{interval}`` (docs/contracts.md, "Storage").

Relative paths only, joined with ``/``: the engine joins them with
``synthfactory.storage``, the Airflow plugin with plain strings.
"""

from __future__ import annotations

import re

MANIFEST = "manifest"
SUMMARY_NAME = "_SUMMARY.json"  # crawl's summary, beside the manifest parts
MANIFEST_SUMMARY = f"{MANIFEST}/{SUMMARY_NAME}"
PROMPTS = "prompts"
SHARDS_JSON = f"{PROMPTS}/shards.json"
PROMPT_TEMPLATES = f"{PROMPTS}/templates"  # stitch's copy of each template it used, {id}.json
GENERATED = "generated"
COMMITTED = "_COMMITTED.json"  # written last: its presence means the shard is done
VALIDATION = "validation"
VERDICTS = "verdicts"  # the quality gate's verdict per generated row (validate)
REJECTED = "rejected"  # the rows the gate rejected, readable with their reasons
JOINED = "joined"  # one row per document and template, its chunks' outputs in order (join)
JOINED_NAME = "_JOINED.json"  # join's summary, written last: the joined parts are complete
JOINED_SUMMARY = f"{JOINED}/{JOINED_NAME}"
QUARANTINE = "quarantine"
STITCH_QUARANTINE = f"{QUARANTINE}/stitch"
REPHRASE_QUARANTINE = f"{QUARANTINE}/rephrase"
# every attempt of every row, the chosen and the rejected ones (rephrase; docs/adr/0141)
ATTEMPTS = "attempts"
REPORT = "report"
REPORT_JSON = f"{REPORT}/report.json"
STALE = "stale"  # outputs of older prompts, set aside (docs/adr/0055)
# beside a pipeline's run folders, {root}/{pipeline}/replay_index: what every run of the
# pipeline committed, by request key (synthfactory/rephrase/replay, docs/adr/0150)
REPLAY_INDEX = "replay_index"
STORAGE_RETRIES = "storage_retries"  # each step's storage retries by cause (ADR 0155)
SMOKE_SUMMARY = "smoke/summary.json"  # the smoke test's summary (smoke --output)
CARD = "card/README.md"  # the run's dataset card (card; docs/export.md)

SHARD_NAME = re.compile(r"shard-(\d{5,})")  # a prompt shard's name, without .parquet
PART_NAME = re.compile(r"part-(\d{5,})\.parquet")


def join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p)


def shard_name(index: int) -> str:
    return f"shard-{index:05d}"


def part_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def prompt_shard(index: int) -> str:
    return join(PROMPTS, f"{shard_name(index)}.parquet")


def generated_shard(shard: str) -> str:
    return join(GENERATED, shard)


def commit(shard: str) -> str:
    return join(GENERATED, shard, COMMITTED)


def validation(shard: str) -> str:
    return join(VALIDATION, f"{shard}.json")


def verdicts(shard: str) -> str:
    return join(VERDICTS, f"{shard}.parquet")


def rejected(shard: str) -> str:
    return join(REJECTED, f"{shard}.parquet")


def joined(shard: str) -> str:
    """The joined rows of the documents whose last chunk is in ``shard``."""
    return join(JOINED, f"{shard}.parquet")


def rephrase_quarantine(shard: str) -> str:
    return join(REPHRASE_QUARANTINE, shard)


def attempts(shard: str) -> str:
    return join(ATTEMPTS, shard)


def stale_shard(shard: str, stamp: str) -> str:
    return join(STALE, shard, stamp)
