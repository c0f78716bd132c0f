"""The documents: each seed document in the prompts or the stitch quarantine once, and
each document and template whose chunks were all generated joined once."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from synthfactory import storage
from synthfactory.audit.report import MAX_SHOWN, AuditReport, read_part
from synthfactory.contract import RunFolder, paths
from synthfactory.layout import RunLayout


@dataclass
class Document:
    """One document and template: its chunks' fates as the run's files tell them."""
    shard: str  # of its first chunk: the joined row's shard
    count: int  # chunks stitch cut it into
    chunks: dict[int, str] = field(default_factory=dict)  # index -> generated|quarantined
    rejected: list[int] = field(default_factory=list)

    @property
    def joinable(self) -> bool:
        return (len(self.chunks) == self.count
                and all(s == "generated" for s in self.chunks.values()))


def add_chunks(documents: dict, name: str, prompts: pa.Table, doc_ids: list[str],
                status: dict[int, str], rejected_rows: set[tuple]) -> None:
    n = prompts.num_rows
    cols = prompts.column_names
    index = prompts.column("chunk_index").to_pylist() if "chunk_index" in cols else [0] * n
    count = prompts.column("chunk_count").to_pylist() if "chunk_count" in cols else [1] * n
    ids, templates = prompts.column("id").to_pylist(), prompts.column("template_id").to_pylist()
    for row in range(n):
        doc = documents.setdefault((doc_ids[row], templates[row]),
                                   Document(name, int(count[row] or 1)))
        if row in status:
            doc.chunks[int(index[row] or 0)] = status[row]
        if (name, ids[row], templates[row], row) in rejected_rows:
            doc.rejected.append(int(index[row] or 0))


def audit_joined(folder: RunFolder, layout: RunLayout, documents: dict,
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
        t = read_part(url, report)
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


def audit_documents(layout: RunLayout, prompt_ids: set[str], id_column: str,
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
    for doc_id in sorted(prompt_ids - set(kept))[:MAX_SHOWN]:
        report.stale += 1
        report.problems.append(f"prompt id {doc_id}: not a document of the manifest "
                               "(prompts stitched from other seeds?)")
    for key, row in quarantined:
        report.problems.append(f"stitch quarantine row for {key} row {row}: not a document of "
                               "the manifest")
