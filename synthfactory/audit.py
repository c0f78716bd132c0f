"""``synthfactory audit``: check one run end to end, from seed documents to catalog rows.

Each check reads what the steps wrote, not their summaries:
- every document of the manifest's files is in the prompts or the stitch quarantine;
- every prompt row is in exactly one generated or rephrase-quarantine row of a commit;
- no (id, template) appears twice in the run's outputs;
- each commit's prompt checksum matches its prompt shard now, and its output checksum
  matches its parts (a part swapped or edited after the commit is caught);
- every generated row has the quality gate's verdict (verdicts/); the rejected ones are
  counted apart;
- the catalog's rows of the run are exactly the usable rows (every generated row when
  the run was registered with ``--include-rejected``).

Every prompt row ends in exactly one of registered, rejected and quarantined.

Every discrepancy is printed, and the command exits 3 when there is any. The last line
is ``RESULT audit docs_in=... prompt_rows=... generated=... quarantined=... rejected=...
registered=... lost=... duplicated=... stale=...`` (``registered=unchecked`` without a
catalog).
"""

from __future__ import annotations

import argparse
import logging
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from synthfactory import storage
from synthfactory.catalog import config
from synthfactory.contract import RunFolder
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.layout import RunLayout
from synthfactory.rephrase.fingerprint import output_checksum, prompt_checksum

log = logging.getLogger(__name__)

_MAX_SHOWN = 50


@dataclass
class AuditReport:
    run_url: str
    docs_in: int = 0
    prompt_rows: int = 0
    generated: int = 0
    quarantined: int = 0
    rejected: int = 0  # generated rows the quality gate rejected
    registered: int | None = None
    lost: int = 0
    duplicated: int = 0
    stale: int = 0
    problems: list[str] = field(default_factory=list)

    def result_line(self) -> str:
        registered = "unchecked" if self.registered is None else self.registered
        return (f"RESULT audit docs_in={self.docs_in} prompt_rows={self.prompt_rows} "
                f"generated={self.generated} quarantined={self.quarantined} "
                f"rejected={self.rejected} registered={registered} lost={self.lost} "
                f"duplicated={self.duplicated} stale={self.stale}")

    def summary(self) -> dict:
        keys = ("run_url", "docs_in", "prompt_rows", "generated", "quarantined", "rejected",
                "registered", "lost", "duplicated", "stale")
        return {k: getattr(self, k) for k in keys} | {"problems": len(self.problems),
                                                      "clean": not self.problems}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, help="run URL: {root}/{pipeline}/{interval}")
    parser.add_argument("--table", help="NAMESPACE.TABLE the run was registered into; "
                                        "with it the catalog rows are checked too")
    parser.add_argument("--id-column", default="id", help="document id column of the seeds")
    config.add_catalog_arguments(parser)


def run(args: argparse.Namespace) -> dict:
    settings = config.settings_from_args(args) if args.table else None
    report = audit(args.run, args.table, settings, args.id_column)
    for problem in report.problems[:_MAX_SHOWN]:
        print(f"audit: {problem}")
    if len(report.problems) > _MAX_SHOWN:
        print(f"audit: ... and {len(report.problems) - _MAX_SHOWN} more")
    print(report.result_line(), flush=True)
    if report.problems:
        raise PermanentError(  # a retry would read the same files
            f"{report.run_url}: {len(report.problems)} discrepancy(ies), first: "
            f"{report.problems[0]}")
    return report.summary()


def audit(run_url: str, table: str | None = None,
          settings: config.CatalogSettings | None = None, id_column: str = "id") -> AuditReport:
    folder = storage.run_folder(run_url)
    layout = RunLayout(folder.run_url)
    report = AuditReport(layout.run_url)
    shards_json = folder.shards_plan()
    if shards_json is None:
        raise SynthfactoryError(f"{layout.shards_json}: not found; is {layout.run_url} a run "
                                "folder that `synthfactory stitch` has written?")
    entries = shards_json.get("shards") or []
    prompt_ids: set[str] = set()
    keys: Counter = Counter()  # (id, template_id) over all outputs
    committed_rows: list[tuple] = []  # (shard, id, template_id, row) of generated rows
    rejected_rows: set[tuple] = set()  # the same, of the rows the quality gate rejected
    for entry in entries:
        prompts = storage.read_table(entry["url"])
        report.prompt_rows += prompts.num_rows
        # a chunk's row has its own id; its document's is doc_id (stitch/chunks.py)
        prompt_ids.update(prompts.column("doc_id" if "doc_id" in prompts.column_names
                                         else "id").to_pylist())
        _audit_shard(folder, layout, entry["name"], prompts, report, keys, committed_rows)
        _audit_verdicts(layout, entry["name"], committed_rows, rejected_rows, report)
    for (doc_id, template), n in keys.items():
        if n > 1:
            report.duplicated += n - 1
            report.problems.append(f"({doc_id}, {template}) appears {n} times in the outputs")
    _audit_documents(layout, prompt_ids, id_column, report)
    if table:
        _audit_catalog(layout.run_url, table, settings, committed_rows, rejected_rows, report)
    return report


def _audit_verdicts(layout: RunLayout, name: str, committed_rows: list[tuple],
                    rejected_rows: set[tuple], report: AuditReport) -> None:
    """One verdict per generated row of the shard; its rejected rows counted apart."""
    generated = {r for r in committed_rows if r[0] == name}
    if not generated:
        return
    url = layout.shard_verdicts(name)
    if not storage.exists(url):
        report.problems.append(f"{url}: not found: {len(generated)} generated row(s) of {name} "
                               "have no quality verdict; run `synthfactory validate` for it")
        return
    verdicts = storage.read_table(url, columns=["id", "template_id", "row", "usable"])
    keys = [(name, *key) for key in zip(*(verdicts.column(c).to_pylist()
                                         for c in ("id", "template_id", "row")), strict=True)]
    if Counter(keys) != Counter(generated):
        report.problems.append(f"{url}: its verdicts are not the generated rows of {name} "
                               f"({len(keys)} verdicts, {len(generated)} generated rows)")
    for key, usable in zip(keys, verdicts.column("usable").to_pylist(), strict=True):
        if not usable and key in generated:
            rejected_rows.add(key)
            report.rejected += 1


def _audit_shard(folder: RunFolder, layout: RunLayout, name: str, prompts: pa.Table,
                 report: AuditReport, keys: Counter, committed_rows: list[tuple]) -> None:
    out_url = layout.shard_output(name)
    quarantine_url = layout.rephrase_quarantine(name)
    commit = folder.commit(name)
    if commit is None:
        report.lost += prompts.num_rows
        report.problems.append(f"{name}: not committed ({layout.commit(name)} missing): "
                               f"{prompts.num_rows} prompt rows have no output")
        return
    current = prompt_checksum(prompts)
    if commit.get("prompt_checksum") != current:
        report.stale += 1
        report.problems.append(
            f"{name}: stale: committed from prompts {commit.get('prompt_checksum')} but the "
            f"prompt shard is now {current}; rerun `synthfactory rephrase` for it")
    listed = {p["name"] for p in commit.get("parts", [])}
    generated, quarantined = [], []
    for part in sorted(listed):
        generated.append(_read(storage.join(out_url, part), report))
        q_url = storage.join(quarantine_url, part)
        if storage.exists(q_url):
            quarantined.append(_read(q_url, report))
    for url in storage.list_files(out_url, suffix=".parquet"):
        if url.rsplit("/", 1)[-1] not in listed:
            report.problems.append(f"{url}: a part that {name}'s commit does not list")
    generated = [t for t in generated if t is not None]
    quarantined = [t for t in quarantined if t is not None]
    if commit.get("output_checksum") != output_checksum(generated, quarantined):
        report.stale += 1
        report.problems.append(f"{name}: its parts changed after the commit (output checksum "
                               f"{commit.get('output_checksum')} does not match the files)")

    ids = prompts.column("id").to_pylist()
    templates = prompts.column("template_id").to_pylist()
    seen: Counter = Counter()
    for tables, kind in ((generated, "generated"), (quarantined, "quarantined")):
        for t in tables:
            for doc_id, template, row in zip(t.column("id").to_pylist(),
                                             t.column("template_id").to_pylist(),
                                             t.column("row").to_pylist(), strict=True):
                seen[row] += 1
                keys[(doc_id, template)] += 1
                if not 0 <= row < len(ids) or (ids[row], templates[row]) != (doc_id, template):
                    report.problems.append(f"{name}: {kind} row {row} ({doc_id}, {template}) "
                                           "is not that row of the prompt shard")
                if kind == "generated":
                    report.generated += 1
                    committed_rows.append((name, doc_id, template, row))
                else:
                    report.quarantined += 1
    missing = [r for r in range(len(ids)) if seen[r] == 0]
    twice = {r: n for r, n in seen.items() if n > 1}
    report.lost += len(missing)
    if missing:
        report.problems.append(f"{name}: {len(missing)} prompt row(s) in no output, e.g. "
                               f"rows {missing[:5]}")
    if twice:
        report.duplicated += sum(n - 1 for n in twice.values())
        report.problems.append(f"{name}: {len(twice)} prompt row(s) in more than one output, "
                               f"e.g. rows {sorted(twice)[:5]}")


def _audit_documents(layout: RunLayout, prompt_ids: set[str], id_column: str,
                     report: AuditReport) -> None:
    """Each seed document is a prompt or a stitch quarantine row, each only once."""
    files = sorted({key for url in storage.list_files(layout.manifest, suffix=".parquet")
                    for key in storage.read_table(url, columns=["key"]).column(0).to_pylist()})
    quarantined: Counter = Counter()
    for url in storage.list_files(layout.stitch_quarantine, suffix=".parquet"):
        t = storage.read_table(url, columns=["source", "source_row"])
        quarantined.update(zip(t.column(0).to_pylist(), t.column(1).to_pylist(), strict=True))
    kept: Counter = Counter()
    for key in files:
        ids = storage.read_table(key, columns=[id_column]).column(0).cast(pa.string())
        for row, doc_id in enumerate(ids.to_pylist()):
            report.docs_in += 1
            if quarantined.pop((key, row), 0):
                continue
            if doc_id in prompt_ids:
                kept[doc_id] += 1
            else:
                report.lost += 1
                report.problems.append(f"{key} row {row} (id {doc_id}): neither in the prompts "
                                       "nor in the stitch quarantine")
    for doc_id, n in kept.items():
        if n > 1:  # stitch keeps one copy of an id and quarantines the others
            report.lost += n - 1
            report.problems.append(f"id {doc_id}: {n} documents but one prompt set and no "
                                   "quarantine row for the others")
    for doc_id in sorted(prompt_ids - set(kept))[:_MAX_SHOWN]:
        report.stale += 1
        report.problems.append(f"prompt id {doc_id}: not a document of the manifest "
                               "(prompts stitched from other seeds?)")
    for key, row in quarantined:
        report.problems.append(f"stitch quarantine row for {key} row {row}: not a document of "
                               "the manifest")


def _audit_catalog(run_url: str, table: str, settings, committed_rows: list[tuple],
                   rejected_rows: set[tuple], report: AuditReport) -> None:
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.expressions import And, EqualTo

    from synthfactory.catalog.command import runs_table_of

    catalog = config.open_catalog(settings)
    try:
        try:
            rows = catalog.load_table(table).scan(
                row_filter=EqualTo("run_url", run_url),
                selected_fields=("shard", "id", "template_id", "row")).to_arrow()
        except NoSuchTableError:
            rows = pa.table({"shard": [], "id": [], "template_id": [], "row": []})
        try:
            lineage = catalog.load_table(runs_table_of(table)).scan(
                row_filter=And(EqualTo("run_url", run_url), EqualTo("table_name", table)),
                selected_fields=("rows_generated", "rows_registered",
                                 "include_rejected")).to_arrow()
        except NoSuchTableError:
            lineage = pa.table({"rows_generated": pa.array([], pa.int64()),
                                "rows_registered": pa.array([], pa.int64()),
                                "include_rejected": pa.array([], pa.bool_())})
    finally:
        config.close_catalog(catalog)
    # a run registered before the quality gate registered every generated row
    lineage_rows = [generated if registered is None else registered
                    for generated, registered in zip(
                        lineage.column("rows_generated").to_pylist(),
                        lineage.column("rows_registered").to_pylist(), strict=True)]
    include_rejected = any(lineage.column("include_rejected").to_pylist())
    if lineage_rows != [rows.num_rows]:
        report.problems.append(
            f"{runs_table_of(table)}: half-registered: expected one lineage row of {run_url} "
            f"for {rows.num_rows} rows, found {lineage_rows}; run `synthfactory register` again")
    registered = Counter(zip(*(rows.column(c).to_pylist()
                               for c in ("shard", "id", "template_id", "row")), strict=True))
    report.registered = rows.num_rows
    committed = Counter(r for r in committed_rows if include_rejected or r not in rejected_rows)
    unregistered = committed - registered
    extra = registered - committed
    if unregistered:
        report.lost += sum(unregistered.values())
        report.problems.append(f"{table}: {sum(unregistered.values())} usable committed "
                               f"row(s) of {run_url} are not in the table, e.g. "
                               f"{next(iter(unregistered))}")
    if extra:
        report.duplicated += sum(extra.values())
        rejected = sum(n for key, n in extra.items() if key in rejected_rows)
        what = (f" ({rejected} of them rejected by the quality gate)" if rejected else "")
        report.problems.append(f"{table}: {sum(extra.values())} row(s) of {run_url} in the "
                               f"table are not usable committed rows{what}, e.g. "
                               f"{next(iter(extra))}")


def _read(url: str, report: AuditReport) -> pa.Table | None:
    try:
        return storage.read_table(url)
    except SynthfactoryError as exc:
        report.problems.append(str(exc))
        return None
