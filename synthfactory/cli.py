"""The ``synthfactory`` console script.

Every subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> dict`` (a list where Airflow maps over it). Modules are imported
lazily so ``synthfactory crawl`` does not pay for torch or vLLM. The returned value is
the step's summary: it is printed as the last line of stdout and written to the result
file (see :mod:`synthfactory.result`), which is how Airflow reads it as XCom in both
runners.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from synthfactory.errors import SynthfactoryError
from synthfactory.result import publish

# name -> (module, one-line help). Keep in sync with DESIGN.md's subcommand list.
COMMANDS: dict[str, tuple[str, str]] = {
    "corpus": ("synthfactory.corpus", "build the seed corpus from the Python stdlib docstrings"),
    "model": ("synthfactory.model", "prepare the embedded model folder (model prepare)"),
    "crawl": ("synthfactory.crawl.command", "list source partitions into a parquet manifest"),
    "stitch": ("synthfactory.stitch.command", "Spark: stitch templates onto documents, cut shards"),
    "plan": ("synthfactory.plan", "group shards for the rephrase wave and size the wave"),
    "rephrase": ("synthfactory.rephrase.command", "vLLM: rephrase prompt shards, checkpointed"),
    "validate": ("synthfactory.validate", "per-shard token statistics and quality flags"),
    "register": ("synthfactory.catalog.command", "register committed shards in an Iceberg table"),
    "catalog": ("synthfactory.catalog.browse", "list catalog tables and runs"),
    "smoke": ("synthfactory.training.smoke_command", "train a tiny model on synthetic lengths"),
    "preview-lengths": ("synthfactory.training.preview_command", "preview a length spec"),
    "sweep": ("synthfactory.sweep.command", "grid-search vLLM engine arguments"),
    "report": ("synthfactory.report.command", "write a run's report.json and figures"),
}


def _usage() -> str:
    lines = ["usage: synthfactory COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<16} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"synthfactory: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    module = importlib.import_module(COMMANDS[name][0])
    parser = argparse.ArgumentParser(prog=f"synthfactory {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    args = parser.parse_args(rest)
    try:
        summary = module.run(args)
    except SynthfactoryError as exc:
        print(f"synthfactory {name}: error: {exc}", file=sys.stderr)
        return exc.exit_code  # 3 for a PermanentError: Airflow does not retry (errors.py)
    try:
        publish(summary if summary is not None else {})
    except BrokenPipeError:  # `synthfactory ... | head` closed stdout: not an error
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
