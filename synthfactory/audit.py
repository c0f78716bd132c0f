"""``synthfactory audit``: check one run end to end, from seed documents to catalog rows.

Each check reads what the steps wrote, not their summaries:
- every document of the manifest's files is in the prompts or the stitch quarantine;
- every prompt row is in exactly one generated or rephrase-quarantine row of a commit;
- no (id, template) appears twice in the run's outputs;
- each commit's prompt checksum matches its prompt shard now, and its output checksum
  matches its parts (a part swapped or edited after the commit is caught);
- every attempt of a row is in attempts/ exactly once, numbered 1, 2, ... without a gap,
  and the generated row is the attempt marked chosen (docs/adr/0141);
- every generated row has the quality gate's verdict (verdicts/); the rejected ones are
  counted apart, and the usable ones by the attempt that made them;
- joined/ holds one row per document and template whose chunks were all generated,
  with its chunk count, usable exactly when every chunk is (docs/adr/0136); a document
  with a chunk quarantined at rephrase is left out;
- the catalog's rows of the run are exactly the usable joined rows (every joined row
  when the run was registered with ``--include-rejected``).

Every prompt row (a chunk, or a document in one piece) ends in exactly one of
generated and quarantined; every document and template in exactly one of joined and
left out; every joined row in exactly one of registered and rejected.

Every discrepancy is printed, and the command exits 3 when there is any. The last line
is ``RESULT audit docs_in=... prompt_rows=... generated=... quarantined=... rejected=...
registered=... lost=... duplicated=... stale=... joined=... left_out=... attempts=...
usable_at=1:a,2:b,...`` (``registered=unchecked`` without a catalog): ``attempts`` is every
generation the engine made, ``usable_at`` the usable rows by the attempt that made them;
the rows rejected after their last attempt are ``rejected``.
"""

from __future__ import annotations

import argparse
import logging
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from synthfactory import storage
from synthfactory.catalog import config
from synthfactory.contract import RunFolder, paths
from synthfactory.contract.run_format import registered_rows
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
    joined: int = 0  # joined rows found: one per document and template
    left_out: int = 0  # documents x templates with a chunk quarantined: nothing to join
    attempts: int = 0  # generations made, every attempt of every row
    usable_at: Counter = field(default_factory=Counter)  # attempt -> usable rows it made
    problems: list[str] = field(default_factory=list)

    def result_line(self) -> str:
        registered = "unchecked" if self.registered is None else self.registered
        return (f"RESULT audit docs_in={self.docs_in} prompt_rows={self.prompt_rows} "
                f"generated={self.generated} quarantined={self.quarantined} "
                f"rejected={self.rejected} registered={registered} lost={self.lost} "
                f"duplicated={self.duplicated} stale={self.stale} joined={self.joined} "
                f"left_out={self.left_out} attempts={self.attempts} "
                f"usable_at={self.usable_at_text()}")

    def usable_at_text(self) -> str:
        return ",".join(f"{k}:{n}" for k, n in sorted(self.usable_at.items())) or "none"

    def summary(self) -> dict:
        keys = ("run_url", "docs_in", "prompt_rows", "generated", "quarantined", "rejected",
                "registered", "lost", "duplicated", "stale", "joined", "left_out")
        return {k: getattr(self, k) for k in keys} | {
            "attempts": self.attempts,
            "usable_at": {str(k): n for k, n in sorted(self.usable_at.items())},
            "problems": len(self.problems), "clean": not self.problems}


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
    documents: dict[tuple[str, str], _Document] = {}  # (document id, template), in order
    for entry in entries:
        prompts = storage.read_table(entry["url"])
        report.prompt_rows += prompts.num_rows
        # a chunk's row has its own id; its document's is doc_id (stitch/chunks.py)
        doc_ids = prompts.column("doc_id" if "doc_id" in prompts.column_names
                                 else "id").to_pylist()
        prompt_ids.update(doc_ids)
        status = _audit_shard(folder, layout, entry["name"], prompts, report, keys,
                              committed_rows)
        _audit_verdicts(layout, entry["name"], committed_rows, rejected_rows, report)
        _add_chunks(documents, entry["name"], prompts, doc_ids, status, rejected_rows)
    for (doc_id, template), n in keys.items():
        if n > 1:
            report.duplicated += n - 1
            report.problems.append(f"({doc_id}, {template}) appears {n} times in the outputs")
    _audit_documents(layout, prompt_ids, id_column, report)
    _audit_joined(folder, layout, documents, report)
    if table:
        _audit_catalog(layout.run_url, table, settings, documents, report)
    return report


@dataclass
class _Document:
    """One document and template: its chunks' fates as the run's files tell them."""
    shard: str  # of its first chunk: the joined row's shard
    count: int  # chunks stitch cut it into
    chunks: dict[int, str] = field(default_factory=dict)  # index -> generated|quarantined
    rejected: list[int] = field(default_factory=list)

    @property
    def joinable(self) -> bool:
        return (len(self.chunks) == self.count
                and all(s == "generated" for s in self.chunks.values()))


def _add_chunks(documents: dict, name: str, prompts: pa.Table, doc_ids: list[str],
                status: dict[int, str], rejected_rows: set[tuple]) -> None:
    n = prompts.num_rows
    cols = prompts.column_names
    index = prompts.column("chunk_index").to_pylist() if "chunk_index" in cols else [0] * n
    count = prompts.column("chunk_count").to_pylist() if "chunk_count" in cols else [1] * n
    ids, templates = prompts.column("id").to_pylist(), prompts.column("template_id").to_pylist()
    for row in range(n):
        doc = documents.setdefault((doc_ids[row], templates[row]),
                                   _Document(name, int(count[row] or 1)))
        if row in status:
            doc.chunks[int(index[row] or 0)] = status[row]
        if (name, ids[row], templates[row], row) in rejected_rows:
            doc.rejected.append(int(index[row] or 0))


def _audit_joined(folder: RunFolder, layout: RunLayout, documents: dict,
                  report: AuditReport) -> None:
    """joined/ holds exactly the joinable documents, each once, as its chunks tell."""
    expected = {key: doc for key, doc in documents.items() if doc.joinable}
    report.left_out = len(documents) - len(expected)
    summary = folder.joined()
    if summary is None:
        if expected:
            report.lost += len(expected)
            report.problems.append(f"{layout.url(paths.JOINED_SUMMARY)}: not found: "
                                   f"{len(expected)} document(s) x template(s) not joined; "
                                   "run `synthfactory join`")
        return
    found: Counter = Counter()
    for part in summary.get("parts") or []:
        url = storage.join(layout.run_url, paths.JOINED, part["name"])
        t = _read(url, report)
        if t is None:
            continue
        for row in t.select(["id", "template_id", "usable", "chunk_count",
                             "rejected_chunks"]).to_pylist():
            key = (row["id"], row["template_id"])
            found[key] += 1
            report.joined += 1
            doc = expected.get(key)
            if doc is None:
                report.problems.append(f"{url}: joined row {key} is not a document whose "
                                       "chunks were all generated")
            elif (row["chunk_count"], sorted(row["rejected_chunks"] or [])) != (
                    doc.count, sorted(doc.rejected)) or row["usable"] != (not doc.rejected):
                report.problems.append(
                    f"{url}: joined row {key} says {row['chunk_count']} chunk(s), rejected "
                    f"{row['rejected_chunks']}, usable {row['usable']}; its chunks say "
                    f"{doc.count}, rejected {sorted(doc.rejected)}")
    missing = [key for key in expected if not found[key]]
    if missing:
        report.lost += len(missing)
        report.problems.append(f"joined/: {len(missing)} document(s) x template(s) whose "
                               f"chunks were all generated are not joined, e.g. {missing[0]}")
    twice = sum(n - 1 for n in found.values() if n > 1)
    if twice:
        report.duplicated += twice
        report.problems.append(f"joined/: {twice} joined row(s) more than once, e.g. "
                               f"{next(k for k, n in found.items() if n > 1)}")


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
    verdicts = storage.read_table(url)
    keys = [(name, *key) for key in zip(*(verdicts.column(c).to_pylist()
                                         for c in ("id", "template_id", "row")), strict=True)]
    if Counter(keys) != Counter(generated):
        report.problems.append(f"{url}: its verdicts are not the generated rows of {name} "
                               f"({len(keys)} verdicts, {len(generated)} generated rows)")
    # verdicts from before attempts were kept have no attempt column: each is a first try
    attempt = (verdicts.column("attempt").to_pylist() if "attempt" in verdicts.column_names
               else [1] * verdicts.num_rows)
    for key, usable, k in zip(keys, verdicts.column("usable").to_pylist(), attempt,
                              strict=True):
        if not usable and key in generated:
            rejected_rows.add(key)
            report.rejected += 1
        elif usable and key in generated:
            report.usable_at[int(k or 1)] += 1


def _audit_shard(folder: RunFolder, layout: RunLayout, name: str, prompts: pa.Table,
                 report: AuditReport, keys: Counter, committed_rows: list[tuple]
                 ) -> dict[int, str]:
    """Each prompt row's fate (row -> generated|quarantined), its problems reported."""
    out_url = layout.shard_output(name)
    quarantine_url = layout.rephrase_quarantine(name)
    commit = folder.commit(name)
    if commit is None:
        report.lost += prompts.num_rows
        report.problems.append(f"{name}: not committed ({layout.commit(name)} missing): "
                               f"{prompts.num_rows} prompt rows have no output")
        return {}
    current = prompt_checksum(prompts)
    if commit.get("prompt_checksum") != current:
        report.stale += 1
        report.problems.append(
            f"{name}: stale: committed from prompts {commit.get('prompt_checksum')} but the "
            f"prompt shard is now {current}; rerun `synthfactory rephrase` for it")
    listed = {p["name"] for p in commit.get("parts", [])}
    attempts_url = layout.shard_attempts(name)
    generated, quarantined, attempts = [], [], []
    for part in sorted(listed):
        generated.append(_read(storage.join(out_url, part), report))
        for folder_url, tables in ((quarantine_url, quarantined), (attempts_url, attempts)):
            url = storage.join(folder_url, part)
            if storage.exists(url):
                tables.append(_read(url, report))
    for folder_url in (out_url, attempts_url):
        for url in storage.list_files(folder_url, suffix=".parquet"):
            if url.rsplit("/", 1)[-1] not in listed:
                report.problems.append(f"{url}: a part that {name}'s commit does not list")
    generated = [t for t in generated if t is not None]
    quarantined = [t for t in quarantined if t is not None]
    attempts = [t for t in attempts if t is not None]
    if commit.get("output_checksum") != output_checksum(generated, quarantined, attempts):
        report.stale += 1
        report.problems.append(f"{name}: its parts changed after the commit (output checksum "
                               f"{commit.get('output_checksum')} does not match the files)")

    ids = prompts.column("id").to_pylist()
    templates = prompts.column("template_id").to_pylist()
    seen: Counter = Counter()
    status: dict[int, str] = {}
    for tables, kind in ((generated, "generated"), (quarantined, "quarantined")):
        for t in tables:
            for doc_id, template, row in zip(t.column("id").to_pylist(),
                                             t.column("template_id").to_pylist(),
                                             t.column("row").to_pylist(), strict=True):
                seen[row] += 1
                status[row] = kind
                keys[(doc_id, template)] += 1
                if not 0 <= row < len(ids) or (ids[row], templates[row]) != (doc_id, template):
                    report.problems.append(f"{name}: {kind} row {row} ({doc_id}, {template}) "
                                           "is not that row of the prompt shard")
                if kind == "generated":
                    report.generated += 1
                    committed_rows.append((name, doc_id, template, row))
                else:
                    report.quarantined += 1
    _audit_attempts(name, attempts, generated, report)
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
    return status


def _audit_attempts(name: str, attempts: list[pa.Table], generated: list[pa.Table],
                    report: AuditReport) -> None:
    """Each row's attempts are 1..k, each once, and its generated row is the chosen one.

    A shard from before attempts were kept has no attempts/ parts: its rows made one
    attempt each."""
    made: Counter = Counter()  # (row, attempt)
    chosen: dict[int, int] = {}
    for t in attempts:
        for row, attempt, is_chosen in zip(t.column("row").to_pylist(),
                                           t.column("attempt").to_pylist(),
                                           t.column("chosen").to_pylist(), strict=True):
            made[(row, attempt)] += 1
            if is_chosen:
                chosen[row] = attempt
    kept = {row: attempt for t in generated
            for row, attempt in zip(t.column("row").to_pylist(),
                                    (t.column("attempt").to_pylist()
                                     if "attempt" in t.column_names else [1] * t.num_rows),
                                    strict=True)}
    if not made:
        report.attempts += len(kept)
        return
    report.attempts += len(made)
    twice = {key: n for key, n in made.items() if n > 1}
    if twice:
        report.duplicated += sum(n - 1 for n in twice.values())
        report.problems.append(f"{name}: {len(twice)} attempt(s) in more than one part, "
                               f"e.g. (row, attempt) {sorted(twice)[0]}")
    rows: dict[int, set[int]] = {}
    for row, attempt in made:
        rows.setdefault(row, set()).add(attempt)
    gaps = {row: sorted(set(range(1, max(a) + 1)) - a) for row, a in rows.items()
            if a != set(range(1, max(a) + 1))}
    if gaps:
        report.lost += sum(len(g) for g in gaps.values())
        row = min(gaps)
        report.problems.append(f"{name}: {len(gaps)} row(s) with an attempt missing, e.g. row "
                               f"{row} lacks attempt(s) {gaps[row]}")
    wrong = [row for row, attempt in kept.items() if row in rows and chosen.get(row) != attempt]
    if wrong:
        report.problems.append(f"{name}: {len(wrong)} generated row(s) are not their chosen "
                               f"attempt, e.g. row {wrong[0]} keeps attempt {kept[wrong[0]]}, "
                               f"attempts/ chose {chosen.get(wrong[0])}")


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


def _audit_catalog(run_url: str, table: str, settings, documents: dict,
                   report: AuditReport) -> None:
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.expressions import And, EqualTo

    from synthfactory.catalog.command import runs_table_of

    catalog = config.open_catalog(settings)
    try:
        try:
            rows = catalog.load_table(table).scan(
                row_filter=EqualTo("run_url", run_url),
                selected_fields=("shard", "id", "template_id")).to_arrow()
        except NoSuchTableError:
            rows = pa.table({"shard": [], "id": [], "template_id": []})
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
    # a run registered before the quality gate: every generated row (run_format.py)
    lineage_rows = [registered_rows(row) for row in
                    lineage.select(["rows_generated", "rows_registered"]).to_pylist()]
    include_rejected = any(lineage.column("include_rejected").to_pylist())
    if lineage_rows != [rows.num_rows]:
        report.problems.append(
            f"{runs_table_of(table)}: half-registered: expected one lineage row of {run_url} "
            f"for {rows.num_rows} rows, found {lineage_rows}; run `synthfactory register` again")
    registered = Counter(zip(*(rows.column(c).to_pylist()
                               for c in ("shard", "id", "template_id")), strict=True))
    report.registered = rows.num_rows
    # the table's grain is a document and template (docs/adr/0136)
    rejected = {(d.shard, *key) for key, d in documents.items() if d.joinable and d.rejected}
    committed = Counter((d.shard, *key) for key, d in documents.items()
                        if d.joinable and (include_rejected or not d.rejected))
    unregistered = committed - registered
    extra = registered - committed
    if unregistered:
        report.lost += sum(unregistered.values())
        report.problems.append(f"{table}: {sum(unregistered.values())} usable joined "
                               f"row(s) of {run_url} are not in the table, e.g. "
                               f"{next(iter(unregistered))}")
    if extra:
        report.duplicated += sum(extra.values())
        n_rejected = sum(n for key, n in extra.items() if key in rejected)
        what = (f" ({n_rejected} of them rejected by the quality gate)" if n_rejected else "")
        report.problems.append(f"{table}: {sum(extra.values())} row(s) of {run_url} in the "
                               f"table are not usable joined rows{what}, e.g. "
                               f"{next(iter(extra))}")


def _read(url: str, report: AuditReport) -> pa.Table | None:
    try:
        return storage.read_table(url)
    except SynthfactoryError as exc:
        report.problems.append(str(exc))
        return None
