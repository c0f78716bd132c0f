"""Replay by request key (docs/adr/0150): a corrected partition regenerates the rows
whose request changed, not the shards that hold them.

The demo's day (``synthfactory corpus``: 64 documents and one long one, crawled and
stitched with the DAG's defaults: template encyclopedic, budgets ``auto``, shards of
8,192 tokens) is rephrased once with the embedded model (real vLLM, one engine loaded
per model and shared by the runs, as one task would). Then 5% of its documents,
spread over the partition (every 20th by id), are corrected in place (a sentence
appended), the day is crawled and stitched again, and rephrased again twice from the
same first run: with replay (the default) and, in a copy of the first run, with
``--replay off``, which is what a rerun did before: every shard whose prompts changed is
regenerated whole (the baseline). Last, the corrected day's first two shards in a new
run folder of the same pipeline, rephrased with the model's weights changed (one
weight of a copy of the model folder nudged): nothing may be replayed.

    .venv-worker/bin/python benchmarks/replay.py [--docs 64 --long-docs 1 --every 20]

Last line: ``RESULT replay rows=N changed_rows=C regenerated_rows=G replayed_rows=R
regenerated_tokens=T baseline_regenerated_rows=B model_change_replayed=M isa=...``:
N prompt rows of the corrected day; C those whose prompt changed or is new; G the rows
the rerun generated (its chosen attempt not replayed), R those it replayed, T the
tokens it generated; B the rows the baseline generated; M the rows replayed across the
model change. Above it: each rerun's wall time and their ratio, the lookups' seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import print_machine, result_line  # this folder is on sys.path

from synthfactory import storage
from synthfactory.cli import build_parser
from synthfactory.model import default_model_dir
from synthfactory.rephrase import command as rephrase_command
from synthfactory.rephrase.engine_spec import EngineSpec

DAY = dt.date(2026, 1, 1)
SENTENCE = " This sentence was added when the document was corrected."


def _cli(*argv: str) -> None:
    done = subprocess.run([sys.executable, "-m", "synthfactory.cli", *argv],
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"synthfactory {argv[0]} failed: {done.stderr.strip().splitlines()[-1:]}")


def crawl_and_stitch(corpus: Path, run: Path) -> None:
    start = dt.datetime.combine(DAY, dt.time(), dt.UTC)
    _cli("crawl", "--source", f"file://{corpus}", "--out", f"file://{run}/manifest",
         "--interval-start", start.isoformat(),
         "--interval-end", (start + dt.timedelta(days=1)).isoformat(),
         "--partition-template", "dt={ds}")
    _cli("stitch", "--manifest", f"file://{run}/manifest", "--run", f"file://{run}",
         "--templates", "encyclopedic", "--shard-tokens", "8192", "--max-new-tokens", "auto",
         "--master", "local[2]")


def correct(corpus: Path, every: int) -> list[str]:
    """Append a sentence to every ``every``-th document by id, in place; their ids."""
    import pyarrow as pa

    url = storage.list_files(f"file://{corpus}", suffix=".parquet")[0]
    table = storage.read_table(url)
    ids, texts = table.column("id").to_pylist(), table.column("text").to_pylist()
    chosen = sorted(ids)[every // 2::every]
    texts = [t + SENTENCE if i in chosen else t for i, t in zip(ids, texts, strict=True)]
    storage.write_table(table.set_column(table.schema.get_field_index("text"), "text",
                                         pa.array(texts)), url)
    return chosen


def shard_urls(run: Path) -> list[str]:
    return [f"file://{run}/prompts/{s['name']}.parquet"
            for s in storage.read_json(f"file://{run}/prompts/shards.json")["shards"]]


def prompts(run: Path) -> dict[tuple, str]:
    """(id, template) -> the rendered request, over the run's prompt shards."""
    out = {}
    for url in shard_urls(run):
        t = storage.read_table(url, columns=["id", "template_id", "system", "user"])
        for i, tpl, system, user in zip(*(t.column(c).to_pylist() for c in t.column_names),
                                        strict=True):
            out[(i, tpl)] = system + "\0" + user
    return out


class Engines:
    """``EngineSpec.build`` loading one engine per model, shared by the runs."""

    def __init__(self):
        self.engines, self.original = {}, EngineSpec.build

    def __call__(self, spec):
        if spec.model not in self.engines:
            self.engines[spec.model] = self.original(spec)
        return self.engines[spec.model]


def rephrase(shards: list[str], *flags: str) -> tuple[dict, float]:
    args = build_parser("rephrase").parse_args(
        [*[a for s in shards for a in ("--shard", s)], *flags])
    started = time.monotonic()
    summary = rephrase_command.run(args)
    return summary, time.monotonic() - started


def counts(summary: dict) -> dict:
    """What a rerun did, from its shards' summaries (the committed ones: regenerated)."""
    ran = [s for s in summary["shards"] if s["status"] == "committed"]
    replayed = sum(s["replayed_rows"] for s in ran)
    return {"shards": len(ran), "rows": sum(s["rows_in"] for s in ran),
            "replayed": replayed, "generated": sum(s["rows_in"] for s in ran) - replayed,
            "tokens": sum(s["output_tokens"] for s in ran)}


def attempts(run: Path, shards: list[str] | None = None) -> list[dict]:
    """Every attempt row of the run's current (not set-aside) shards, or of ``shards``."""
    folders = [f"file://{run}/attempts/{s}" for s in shards] if shards is not None \
        else [f"file://{run}/attempts"]
    return [r for folder in folders for u in storage.list_files(folder, suffix=".parquet")
            for r in storage.read_table(u).to_pylist()]


def why_generated(first: list[dict], rerun: list[dict], changed: set) -> dict:
    """The rerun's generated rows (chosen attempt not replayed) that did not change, by
    what the first run left: an output that stopped at its budget untrimmed (never
    replayed: docs/adr/0150) or anything else."""
    stopped = {(a["id"], a["template_id"]) for a in first if a["chosen"]
               and a["finish_reason"] == "length" and a["repair"] != "trimmed"}
    out = {"changed": 0, "stopped_untrimmed": 0, "other": 0}
    for a in rerun:
        if not a["chosen"] or a["replayed_from"] is not None:
            continue
        key = (a["id"], a["template_id"])
        out["changed" if key in changed else
            "stopped_untrimmed" if key in stopped else "other"] += 1
    return out


def changed_weights(model: Path, out: Path) -> Path:
    """A copy of the model folder with one weight nudged: the same architecture and
    tokenizer, other weights."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(model, out)
    tensors = load_file(str(model / "model.safetensors"))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] += 1e-2
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=64)
    parser.add_argument("--long-docs", type=int, default=1)
    parser.add_argument("--every", type=int, default=20, help="correct every N-th document")
    parser.add_argument("--keep", default=None, help="copy the runs here at the end")
    args = parser.parse_args()
    engines = Engines()
    EngineSpec.build = lambda spec: engines(spec)
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp_name:
        tmp = Path(tmp_name)
        corpus = tmp / "corpus"
        run = tmp / "root" / "synthetic_rephrase" / DAY.isoformat()
        baseline = tmp / "baseline-root" / "synthetic_rephrase" / DAY.isoformat()
        _cli("corpus", "--out", f"file://{corpus}", "--days", "1", "--docs-per-day",
             str(args.docs), "--long-docs-per-day", str(args.long_docs),
             "--end-date", DAY.isoformat())
        crawl_and_stitch(corpus, run)
        before = prompts(run)
        print_machine()
        first, first_s = rephrase(shard_urls(run))
        print(f"first run: {len(before)} rows in {len(first['shards'])} shards, "
              f"{first_s:.1f} s", flush=True)
        made_first = attempts(run)
        shutil.copytree(run, baseline)
        corrected = correct(corpus, args.every)
        crawl_and_stitch(corpus, run)
        after = prompts(run)
        shutil.rmtree(baseline / "prompts")
        shutil.copytree(run / "prompts", baseline / "prompts")
        changed = [k for k, v in after.items() if before.get(k) != v]
        print(f"corrected {len(corrected)} of {args.docs + args.long_docs} documents "
              f"({', '.join(corrected)}): {len(changed)} of {len(after)} prompt rows "
              "changed", flush=True)
        rerun, rerun_s = rephrase(shard_urls(run))
        ran = [s["shard"] for s in rerun["shards"] if s["status"] == "committed"]
        why = why_generated(made_first, attempts(run, ran), set(changed))
        base, base_s = rephrase(shard_urls(baseline), "--replay", "off")
        again, base_counts = counts(rerun), counts(base)
        lookup_s = sum(storage.read_json(f"file://{run}/generated/{s['shard']}/"
                                         "_COMMITTED.json")["replay"]["lookup_s"]
                       for s in rerun["shards"] if s["status"] == "committed")
        other_day = tmp / "root" / "synthetic_rephrase" / "2026-01-02"
        shutil.copytree(run / "prompts", other_day / "prompts")
        model_b = changed_weights(default_model_dir(), tmp / "model-changed")
        moved, _ = rephrase(shard_urls(other_day)[:2], "--model", str(model_b))
        model = counts(moved)
        print_machine()
        print(f"rerun with replay: {again['shards']} shards regenerated, {again['generated']}"
              f" rows generated, {again['replayed']} replayed, {again['tokens']} tokens "
              f"generated, {rerun_s:.1f} s (lookups {lookup_s:.3f} s)")
        print(f"baseline (--replay off): {base_counts['shards']} shards regenerated, "
              f"{base_counts['generated']} rows generated, {base_counts['tokens']} tokens, "
              f"{base_s:.1f} s")
        print(f"rows the rerun generated: {why['changed']} changed, "
              f"{why['stopped_untrimmed']} whose first output stopped at its budget "
              f"untrimmed (never replayed), {why['other']} other")
        print(f"rerun wall / baseline wall: {rerun_s / base_s:.3f}; rows generated / "
              f"changed rows: {again['generated'] / max(len(changed), 1):.2f}")
        print(f"model weights changed: {model['rows']} rows of 2 shards, "
              f"{model['replayed']} replayed")
        print(result_line(
            "replay", rows=len(after), changed_rows=len(changed),
            regenerated_rows=again["generated"], replayed_rows=again["replayed"],
            regenerated_tokens=again["tokens"],
            baseline_regenerated_rows=base_counts["generated"],
            model_change_replayed=model["replayed"]))
        if args.keep:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True)


if __name__ == "__main__":
    main()
