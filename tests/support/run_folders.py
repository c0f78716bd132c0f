"""Build a realistic committed run folder, as stitch, rephrase and validate leave it.

Follows docs/contracts.md: prompt shards and shards.json, generated parts with the
contract's columns, quarantine parts, ``_COMMITTED.json`` written last, validation
JSON and the quality gate's verdicts. Every shard quarantines its last ``quarantined``
rows and the gate rejects its first ``rejected`` generated rows (``too_short``), so
counts add up unless a test breaks them on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from synthfactory import storage
from synthfactory.join import join_run
from synthfactory.layout import RunLayout
from synthfactory.rephrase.fingerprint import output_checksum, prompt_checksum
from synthfactory.validate import VERDICT_SCHEMA, quality_counts

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
SOURCE_TOKENS = 30  # each document's tokens, as stitch counts them
ENGINE_ARGS = {"max_num_seqs": 32, "dtype": "bfloat16", "max_model_len": 2048}
TEMPLATES = [
    {"id": "encyclopedic", "version": "1", "style": "encyclopedic"},
    {"id": "qa", "version": "2", "style": "qa"},
]


@dataclass
class RunFixture:
    run_url: str
    layout: RunLayout
    generated: list[dict] = field(default_factory=list)  # every committed generated row

    @property
    def generated_keys(self) -> list[tuple[str, str, str]]:
        """(shard, id, template) of each generated row: each is a whole document here, so
        one joined row each (the row of its document's one chunk)."""
        return sorted((r["shard"], r["id"], r["template_id"]) for r in self.generated)

    def commit_url(self, index: int) -> str:
        return storage.join(self.layout.generated_shard(index), "_COMMITTED.json")

    def edit_commit(self, index: int, **changes) -> None:
        commit = storage.read_json(self.commit_url(index))
        commit.update(changes)
        storage.write_json(self.commit_url(index), commit)


def table_keys(rows: pa.Table) -> list[tuple[str, str, str]]:
    """(shard, id, template) of each row read back from the table, sorted like
    generated_keys."""
    return sorted(zip(rows["shard"].to_pylist(), rows["id"].to_pylist(),
                      rows["template_id"].to_pylist(), strict=True))


def build_run(
    root_url: str,
    pipeline: str = "wrap-demo",
    interval: str = "2024-01-01",
    shard_rows: tuple[int, ...] = (5, 4),
    quarantined: int = 1,
    rows_per_part: int = 2,
    extra_columns: dict[str, str] | None = None,
    engine_args_by_shard: dict[int, dict] | None = None,
    rejected: int = 0,
    join: bool = True,
) -> RunFixture:
    """The run as the shard groups leave it, and joined (``synthfactory join``) unless
    ``join`` is false."""
    layout = RunLayout(storage.join(root_url, pipeline, interval))
    fixture = RunFixture(layout.run_url, layout)
    shard_entries, docs = [], set()
    for index, rows in enumerate(shard_rows):
        prompts = _prompt_rows(pipeline, interval, index, rows)
        docs.update(p["id"] for p in prompts)
        storage.write_table(pa.Table.from_pylist(prompts), layout.prompt_shard(index))
        shard_entries.append(
            {
                "name": f"shard-{index:05d}",
                "url": layout.prompt_shard(index),
                "rows": rows,
                "tokens": sum(p["prompt_tokens"] for p in prompts),
            }
        )
        engine_args = (engine_args_by_shard or {}).get(index, ENGINE_ARGS)
        fixture.generated += _write_shard(
            layout, index, prompts, quarantined, rows_per_part, extra_columns or {}, engine_args,
            rejected,
        )
    _write_seeds_and_manifest(root_url, layout, sorted(docs))
    storage.write_json(
        layout.shards_json,
        {
            "shards": shard_entries,
            "templates": TEMPLATES,
            "rows_in": len(docs),
            "prompt_rows": sum(shard_rows),
            "seed_tokens": SOURCE_TOKENS * len(docs),
            "covered_tokens": SOURCE_TOKENS * len(docs),
            "quarantined": 0,
            "styles_per_doc": len(TEMPLATES),
            "shard_tokens": 4096,
            "manifest": layout.manifest,
        },
    )
    if join:
        join_run(fixture.run_url)
    return fixture


def _write_seeds_and_manifest(root_url: str, layout: RunLayout, docs: list[str]) -> None:
    """The seed file the prompts came from, and the crawl manifest that lists it."""
    seeds = storage.join(root_url, "seeds", "part-00000.parquet")
    storage.write_table(pa.table({"id": docs, "text": [f"text of {d}" for d in docs]}), seeds)
    storage.write_table(pa.table({"key": [seeds], "size": [0]}),
                        storage.join(layout.manifest, "part-00000.parquet"))


def _prompt_rows(pipeline: str, interval: str, index: int, rows: int) -> list[dict]:
    out = []
    for row in range(rows):
        template = TEMPLATES[row % len(TEMPLATES)]
        doc = f"{pipeline}-{interval}-doc-{index}-{row // len(TEMPLATES)}"
        out.append(
            {
                "id": doc,
                "template_id": template["id"],
                "template_version": template["version"],
                "style": template["style"],
                "system": "You rewrite documents.",
                "user": f"Rewrite in the {template['style']} style: text of {doc}.",
                "prompt_tokens": 20 + row,
                "max_new_tokens": 128,
                "source_tokens": SOURCE_TOKENS,
            }
        )
    return out


def _write_shard(
    layout: RunLayout,
    index: int,
    prompts: list[dict],
    quarantined: int,
    rows_per_part: int,
    extra_columns: dict[str, str],
    engine_args: dict,
    rejected: int = 0,
) -> list[dict]:
    name = f"shard-{index:05d}"
    shard_url = layout.generated_shard(index)
    keep = len(prompts) - quarantined
    generated = []
    for row, prompt in enumerate(prompts[:keep]):
        text = f"{prompt['style']} rewrite number {row} of {prompt['id']}. " * (1 + row % 3)
        generated.append(
            {
                "id": prompt["id"],
                "template_id": prompt["template_id"],
                "template_version": prompt["template_version"],
                "row": row,
                "output_text": text,
                "prompt_tokens": prompt["prompt_tokens"],
                "output_tokens": len(text.split()),
                "finish_reason": "stop",
                "model": MODEL,
                **extra_columns,
            }
        )
    parts = []
    for k, start in enumerate(range(0, len(generated), rows_per_part)):
        chunk = generated[start : start + rows_per_part]
        part = f"part-{k:05d}.parquet"
        storage.write_table(pa.Table.from_pylist(chunk), storage.join(shard_url, part))
        parts.append(
            {"name": part, "rows": len(chunk), "start_row": start, "end_row": start + len(chunk)}
        )
    quarantine_parts = []
    if quarantined:
        rows = [
            {"id": p["id"], "template_id": p["template_id"], "row": keep + i, "reason": "too_long"}
            for i, p in enumerate(prompts[keep:])
        ]
        url = storage.join(layout.quarantine, "rephrase", name, "part-00000.parquet")
        storage.write_table(pa.Table.from_pylist(rows), url)
        quarantine_parts.append({"name": "part-00000.parquet", "rows": quarantined})

    tokens = sorted(r["output_tokens"] for r in generated) or [0]
    storage.write_json(
        storage.join(layout.validation, f"{name}.json"),
        {
            "shard": name,
            "rows": len(generated),
            "output_tokens": {
                "count": len(generated),
                "min": tokens[0],
                "p50": tokens[len(tokens) // 2],
                "p90": tokens[-1],
                "p99": tokens[-1],
                "max": tokens[-1],
                "mean": sum(tokens) / len(tokens),
            },
            "flags": {"empty": 0, "truncated": 1, "repetition": 0, "refusal": 0},
            "rows_flagged": 1,
            "quality": _write_verdicts(layout, name, generated, rejected),
        },
    )
    part_tables = [storage.read_table(storage.join(shard_url, p["name"])) for p in parts]
    quarantine_tables = [storage.read_table(storage.join(layout.quarantine, "rephrase", name,
                                                         q["name"])) for q in quarantine_parts]
    storage.write_json(  # written last, as the worker does
        storage.join(shard_url, "_COMMITTED.json"),
        {
            "shard": name,
            "prompt_shard": layout.prompt_shard(index),
            "rows_in": len(prompts),
            "rows_generated": len(generated),
            "rows_quarantined": quarantined,
            "parts": parts,
            "quarantine_parts": quarantine_parts,
            "prompt_tokens": sum(p["prompt_tokens"] for p in prompts),
            "output_tokens": sum(r["output_tokens"] for r in generated),
            "prompt_checksum": prompt_checksum(storage.read_table(layout.prompt_shard(index))),
            "output_checksum": output_checksum(part_tables, quarantine_tables),
            "model": MODEL,
            "engine_args": engine_args,
            "sampling": {"temperature": 0.0, "max_tokens": 128},
            "timings": {
                "started": "2024-01-02T00:00:00+00:00",
                "finished": "2024-01-02T00:01:00+00:00",
                "wall_s": 60.0,
                "startup_s": 5.0,
                "generation_s": 50.0,
                "generating_fraction": 0.8333,
            },
            "device_seconds": 60.0 + index,
            "device": "cpu",
        },
    )
    return [{**r, "shard": name} for r in generated]


def _write_verdicts(layout: RunLayout, name: str, generated: list[dict], rejected: int):
    """verdicts/{shard}.parquet as validate writes it; the first ``rejected`` rows fail."""
    columns = {"row": [r["row"] for r in generated], "id": [r["id"] for r in generated],
               "template_id": [r["template_id"] for r in generated],
               "usable": [i >= rejected for i in range(len(generated))],
               "reasons": [[] if i >= rejected else ["too_short"] for i in range(len(generated))],
               "clean_text": [r["output_text"].strip() for r in generated],
               "output_tokens": [r["output_tokens"] for r in generated],
               "qa_pairs": [None] * len(generated),
               "attempt": [r.get("attempt") for r in generated],
               "trimmed": [False] * len(generated),
               "contaminated_by": [[] for _ in generated],
               # grounding scores as the gate gives a faithful rephrasing (ADR 0148)
               "grounded": [0.95] * len(generated), "drift": [1.0] * len(generated),
               "content_kept": [0.6] * len(generated), "end_kept": [1.0] * len(generated),
               "invented_terms": [[] for _ in generated],
               "repeated_sentences": [0] * len(generated),
               "source_words": [100] * len(generated),
               "output_words": [len(r["output_text"].split()) for r in generated]}
    storage.write_table(pa.table(columns, schema=VERDICT_SCHEMA), layout.shard_verdicts(name))
    return quality_counts(columns)
