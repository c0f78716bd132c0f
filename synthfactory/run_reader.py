"""Read a run's committed shards and refuse a run whose counts do not add up.

Everything a registration trusts is checked here, before anything is written: every
shard of ``prompts/shards.json`` has its ``_COMMITTED.json``, each commit's counts
add up (rows_in = rows_generated + rows_quarantined; rows_in is the prompt shard's
size; its parts hold rows_generated rows, read from the parquet footers), the
validation stats cover every generated row, the shards' rows_in sum to the run's
prompt rows, and each commit was made from the prompt shard as it is now (its prompt
checksum), so outputs of an older edition of the day are never registered. All
problems are reported together, so one rerun can fix them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.parquet as pq

from synthfactory import storage
from synthfactory.contract import CommittedJson, ShardFiles, ShardsJson, ValidationJson
from synthfactory.contract.paths import COMMITTED
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.layout import RunLayout
from synthfactory.rephrase.fingerprint import prompt_checksum

_MAX_PROBLEMS_SHOWN = 20


@dataclass(frozen=True)
class CommittedShard:
    name: str
    commit_url: str
    commit: CommittedJson
    validation: ValidationJson  # {} when missing (a problem already reported)
    part_urls: tuple[str, ...]
    verdicts_url: str = ""  # the quality gate's verdict of each generated row

    @property
    def rows_generated(self) -> int:
        return int(self.commit["rows_generated"])

    @property
    def rows_usable(self) -> int:
        return int((self.validation.get("quality") or {}).get("usable", 0))


@dataclass(frozen=True)
class CommittedRun:
    run_url: str
    shards_json: ShardsJson
    shards: tuple[CommittedShard, ...]

    def total(self, key: str) -> int | float:
        """Sum of a numeric ``_COMMITTED.json`` field over the shards (missing counts 0)."""
        return sum(shard.commit.get(key) or 0 for shard in self.shards)

    @property
    def part_urls(self) -> list[str]:
        return [url for shard in self.shards for url in shard.part_urls]


def read_committed_run(run_url: str, step: str = "register") -> CommittedRun:
    folder = storage.run_folder(run_url)
    layout = RunLayout(folder.run_url)
    shards_json = folder.shards_plan()
    if shards_json is None:
        raise SynthfactoryError(
            f"{layout.shards_json}: not found; is {layout.run_url} a run folder that "
            "`synthfactory stitch` has written?"
        )
    entries = shards_json.get("shards") or []
    if not entries:
        raise SynthfactoryError(f"{layout.shards_json}: lists no shards, nothing to register")

    uncommitted, problems, shards = [], [], []
    for entry in entries:
        files = folder.shard(entry)  # in the current shape, whatever engine wrote it
        if files.commit is None:
            uncommitted.append(entry["name"])
            continue
        shard, shard_problems = _read_shard(layout, files, files.commit)
        shards.append(shard)
        problems += shard_problems

    if uncommitted:
        problems.insert(
            0,
            f"{len(uncommitted)} of {len(entries)} shards are not committed (no {COMMITTED} "
            f"under {layout.generated}): {', '.join(uncommitted)}; "
            "finish `synthfactory rephrase` for them first",
        )
    else:
        rows_in = sum(int(s.commit["rows_in"]) for s in shards)
        prompt_rows = shards_json.get("prompt_rows")
        if prompt_rows is not None and rows_in != int(prompt_rows):
            problems.append(
                f"{layout.shards_json}: counts do not add up: the shards' rows_in sum to "
                f"{rows_in} but prompt_rows is {prompt_rows}"
            )
    if problems:
        shown = problems[:_MAX_PROBLEMS_SHOWN]
        if len(problems) > len(shown):
            shown.append(f"... and {len(problems) - len(shown)} more")
        # one problem, one line (docs/bad-inputs.md); several, one line each
        sep = "\n  " if len(shown) > 1 else " "
        raise PermanentError(f"refusing to {step} {layout.run_url}:{sep}" + sep.join(shown))
    return CommittedRun(layout.run_url, shards_json, tuple(shards))


def _read_shard(layout: RunLayout, files: ShardFiles,
                commit: CommittedJson) -> tuple[CommittedShard, list[str]]:
    entry, name = files.entry, files.name
    commit_url = layout.commit(name)
    problems = []
    missing = [
        k for k in ("rows_in", "rows_generated", "rows_quarantined", "parts") if k not in commit
    ]
    if missing:
        problems.append(f"{commit_url}: missing field(s) {', '.join(missing)}")
        return CommittedShard(name, commit_url, commit, {}, ()), problems

    rows_in, generated = int(commit["rows_in"]), int(commit["rows_generated"])
    quarantined = int(commit["rows_quarantined"])
    if rows_in != generated + quarantined:
        problems.append(
            f"{commit_url}: counts do not add up: rows_in {rows_in} != rows_generated "
            f"{generated} + rows_quarantined {quarantined}"
        )
    if "rows" in entry and rows_in != int(entry["rows"]):
        problems.append(
            f"{commit_url}: counts do not add up: rows_in {rows_in} but shards.json lists "
            f"{entry['rows']} prompt rows for {name}"
        )

    if "url" in entry:
        current = prompt_checksum(storage.read_table(entry["url"]))
        if commit.get("prompt_checksum") != current:
            problems.append(
                f"{commit_url}: stale: committed from prompts {commit.get('prompt_checksum')} "
                f"but {entry['url']} is now {current}; rerun `synthfactory rephrase` for {name}"
            )

    part_urls = []
    listed_rows = 0
    for part in commit["parts"]:
        url = storage.join(layout.shard_output(name), part["name"])
        part_urls.append(url)
        listed_rows += int(part["rows"])
        actual = _parquet_rows(url)
        if actual is None:
            problems.append(f"{url}: listed in {COMMITTED} but missing or unreadable")
        elif actual != int(part["rows"]):
            problems.append(f"{url}: holds {actual} rows but {COMMITTED} lists {part['rows']}")
    if listed_rows != generated:
        problems.append(
            f"{commit_url}: counts do not add up: parts list {listed_rows} rows but "
            f"rows_generated is {generated}"
        )

    validation_url = layout.shard_validation(name)
    validation = files.validation
    if validation is None:
        problems.append(f"{validation_url}: not found; run `synthfactory validate` first")
    elif int(validation.get("rows", -1)) != generated:
        problems.append(
            f"{validation_url}: counts do not add up: validated {validation.get('rows')} "
            f"rows but {name} generated {generated}"
        )
    verdicts_url = layout.shard_verdicts(name)
    verdict_rows = _parquet_rows(verdicts_url)
    # quality None: validated before the gate (contract/run_format.py)
    if validation is not None and (verdict_rows is None or validation["quality"] is None):
        problems.append(f"{verdicts_url}: not found; the shard was validated before the "
                        "quality gate: run `synthfactory validate` for it again")
    elif verdict_rows is not None and verdict_rows != generated:
        problems.append(f"{verdicts_url}: counts do not add up: {verdict_rows} verdicts but "
                        f"{name} generated {generated}")
    shard = CommittedShard(name, commit_url, commit, validation or {}, tuple(part_urls),
                           verdicts_url)
    return shard, problems


def _parquet_rows(url: str) -> int | None:
    """Row count from the parquet footer alone (no data read)."""
    fs, path = storage.filesystem(url)
    try:
        with fs.open_input_file(path) as handle:
            return pq.ParquetFile(handle).metadata.num_rows
    except (FileNotFoundError, OSError, ValueError):
        return None
