"""``synthfactory judge``: the model judge over a Parquet table (docs/judge.md), opt-in.

Reads the table ``synthfactory quality`` reads (``id``, ``source_text``,
``output_text``, ``finish_reason``, optional ``template``), asks a model through one of
the engine registry's engines whether each output's claims are supported by its source,
and writes the same rows plus ``judge_faithful``, ``judge_unsupported``,
``judge_missing`` and ``judge_raw``. A table the gate already judged (``usable`` and
``reasons``) gets its unfaithful rows rejected with the reason ``unfaithful``. Prints
``RESULT judge rows=N faithful=F unfaithful=U unparsed=P``.

The library is ``synthfactory/quality/judge/``; this command lives outside that package
because it builds its engine from ``synthfactory.rephrase``'s registry, and
``synthfactory.rephrase`` imports the quality gate: a command inside ``quality`` would
make the two packages import each other (pyproject.toml's acyclic contract).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from synthfactory import storage
from synthfactory.contract.flag_types import positive_int, temperature
from synthfactory.errors import PermanentError
from synthfactory.model import default_model_dir
from synthfactory.quality.judge import (
    FAITHFUL,
    REASON,
    UNFAITHFUL,
    UNPARSED,
    JudgeVerdict,
    Pair,
    judge,
    load_judge_template,
)
from synthfactory.quality.table import check_columns
from synthfactory.rephrase.engine_args import parse_engine_args
from synthfactory.rephrase.engine_registry import DEFAULT_ENGINE, engine_kind, engines_of
from synthfactory.rephrase.engine_spec import EngineSpec

COMMAND = "judge"
JUDGE_FIELDS = [pa.field("judge_faithful", pa.bool_()),
                pa.field("judge_unsupported", pa.list_(pa.string())),
                pa.field("judge_missing", pa.list_(pa.string())),
                pa.field("judge_raw", pa.string())]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--in", dest="in_url", required=True, help="Parquet table URL")
    parser.add_argument("--out", required=True, help="where the judged table is written")
    kinds = engines_of(COMMAND)
    # no argparse choices: an unknown name is a bad input of ours (one line, exit 3),
    # checked by the registry itself before any work
    parser.add_argument("--engine", default=DEFAULT_ENGINE,
                        help="; ".join(f"{k.name}: {k.commands[COMMAND]}" for k in kinds))
    for kind in kinds:
        kind.add_arguments(parser)
    parser.add_argument("--model", default=None,
                        help="--engine vllm: the judge's model folder (default: the "
                             "embedded one; a hub name: download it first)")
    parser.add_argument("--engine-args", default=None,
                        help="--engine vllm: JSON object or @file for vllm.LLM")
    parser.add_argument("--judge-template", default=None,
                        help="a judge template of one's own (JSON: id, system, user with "
                             "{source} and {output}, max_tokens); default: the shipped one")
    parser.add_argument("--max-tokens", type=positive_int, default=None,
                        help="budget of one verdict in tokens (default: the template's)")
    parser.add_argument("--max-in-flight", type=positive_int, default=64,
                        help="requests queued in the engine at once")
    # greedy by default: the same row judged twice should get the same verdict
    parser.add_argument("--temperature", type=temperature, default=0.0,
                        help="the judge's sampling temperature (0: greedy)")


def engine_spec(args: argparse.Namespace, budget: int) -> EngineSpec:
    """The judge's engine, every flag checked by its registry entry, before any row is
    read or any model loaded: an unknown engine, an engine that cannot judge, an engine's
    flags that do not fit together, a model folder that is not there."""
    kind = engine_kind(args.engine)  # an unknown name: one line naming the known ones
    if COMMAND not in kind.commands:
        raise PermanentError(f"--engine {kind.name}: cannot judge; the engines that can: "
                             f"{', '.join(k.name for k in engines_of(COMMAND))}")
    kind.check(args)
    model = args.model or str(default_model_dir())
    # an engine on this process's devices loads a folder: say now that it is not there,
    # not after vLLM's start-up (or a download attempt that the offline hub refuses)
    if kind.local_devices and not (Path(model) / "config.json").is_file():
        raise PermanentError(f"--model {model}: not a model folder (no config.json there; "
                             "`make setup` prepares the embedded one)")
    given = parse_engine_args(args.engine_args)
    tuned = kind.check_engine_args(given, model, None)
    sampling = {"temperature": args.temperature, "top_p": 1.0, "max_tokens": budget}
    return EngineSpec(model=model, engine=kind.name, engine_args=given, tuned=tuned,
                      sampling=sampling, max_in_flight=args.max_in_flight,
                      settings=kind.settings(args))


def with_judgement(table: pa.Table, verdicts: list[JudgeVerdict]) -> pa.Table:
    """The rows plus the judge's columns; a gated table's unfaithful rows rejected."""
    values = [[v.faithful for v in verdicts], [v.unsupported for v in verdicts],
              [v.missing for v in verdicts], [v.raw for v in verdicts]]
    for field, column in zip(JUDGE_FIELDS, values, strict=True):
        if field.name in table.column_names:  # judging a judged table replaces its verdicts
            table = table.drop_columns([field.name])
        table = table.append_column(field, pa.array(column, type=field.type))
    if {"usable", "reasons"} <= set(table.column_names):
        table = _reject_unfaithful(table, verdicts)
    return table


def _reject_unfaithful(table: pa.Table, verdicts: list[JudgeVerdict]) -> pa.Table:
    """``unfaithful`` appended to a rejected row's reasons (once, after the gate's own),
    and the row no longer usable; an unparsed verdict changes nothing."""
    usable = table.column("usable").to_pylist()
    reasons = [list(r or []) for r in table.column("reasons").to_pylist()]
    for i, verdict in enumerate(verdicts):
        if verdict.outcome == UNFAITHFUL:
            usable[i] = False
            if REASON not in reasons[i]:
                reasons[i].append(REASON)
    for name, column in (("usable", usable), ("reasons", reasons)):
        index = table.column_names.index(name)
        table = table.set_column(index, table.schema.field(name),
                                 pa.array(column, type=table.schema.field(name).type))
    return table


def result_line(rows: int, outcomes: Counter) -> str:
    return (f"RESULT judge rows={rows} faithful={outcomes[FAITHFUL]} "
            f"unfaithful={outcomes[UNFAITHFUL]} unparsed={outcomes[UNPARSED]}")


def run(args: argparse.Namespace) -> dict:
    in_url, out_url = storage.normalize(args.in_url), storage.normalize(args.out)
    if in_url == out_url:
        raise PermanentError(f"--out {out_url}: the same as --in; write the verdicts beside it")
    template = load_judge_template(args.judge_template)
    budget = args.max_tokens or template.max_tokens
    spec = engine_spec(args, budget)  # every check before the table is read
    if not storage.exists(in_url):
        raise PermanentError(f"--in {in_url}: not found")
    table = storage.read_table(in_url)
    check_columns(table, f"--in {in_url}")
    pairs = [Pair(s or "", o or "") for s, o in zip(
        table.column("source_text").to_pylist(), table.column("output_text").to_pylist(),
        strict=True)]
    started = time.monotonic()
    engine = spec.build() if pairs else None  # an empty table loads no model
    verdicts = judge(engine, pairs, template, budget, args.max_in_flight) if pairs else []
    wall_s = round(time.monotonic() - started, 3)
    kind = engine_kind(spec.engine)
    storage.write_table(with_judgement(table, verdicts), out_url)
    outcomes = Counter(v.outcome for v in verdicts)
    print(result_line(table.num_rows, outcomes), flush=True)
    return {"in": in_url, "out": out_url, "rows": table.num_rows,
            "faithful": outcomes[FAITHFUL], "unfaithful": outcomes[UNFAITHFUL],
            "unparsed": outcomes[UNPARSED],
            # what was wrong with the unparsed replies, counted (the judge's own failures)
            "unparsed_why": dict(Counter(v.why.split(" (")[0][:80] for v in verdicts
                                         if v.why)),
            # a server's model is its own (the endpoint's summary names it), not --model
            "engine": spec.engine, "model": spec.model if kind.local_devices else None,
            "template": template.id, "max_tokens": budget, "wall_s": wall_s,
            **kind.summary(engine)}
