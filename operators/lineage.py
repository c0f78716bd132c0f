"""OpenLineage for the steps: what each ``synthfactory`` subcommand reads and writes.

The Airflow OpenLineage provider's listener asks an operator for
``get_openlineage_facets_on_start`` / ``_on_complete`` / ``_on_failure``
(``StepLineageMixin``, mixed into the local step operator and the pod operator). The
answer comes from the task's rendered argv alone, the same in every runner, read with
the steps table (synthfactory/contract/steps.py: each step's flags, the run-folder paths
it reads and writes, and its table):

- the datasets: the seed corpus (crawl's ``--source``), the run folder's ``manifest``,
  ``prompts``, ``generated``, ``verdicts``, ``rejected`` and ``report`` folders, and the
  Iceberg table (``iceberg://{catalog}``, ``namespace.table``);
- on complete, for rephrase, validate and register, the run facet ``synthfactory``: the
  model, the templates (id, version, content hash) and rows by verdict, from the step's
  summary (its XCom) where it has them, else from the run folder's JSON files.

Nothing here is imported from the provider or the openlineage client at module level
(the DAG file imports the operators): without the provider, or with OpenLineage off,
the methods are simply never called. A secret never gets here: argv holds none (a
connection's catalog URI travels as environment) and the facet copies named counts and
names only, never the summary's catalog fields. docs/lineage.md lists it all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlparse

from synthfactory.contract import RunFolder, ShardEntry, paths, steps
from synthfactory.contract.names import DEFAULT_CATALOG_NAME

log = logging.getLogger(__name__)

FACET_NAME = "synthfactory"  # the run facet's key in an event's run.facets
FACET_STEPS = ("rephrase", "validate", "register")  # the steps whose rows have verdicts


@dataclass(frozen=True)
class DatasetName:
    """An OpenLineage dataset's identity: ``s3://bucket`` + key prefix, ``file`` + path."""

    namespace: str
    name: str


def dataset_of(url: str) -> DatasetName:
    """``s3://bucket/a/b`` -> (``s3://bucket``, ``a/b``); ``file:///a/b`` -> (``file``,
    ``/a/b``). No user, password, query or fragment of the URL is kept."""
    parsed = urlparse(url.strip())
    host = parsed.netloc.rpartition("@")[2]
    if parsed.scheme in ("", "file"):
        return DatasetName("file", parsed.path.rstrip("/") or "/")
    return DatasetName(f"{parsed.scheme}://{host}", parsed.path.strip("/") or "/")


def table_dataset(table: str, catalog: str | None = None) -> DatasetName:
    return DatasetName(f"iceberg://{catalog or DEFAULT_CATALOG_NAME}", table)


def _values(step: steps.Step, parsed: dict[str, Any], role: str) -> list[str]:
    """The non-empty values of the step's flags of ``role`` (repeated flags: each)."""
    out: list[str] = []
    for flag in step.flags:
        if flag.role != role:
            continue
        value = parsed.get(flag.dest)
        out += [str(v) for v in (value if isinstance(value, list) else [value]) if v]
    return out


def run_url_of(step: steps.Step, parsed: dict[str, Any]) -> str | None:
    """The run folder a step's argv names: its run flag (an old spelling parses to the
    same), else its shards' ({run}/prompts/shard-00000.parquet)."""
    runs = _values(step, parsed, steps.RUN)
    if runs:
        return runs[0].rstrip("/")
    shards = _values(step, parsed, steps.SHARD)
    return shards[0].rstrip("/").rsplit("/", 2)[0] if shards else None


def step_datasets(argv: Sequence[str]) -> tuple[list[DatasetName], list[DatasetName]]:
    """(inputs, outputs) of one step's argv, as the steps table declares them: the
    datasets its flags name, the run-folder paths it reads and writes, its table; ([], [])
    for a command the table does not know."""
    step, parsed = steps.parse_argv(argv)
    if step is None:
        return [], []
    inputs = [dataset_of(u) for u in _values(step, parsed, steps.INPUT)]
    outputs = [dataset_of(u) for u in _values(step, parsed, steps.OUTPUT)]
    run = run_url_of(step, parsed)
    if run is not None:
        inputs += [dataset_of(f"{run}/{folder}") for folder in step.reads]
        outputs += [dataset_of(f"{run}/{folder}") for folder in step.writes]
    tables = _values(step, parsed, steps.TABLE)
    if tables and step.table:
        catalogs = _values(step, parsed, steps.CATALOG)
        (inputs if step.table == "reads" else outputs).append(
            table_dataset(tables[0], catalogs[0] if catalogs else None))
    return inputs, outputs


# -- the run facet -----------------------------------------------------------------------

def template_entries(templates: Sequence[dict] | None) -> list[dict[str, Any]]:
    """shards.json's templates as the facet carries them: id, version and the content
    hash where stitch recorded one, else ``id@version`` (a shipped template's text is
    fixed per version)."""
    out = []
    for entry in templates or []:
        if not isinstance(entry, dict) or not entry.get("id"):
            continue
        content = entry.get("hash")  # TemplateEntry.hash: sha256 of the template's JSON
        out.append({"id": str(entry["id"]), "version": entry.get("version"),
                    "hash": str(content) if content else f"{entry['id']}@{entry.get('version')}",
                    "hashKind": "content" if content else "id@version"})
    return out


def _shard_names(shard_urls: list[str], run: RunFolder) -> list[str]:
    """The shards a step concerns: its ``--shard`` flags, else every shard of the plan."""
    names = []
    for url in shard_urls:
        match = paths.SHARD_NAME.search(url.rstrip("/").rsplit("/", 1)[-1])
        if match:
            names.append(match.group(0))
    if names:
        return names
    return [s["name"] for s in (run.shards_plan() or {}).get("shards") or []]


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def facet_fields(argv: Sequence[str], summary: dict | None,
                 read_json: Callable[[str], Any]) -> dict[str, Any] | None:
    """The run facet's fields for a finished step, or None for a step without verdicts.

    The summary (XCom) first: register's has ``rows_usable``/``rows_rejected``/
    ``rows_quarantined``, ``model`` and ``templates``; validate's ``usable``/``rejected``.
    The rest from the run folder: ``prompts/shards.json``'s templates, each shard's
    ``_COMMITTED.json`` (model, quarantined) and validation JSON (usable, rejected)."""
    parsed_step, parsed = steps.parse_argv(argv)
    if parsed_step is None or parsed_step.name not in FACET_STEPS:
        return None
    step = parsed_step.name
    run_url = run_url_of(parsed_step, parsed)
    shard_urls = _values(parsed_step, parsed, steps.SHARD)
    summary = summary if isinstance(summary, dict) else {}
    fields: dict[str, Any] = {"step": step, "runUrl": run_url, "model": None,
                              "templates": template_entries(summary.get("templates")),
                              "rows": {}}
    rows = {"usable": _count(summary.get("rows_usable", summary.get("usable"))),
            "rejected": _count(summary.get("rows_rejected", summary.get("rejected"))),
            "quarantined": _count(summary.get("rows_quarantined"))}
    model = summary.get("model") if isinstance(summary.get("model"), str) else None
    if run_url and (model is None or not fields["templates"] or None in rows.values()):
        try:
            model, rows = _from_run_folder(RunFolder(run_url, read_json), shard_urls, fields,
                                           model, rows, step)
        except Exception as exc:  # lineage never fails a task: keep what the summary gave
            log.warning("OpenLineage: could not read %s (%s)", run_url, exc)
    fields["model"] = model or parsed.get("model") or None
    fields["rows"] = {k: v for k, v in rows.items() if v is not None}
    return fields


def _from_run_folder(run: RunFolder, shard_urls: list[str], fields: dict[str, Any],
                     model: str | None, rows: dict[str, int | None],
                     step: str) -> tuple[str | None, dict[str, int | None]]:
    if not fields["templates"]:
        fields["templates"] = template_entries((run.shards_plan() or {}).get("templates"))
    names = _shard_names(shard_urls, run)
    # in the current shape, whatever engine wrote them (contract/run_format.py)
    shards = [run.shard(cast(ShardEntry, {"name": n})) for n in names]  # a name: all it reads
    commits = [s.commit for s in shards if s.commit]
    if model is None:
        model = ", ".join(sorted({str(c["model"]) for c in commits if c.get("model")})) or None
    rows = dict(rows)
    if rows["quarantined"] is None and commits:
        rows["quarantined"] = sum(int(c.get("rows_quarantined") or 0) for c in commits)
    if step != "rephrase" and (rows["usable"] is None or rows["rejected"] is None):
        # quality None: validated before the gate, no verdicts to count
        qualities = [s.validation["quality"] or {} for s in shards if s.validation]
        if qualities:
            for verdict in ("usable", "rejected"):
                if rows[verdict] is None:
                    rows[verdict] = sum(int(q.get(verdict) or 0) for q in qualities)
    return model, rows


# -- what the provider calls -------------------------------------------------------------

def _read_json(url: str) -> Any:
    from synthfactory_airflow.plugins.run_report.run_files import read_json

    return read_json(url)


def operator_lineage(argv: Sequence[str], summary: dict | None = None, complete: bool = False,
                     read_json: Callable[[str], Any] | None = None, catalog: str | None = None):
    """The provider's ``OperatorLineage`` of one step (imports the provider: only the
    listener calls this)."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

    argv = [str(a) for a in argv or []]
    inputs, outputs = step_datasets(argv)
    if catalog:  # the catalog the step really used (register's summary names it)
        outputs = [table_dataset(d.name, catalog) if d.namespace.startswith("iceberg://")
                   else d for d in outputs]
    run_facets = {}
    if complete:
        fields = facet_fields(argv, summary, read_json or _read_json)
        if fields is not None:
            from synthfactory_airflow.operators.lineage_facet import SynthfactoryRunFacet

            run_facets[FACET_NAME] = SynthfactoryRunFacet(**fields)
    return OperatorLineage(inputs=[Dataset(namespace=d.namespace, name=d.name) for d in inputs],
                           outputs=[Dataset(namespace=d.namespace, name=d.name) for d in outputs],
                           run_facets=run_facets)


class StepLineageMixin:
    """OpenLineage for a step operator whose ``arguments`` are a ``synthfactory`` argv
    (LocalStepOperator, SynthfactoryPodOperator). ``execute`` keeps the step's summary
    in ``_lineage_summary`` for the COMPLETE event's run facet."""

    _lineage_summary: dict | None = None

    def _keep_for_lineage(self, summary: Any) -> None:
        self._lineage_summary = summary if isinstance(summary, dict) else None

    def get_openlineage_facets_on_start(self):
        return operator_lineage(self.arguments)  # type: ignore[attr-defined]

    def get_openlineage_facets_on_complete(self, task_instance: Any = None):
        summary = self._lineage_summary
        catalog = summary.get("catalog") if isinstance(summary, dict) else None
        return operator_lineage(self.arguments, summary, complete=True,  # type: ignore[attr-defined]
                                catalog=catalog if isinstance(catalog, str) else None)

    def get_openlineage_facets_on_failure(self, task_instance: Any = None):
        return operator_lineage(self.arguments)  # type: ignore[attr-defined]
