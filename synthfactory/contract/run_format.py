"""The run folder's format, and the one place an older folder's facts are upgraded.

Each step writes its JSON files in the shape ``shapes`` states today. A folder written
by an older engine lacks keys the steps added since; the readers read it all the same
(a run of last month still gets its report, its audit and its register check). They
do so through ``upgrade`` alone (``upgrade_shard`` for one shard): ``RunFolder.read``
and ``RunFolder.shard`` call it, so every reader of a run folder (the report, the Run
report view, register's check, audit, lineage) sees the current shape, with None or
{} where an older engine wrote nothing, and a line in ``outdated`` where the gap needs
a step rerun. No other module asks which format a folder is in
(tests/unit/engine/test_run_format.py fails when one does; docs/adr/0146).

The formats below, oldest first, are each named for what the next one added.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from synthfactory.contract import paths
from synthfactory.contract.shapes import (
    CommittedJson,
    JoinedJson,
    ManifestSummary,
    ShardEntry,
    ShardsJson,
    ValidationJson,
)

BEFORE_THE_GATE = 1  # validation files without quality verdicts, no verdicts/ (ADR 0113)
BEFORE_THE_JOIN = 2  # no joined/ folder (ADR 0136)
BEFORE_DOMAINS = 3  # joined/_JOINED.json without by_domain (ADR 0139)
BEFORE_ATTEMPTS = 4  # commits without attempts, a join without its attempt counts (0141)
BEFORE_DECONTAMINATION = 5  # quality counts without contaminated_by (ADR 0142)
BEFORE_GROUNDING = 6  # verdicts without grounding scores, a join without grounding (0148)
BEFORE_REPLAY = 7  # commits without replay counts, attempts without request keys (0150)
RUN_FORMAT = 8  # this engine's: shards.json names it (``run_format``), stitch writes it

# Keys a join from before attempts lacks, and what a reader takes them to be: every
# usable row made at its first attempt counts under no attempt (the join did not count).
_JOIN_BEFORE_ATTEMPTS = {"usable_at_attempt": {}, "chunked_usable": None,
                         "chunked_saved": None, "trimmed": None}


# A run folder's files as RunFolder reads them (run_folder.py re-exports both): they live
# here, with the formats they are upgraded from, so neither module imports the other's.
@dataclass(frozen=True)
class ShardFiles:
    """One shard of the plan with the JSON its steps wrote so far (None: not yet)."""

    entry: ShardEntry
    commit: CommittedJson | None
    validation: ValidationJson | None

    @property
    def name(self) -> str:
        return self.entry["name"]


@dataclass(frozen=True)
class RunFiles:
    """Every JSON file of a run, and one ``missing`` line per file not written yet; in
    the current shape once ``RunFolder.read`` has upgraded it (``upgrade`` below)."""

    manifest: ManifestSummary | None
    plan: ShardsJson | None
    shards: tuple[ShardFiles, ...]
    missing: tuple[str, ...]
    joined: JoinedJson | None = None  # join_chunks' summary, once every group is done
    format: int = RUN_FORMAT  # the format the folder was written in (below)
    outdated: tuple[str, ...] = ()  # one line per file an older engine left short


def pre_gate(path: str) -> str:
    """The ``outdated`` line of a validation file written before the quality gate."""
    return (f"{path}: no quality verdicts (validated before the quality gate; "
            "rerun shard.validate)")


def folder_format(files: RunFiles) -> int:
    """The format the folder was written in: shards.json's ``run_format``, else the
    oldest format whose gap the files show. A run still going reads as the format of
    what it has written so far (a pre-marker run before its join reads BEFORE_THE_JOIN)."""
    plan = files.plan or {}
    if "run_format" in plan:
        return int(plan["run_format"])
    validations = [s.validation for s in files.shards if s.validation is not None]
    commits = [s.commit for s in files.shards if s.commit is not None]
    joined = files.joined
    if any("quality" not in v for v in validations):
        return BEFORE_THE_GATE
    if plan and joined is None:
        return BEFORE_THE_JOIN
    if joined is not None and "by_domain" not in joined:
        return BEFORE_DOMAINS
    if any("attempts" not in c for c in commits) or (
            joined is not None and "usable_at_attempt" not in joined):
        return BEFORE_ATTEMPTS
    if any("contaminated_by" not in v["quality"] for v in validations):
        return BEFORE_DECONTAMINATION
    if joined is not None and "grounding" not in joined:
        return BEFORE_GROUNDING
    if any("replay" not in c for c in commits):
        return BEFORE_REPLAY
    return RUN_FORMAT


def upgrade(files: RunFiles) -> RunFiles:
    """The folder's facts in the current shape, whatever format wrote them:

    - a validation file from before the gate: ``quality`` None, and an ``outdated``
      line naming the file (its shard needs shard.validate again);
    - quality counts from before decontamination: ``contaminated_by`` {};
    - a commit from before attempts: ``attempts`` None (one attempt a row); from before
      replay: ``replay`` None (nothing replayed: every attempt was generated);
    - a join from before domains: ``by_domain`` {}; from before attempts: no attempt
      counts (``usable_at_attempt`` {}, the chunked and trimmed counts None); from
      before grounding scores: ``grounding`` None.

    A folder from before the join has no joined summary, as a run still going: None."""
    shards = tuple(upgrade_shard(s) for s in files.shards)
    outdated = tuple(pre_gate(paths.validation(s.name)) for s in shards
                     if s.validation is not None and s.validation["quality"] is None)
    joined = files.joined
    if joined is not None:
        joined = {**_JOIN_BEFORE_ATTEMPTS, "by_domain": {}, "grounding": None, **joined}
    return replace(files, shards=shards, joined=joined, format=folder_format(files),
                   outdated=outdated)


def upgrade_shard(shard: ShardFiles) -> ShardFiles:
    """One shard's files in the current shape, as ``upgrade`` makes them (its first step,
    alone for a reader of a few shards: ``RunFolder.shard``). Upgrading twice changes
    nothing."""
    commit, validation = shard.commit, shard.validation
    if commit is not None:
        commit = {"attempts": None, "replay": None, **commit}
    if validation is not None:
        quality = validation.get("quality")
        if quality is not None:
            quality = {"contaminated_by": {}, **quality}
        validation = {**validation, "quality": quality}
    return replace(shard, commit=commit, validation=validation)


def registered_rows(lineage: dict[str, Any]) -> int:
    """The rows a lineage row of the catalog's runs table registered: ``rows_registered``;
    a run registered before the quality gate has none, and registered every generated
    row."""
    registered = lineage.get("rows_registered")
    return int(lineage.get("rows_generated") or 0) if registered is None else int(registered)
