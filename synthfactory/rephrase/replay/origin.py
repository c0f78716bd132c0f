"""An index entry's origin: the committed shard it points to, found and checked.

The origin is found where its commit is: the shard's own folders while that commit is
the live one, else the folder the stale-input guard set it aside to
(``{run}/stale/{shard}/{stamp}/``, docs/adr/0055), which is where a corrected
partition's previous outputs are when its shard is regenerated. It is used only when
its parts still hash to the checksum of the commit the entry names: a part edited,
torn or deleted since makes every entry of that origin unusable.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.errors import SynthfactoryError
from synthfactory.layout import RunLayout
from synthfactory.rephrase.fingerprint import output_checksum

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Folders:
    generated: str
    quarantine: str
    attempts: str


@dataclass
class Origin:
    run: str
    shard: str
    commit: str
    folders: Folders
    # (part, row, attempt) -> the attempt's row as committed
    attempts: dict[tuple[str, int, int], dict] = field(default_factory=dict, repr=False)

    def attempt(self, part: str, row: int, attempt: int) -> dict | None:
        return self.attempts.get((part, row, attempt))

    def locator(self, part: str, row: int, attempt: int) -> str:
        """Where a replayed attempt came from, as its attempt row records it: the origin
        shard's attempts folder *as committed* (a set-aside moves it; ``find`` finds it
        again by the commit checksum after ``#``)."""
        folder = RunLayout(self.run).shard_attempts(self.shard)
        return (f"{storage.join(folder, part)}#row={row}&attempt={attempt}"
                f"&commit={self.commit}")


def locate(run: str, shard: str, commit: str) -> tuple[Folders, dict] | None:
    """The folders holding the commit whose output checksum is ``commit``, and it."""
    layout = RunLayout(run)
    live = storage.read_json_or_none(layout.commit(shard))
    if live is not None and live.get("output_checksum") == commit:
        return Folders(layout.shard_output(shard), layout.rephrase_quarantine(shard),
                       layout.shard_attempts(shard)), live
    stale = storage.join(run, paths.STALE, shard)
    for url in storage.list_files(stale, suffix=paths.COMMITTED):
        if not url.endswith(f"/{paths.GENERATED}/{paths.COMMITTED}"):
            continue
        moved = storage.read_json_or_none(url)
        if moved is not None and moved.get("output_checksum") == commit:
            base = url[: -len(f"/{paths.GENERATED}/{paths.COMMITTED}")]
            return Folders(storage.join(base, paths.GENERATED),
                           storage.join(base, paths.QUARANTINE),
                           storage.join(base, paths.ATTEMPTS)), moved
    return None


def load(run: str, shard: str, commit: str) -> Origin | None:
    """The origin with its attempts, or None (with a line saying why) when it is gone or
    its parts no longer hash to the commit's checksum."""
    where = locate(run, shard, commit)
    if where is None:
        log.warning("replay: %s of %s (commit %s) is gone: its entries are not used",
                    shard, run, commit[:19])
        return None
    folders, committed = where
    generated, quarantined, tried = [], [], []
    try:
        for part in sorted(p["name"] for p in committed.get("parts", [])):
            generated.append(storage.read_table(storage.join(folders.generated, part)))
            for folder, tables in ((folders.quarantine, quarantined),
                                   (folders.attempts, tried)):
                url = storage.join(folder, part)
                if storage.exists(url):
                    table = storage.read_table(url)
                    tables.append(table.append_column("part", [[part] * table.num_rows])
                                  if folder == folders.attempts else table)
    except SynthfactoryError as exc:
        log.warning("replay: %s of %s is unreadable (%s): its entries are not used",
                    shard, run, exc)
        return None
    if output_checksum(generated, quarantined, [t.drop_columns(["part"]) for t in tried]) \
            != commit:
        log.warning("replay: %s of %s no longer hashes to its commit %s: its entries are "
                    "not used", shard, run, commit[:19])
        return None
    origin = Origin(run, shard, commit, folders)
    for table in tried:
        for row in table.to_pylist():
            origin.attempts[(row["part"], row["row"], row["attempt"])] = row
    return origin


def parse_locator(locator: str) -> tuple[str, str, int, int, str]:
    """(attempts part URL as committed, part, row, attempt, commit) of a locator."""
    url, _, query = locator.partition("#")
    fields = dict(item.split("=", 1) for item in query.split("&"))
    return url, url.rsplit("/", 1)[-1], int(fields["row"]), int(fields["attempt"]), \
        fields["commit"]


def run_and_shard(locator: str) -> tuple[str, str]:
    """The origin's run URL and shard name: ``{run}/attempts/{shard}/{part}#...``."""
    attempts_folder = parse_locator(locator)[0].rsplit("/", 1)[0]
    run, _, shard = attempts_folder.rsplit("/", 2)
    return run, shard
