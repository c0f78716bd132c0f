"""Each shard's outputs against its prompts: every prompt row generated or quarantined
once, the commit's checksums, every attempt kept once, one verdict per generated row."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from synthfactory import storage
from synthfactory.audit.replayed import OriginCache, audit_replayed
from synthfactory.audit.report import AuditReport, read_part
from synthfactory.contract import RunFolder
from synthfactory.layout import RunLayout
from synthfactory.rephrase.fingerprint import output_checksum, prompt_checksum


def audit_verdicts(layout: RunLayout, name: str, committed_rows: list[tuple],
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


def audit_shard(folder: RunFolder, layout: RunLayout, name: str, prompts: pa.Table,
                 report: AuditReport, keys: Counter, committed_rows: list[tuple],
                 origins: OriginCache) -> dict[int, str]:
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
        generated.append(read_part(storage.join(out_url, part), report))
        for folder_url, tables in ((quarantine_url, quarantined), (attempts_url, attempts)):
            url = storage.join(folder_url, part)
            if storage.exists(url):
                tables.append(read_part(url, report))
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
    audit_replayed(name, attempts, report, origins)
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
