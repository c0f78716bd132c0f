"""Parse task argv with the engine's own argparse; run by .venv-worker's python.

One request per stdin line, one answer per stdout line (JSON), so one process serves a
whole test module. Request: ``[{"task_id", "argv"}]``. Answer: ``{"errors": {task_id:
[message]}, "plans": {task_id: [group]}, "window": N}`` (an old spelling's deprecation
line is an error: docs/adr/0137); a ``plan`` argv that parses is
also run, on a two-shard run folder of its own whose shards.json records the window N,
and ``plans`` holds the groups it emits (the argv of the mapped rephrase and validate
tasks).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import sys
import tempfile
from pathlib import Path

from synthfactory.cli import COMMANDS, build_parser, split_debug

SHARDS = [{"name": f"shard-0000{i}", "rows": 8, "tokens": 4096} for i in range(2)]
WINDOW = 3072  # the window its shards.json says stitch cut them for: plan passes it on


class ArgvError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """The CLI's parser, raising where argparse would print usage and exit 2."""

    def error(self, message: str):
        raise ArgvError(f"{self.prog}: error: {message}")


def parser_for(name: str) -> Parser:
    # as synthfactory.cli.main builds it
    return build_parser(name, Parser)


def unknown_options(name: str, rest: list[str]) -> list[str]:
    """What argparse would call unrecognized once the required options are there: a
    renamed flag shows as 'required: --new' first, and the stale '--old' is the news."""
    parser = parser_for(name)
    for action in parser._actions:
        action.required = False
    for group in parser._mutually_exclusive_groups:
        group.required = False
    try:
        return parser.parse_known_args(rest)[1]
    except ArgvError:
        return []


def check(argv: list[str]) -> tuple[list[str], argparse.Namespace | None]:
    argv, _ = split_debug([str(a) for a in argv])
    if not argv or argv[0] not in COMMANDS:
        return [f"synthfactory: unknown command {argv[0] if argv else ''!r}"], None
    name, rest = argv[0], argv[1:]
    said = io.StringIO()  # an old spelling parses, and says so: a DAG must not use one
    try:
        with contextlib.redirect_stderr(said):
            args = parser_for(name).parse_args(rest)
        return [line for line in said.getvalue().splitlines() if line.strip()], args
    except ArgvError as exc:
        errors = [str(exc)]
    extra = unknown_options(name, rest)
    if extra and "unrecognized arguments" not in errors[0]:
        errors.append(f"synthfactory {name}: error: unrecognized arguments: {' '.join(extra)}")
    return errors, None


def plan_groups(args: argparse.Namespace, tmp: Path) -> list[dict]:
    """Run the engine's plan on a run folder here (never the rendered --run: no writes
    outside the temp folder), so the groups' argv are the ones plan really builds."""
    run = tmp / f"run-{len(list(tmp.iterdir()))}"
    (run / "prompts").mkdir(parents=True)
    shards = [{**s, "url": f"{run.as_uri()}/prompts/{s['name']}.parquet"} for s in SHARDS]
    (run / "prompts" / "shards.json").write_text(json.dumps({"shards": shards,
                                                             "max_model_len": WINDOW}))
    args.run = run.as_uri()
    return importlib.import_module(COMMANDS["plan"][0]).run(args)


def answer(request: list[dict], tmp: Path) -> dict:
    errors: dict[str, list[str]] = {}
    plans: dict[str, list[dict]] = {}
    for entry in request:
        found, args = check(entry["argv"])
        if found:
            errors[entry["task_id"]] = found
        elif entry["argv"][0] == "plan":
            plans[entry["task_id"]] = plan_groups(args, tmp)
    return {"errors": errors, "plans": plans, "window": WINDOW}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="synthfactory-argv-") as tmp:
        for line in sys.stdin:
            print(json.dumps(answer(json.loads(line), Path(tmp))), flush=True)


if __name__ == "__main__":
    main()
