"""``synthfactory audit``: check one run end to end, from seed documents to catalog rows.

Each check reads what the steps wrote, not their summaries:
- every document of the manifest's files is in the prompts or the stitch quarantine;
- every prompt row is in exactly one generated or rephrase-quarantine row of a commit;
- no (id, template) appears twice in the run's outputs;
- each commit's prompt checksum matches its prompt shard now, and its output checksum
  matches its parts (a part swapped or edited after the commit is caught);
- every attempt of a row is in attempts/ exactly once, numbered 1, 2, ... without a gap,
  and the generated row is the attempt marked chosen (docs/adr/0141);
- every attempt replayed from an earlier commit has its origin's request key and
  output, and that origin still hashes to its commit (docs/adr/0150);
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

The checks, one module each: ``outputs`` (each shard's rows, checksums, attempts and
verdicts), ``documents`` (seed documents to prompts, chunks to joined rows), ``catalog``
(the table's rows and lineage); ``report`` holds what they find.
"""

from __future__ import annotations

import argparse
import logging
from collections import Counter

from synthfactory import storage
from synthfactory.audit.catalog import audit_catalog
from synthfactory.audit.documents import Document, add_chunks, audit_documents, audit_joined
from synthfactory.audit.outputs import audit_shard, audit_verdicts
from synthfactory.audit.replayed import OriginCache
from synthfactory.audit.report import MAX_SHOWN, AuditReport
from synthfactory.catalog import config
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.layout import RunLayout

log = logging.getLogger(__name__)

__all__ = ["AuditReport", "audit", "run"]


def run(args: argparse.Namespace) -> dict:
    settings = config.settings_from_args(args) if args.table else None
    report = audit(args.run, args.table, settings, args.id_column)
    for problem in report.problems[:MAX_SHOWN]:
        print(f"audit: {problem}")
    if len(report.problems) > MAX_SHOWN:
        print(f"audit: ... and {len(report.problems) - MAX_SHOWN} more")
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
    documents: dict[tuple[str, str], Document] = {}  # (document id, template), in order
    origins = OriginCache()  # replayed attempts' origins, each checked once
    for entry in entries:
        prompts = storage.read_table(entry["url"])
        report.prompt_rows += prompts.num_rows
        # a chunk's row has its own id; its document's is doc_id (stitch/chunks.py)
        doc_ids = prompts.column("doc_id" if "doc_id" in prompts.column_names
                                 else "id").to_pylist()
        prompt_ids.update(doc_ids)
        status = audit_shard(folder, layout, entry["name"], prompts, report, keys,
                             committed_rows, origins)
        audit_verdicts(layout, entry["name"], committed_rows, rejected_rows, report)
        add_chunks(documents, entry["name"], prompts, doc_ids, status, rejected_rows)
    for (doc_id, template), n in keys.items():
        if n > 1:
            report.duplicated += n - 1
            report.problems.append(f"({doc_id}, {template}) appears {n} times in the outputs")
    audit_documents(layout, prompt_ids, id_column, report)
    audit_joined(folder, layout, documents, report)
    if table:
        audit_catalog(layout.run_url, table, settings, documents, report)
    return report
