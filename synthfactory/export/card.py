"""A run's dataset card: ``README.md`` in the Hugging Face dataset card format, built with
``huggingface_hub``'s ``DatasetCard``/``DatasetCardData`` and ``datasets``' own writers of
``configs`` and ``dataset_info`` (what ``push_to_hub`` writes), so the Hub and
``load_dataset`` read it as they read their own.

The front matter: ``configs`` (the export's data files), ``dataset_info`` (features and
the train split), ``license``, ``source_datasets`` (the seed corpus), ``task_categories``,
``tags``. The body, from what the run's steps wrote (the report's figures, computed from
the run folder as ``synthfactory report`` computes them): the model and engine settings,
each template with its hash and domain, the gate's reasons with counts, the yield per
template and domain, decontamination, the run and its lineage, and the smoke test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.contract.names import DEFAULT_GPU_HOUR_USD
from synthfactory.export.dataset_files import DATA_FILES, SCHEMA, SPLIT, DataFile
from synthfactory.layout import RunLayout

TASK_CATEGORIES = ["text-generation"]
TAGS = ["synthetic", "rephrasing", "synthfactory"]


@dataclass(frozen=True)
class RunFacts:
    """What the card says, read from the run folder."""

    run_url: str
    report: dict[str, Any]
    templates: list[dict[str, Any]]  # id, version, style, hash, domain
    commit: dict[str, Any] | None  # a committed shard's: model, engine, sampling
    decontamination: dict[str, Any] | None
    smoke: dict[str, Any] | None


def read_facts(run_url: str, dag_id: str | None = None,
               airflow_run_id: str | None = None) -> RunFacts:
    from synthfactory.errors import SynthfactoryError
    from synthfactory.report.collect import collect
    from synthfactory.stitch.templates import load_used

    folder = storage.run_folder(run_url)
    files = folder.read()
    if files.plan is None:
        raise SynthfactoryError(f"{storage.join(run_url, paths.SHARDS_JSON)}: not found "
                                "(not a run folder, or not stitched yet)")
    report, _ = collect(folder.run_url, DEFAULT_GPU_HOUR_USD)
    report = {**report, "dag_id": dag_id, "airflow_run_id": airflow_run_id}
    layout = RunLayout(folder.run_url)
    templates = []
    for entry in files.plan.get("templates") or []:
        domain = load_used(entry["id"], layout.prompt_templates).domain
        templates.append({**entry, "domain": domain})
    commits = [s.commit for s in files.shards if s.commit]
    checked = [s.validation["decontamination"] for s in files.shards
               if s.validation and s.validation.get("decontamination")]
    smoke = storage.read_json_or_none(storage.join(folder.run_url, paths.SMOKE_SUMMARY))
    return RunFacts(folder.run_url, report, templates, commits[0] if commits else None,
                    checked[0] if checked else None, smoke)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if v is None else str(v) for v in row) + " |"
              for row in rows]
    return "\n".join(lines)


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def body(facts: RunFacts, files: list[DataFile] | None) -> str:
    report, commit = facts.report, facts.commit or {}
    quality = report.get("quality") or {}
    manifest = report.get("manifest") or {}
    y = report.get("token_yield") or {}
    attempts = report.get("attempts") or {}
    sampling = commit.get("sampling") or {}
    interval = f"{manifest.get('interval_start') or '?'} / {manifest.get('interval_end') or '?'}"
    parts = [
        f"# Synthetic rephrasings: {facts.run_url.rsplit('/', 2)[-2]} "
        f"{facts.run_url.rsplit('/', 1)[-1]}",
        "",
        f"Seed documents of `{manifest.get('source')}` (interval {interval}) rephrased by an "
        "LLM with synthfactory, then checked by its quality gate; only the rows the gate "
        "let through are in the data files (one row per document and template, a long "
        "document's chunks joined back in order).",
        "",
        f"- usable rows: {y.get('usable_rows')} of {y.get('joined_rows')} (one per document "
        f"and template); rows generated: {quality.get('rows', 'n/a')}, of them usable "
        f"{quality.get('usable', 'n/a')} ({_share(quality.get('yield'))})",
        f"- seed tokens: {y.get('seed_tokens')}; usable tokens: {y.get('usable_tokens')}; "
        f"token yield: {y.get('yield')}",
        f"- generated tokens per usable token: {attempts.get('generated_per_usable')}",
        "",
        "## Model and engine",
        "",
        _table(["setting", "value"], [
            ["model", commit.get("model")],
            ["device", commit.get("device")],
            ["engine arguments",
             f"`{json.dumps(commit.get('engine_args') or {}, sort_keys=True)}`"],
            ["sampling", f"`{json.dumps(sampling, sort_keys=True)}`"],
            ["max attempts", attempts.get("max_attempts")],
        ]),
        "",
        "## Templates",
        "",
        _table(["template", "version", "style", "domain", "sha256"],
               [[t["id"], t.get("version"), t.get("style"), t.get("domain"), t.get("hash")]
                for t in facts.templates]),
        "",
        "## Quality gate",
        "",
        "Rows rejected per reason (a row may have several):",
        "",
        _table(["reason", "rows"], [[r, n] for r, n in (quality.get("reasons") or {}).items()]),
        "",
        "## Yield per template",
        "",
        _table(["template", "generated", "usable", "yield", "source tokens", "usable tokens",
                "token yield"],
               [[t, v.get("generated"), v.get("usable"), v.get("yield"),
                 v.get("source_tokens"), v.get("usable_tokens"), v.get("token_yield")]
                for t, v in (quality.get("by_template") or {}).items()]),
        "",
        "## Yield per domain",
        "",
        _table(["domain", "joined", "usable", "yield", "source tokens", "usable tokens",
                "token yield"],
               [[d, v.get("joined"), v.get("usable"), v.get("yield"), v.get("source_tokens"),
                 v.get("usable_tokens"), v.get("token_yield")]
                for d, v in (quality.get("by_domain") or {}).items()]),
        "",
        "## Grounding",
        "",
        _grounding(quality),
        "",
        "## Decontamination",
        "",
        _decontamination(facts),
        "",
        "## Run and lineage",
        "",
        _table(["", ""], [
            ["run folder", f"`{facts.run_url}`"],
            ["Airflow DAG", report.get("dag_id")],
            ["Airflow run id", report.get("airflow_run_id")],
            ["seed corpus", f"`{manifest.get('source')}`"],
            ["seed documents", report.get("documents_in")],
            ["prompt rows", (report.get("prompts") or {}).get("rows")],
        ]),
        "",
        "## Smoke test",
        "",
        _smoke(facts.smoke),
        "",
        "## Data files",
        "",
        (_table(["file", "rows", "bytes", "sha256"],
                [[f.name, f.rows, f.bytes, f.sha256] for f in files]) if files is not None
         else f"`{DATA_FILES}`, written by `synthfactory export --run {facts.run_url} "
              "--out URL` beside a copy of this card."),
        "",
    ]
    return "\n".join(parts)


def _grounding(quality: dict) -> str:
    """The usable rows by how much of their content their source has (docs/quality.md,
    "Grounding"), by template and by domain, and the medians by how the rows ended."""
    g = quality.get("grounding")
    if not g:
        return "Not measured: the run was gated before grounding scores were kept."
    bands = list(g["bands"])
    return "\n".join([
        "Each usable row's `grounded` score is the share of its content words (weighted by "
        "rarity) that its source document has; the data files carry it per row with "
        "`content_kept`, `invented_terms` and `repeated_sentences`, so a stricter "
        "threshold needs no second gate.",
        "",
        _table(["usable rows", *bands],
               [["all", *g["bands"].values()],
                *[[f"template {t}", *(c.get(b, 0) for b in bands)]
                  for t, c in g["by_template"].items()],
                *[[f"domain {d}", *(c.get(b, 0) for b in bands)]
                  for d, c in g["by_domain"].items()]]),
        "",
        _table(["usable rows that", "rows", "median output/source words",
                "median source content kept", "median grounded"],
               [[e, f["rows"], f["output_source_ratio"], f["content_kept"], f["grounded"]]
                for e, f in g["by_ending"].items()]),
    ])


def _decontamination(facts: RunFacts) -> str:
    checked = facts.decontamination
    if checked is None:
        return "Not checked: the run named no benchmarks."
    counts = (facts.report.get("quality") or {}).get("contaminated_by") or {}
    return "\n".join([
        f"Every row's output and source were checked for word {checked['n']}-grams shared "
        f"with the benchmarks of `{checked['url']}`; a row that shares one is rejected "
        "(reason `contaminated`) and is not in the data files.",
        "",
        _table(["benchmark", "rows rejected"],
               [[name, counts.get(name, 0)] for name in checked["benchmarks"]]),
    ])


def _smoke(smoke: dict[str, Any] | None) -> str:
    if not smoke:
        return "Not run (no smoke test summary in the run folder)."
    keys = [k for k in ("status", "steps", "device", "loss_first", "loss_last",
                        "loss_expected", "tokens_trained", "padding_waste_fraction")
            if k in smoke]
    return ("A tiny model trained on the run's output lengths to check that a training "
            "job reads them:\n\n" + _table(["", ""], [[k, smoke[k]] for k in keys]))


def card_text(facts: RunFacts, license_id: str, files: list[DataFile] | None = None) -> str:
    """The card as README.md's text: front matter, then the body."""
    from datasets import Features, SplitDict, SplitInfo
    from datasets.info import DatasetInfo, DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard, DatasetCardData

    manifest = facts.report.get("manifest") or {}
    data = DatasetCardData(
        license=license_id, task_categories=TASK_CATEGORIES, tags=TAGS,
        source_datasets=[manifest["source"]] if manifest.get("source") else None,
        pretty_name=f"synthfactory {facts.run_url.rsplit('/', 1)[-1]}")
    MetadataConfigs({"default": {"data_files": [{"split": SPLIT, "path": DATA_FILES}]}}
                    ).to_dataset_card_data(data)
    # joined rows: one per document and template (a chunked document's chunks are one)
    rows = (sum(f.rows for f in files) if files is not None
            else (facts.report.get("token_yield") or {}).get("usable_rows") or 0)
    splits = SplitDict()
    splits.add(SplitInfo(name=SPLIT, num_examples=rows,
                         num_bytes=sum(f.bytes for f in files) if files else 0))
    info = DatasetInfo(features=Features.from_arrow_schema(SCHEMA), splits=splits,
                       download_size=sum(f.bytes for f in files) if files else None)
    DatasetInfosDict({"default": info}).to_dataset_card_data(data)
    card = DatasetCard(f"---\n{data.to_yaml()}\n---\n\n{body(facts, files)}")
    return str(card)


