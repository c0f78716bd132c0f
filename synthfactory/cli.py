"""The ``synthfactory`` console script.

Every subcommand lives in its own module exposing ``run(args) -> dict`` (a list where
Airflow maps over it); a step's flags are the steps table's (synthfactory/contract/
steps.py), a tool's its module's ``add_arguments(parser)``. Modules are imported lazily
so ``synthfactory crawl`` does not pay for torch or vLLM. The returned value is the
step's summary: it is printed as the last line of stdout and written to the result file
(see :mod:`synthfactory.result`), which is how Airflow reads it as XCom in both runners.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import sys
import time
import traceback

from synthfactory import storage_retries
from synthfactory.cli_alias import deprecated_flag
from synthfactory.contract import (
    DEBUG_ENV,
    EXIT_DONE,
    EXIT_PERMANENT,
    EXIT_RETRYABLE,
    EXIT_USAGE,
    PUSHGATEWAY_ENV,
)
from synthfactory.contract.names import METRICS_PORT_ENV
from synthfactory.contract.steps import STEPS
from synthfactory.contract.steps import add_arguments as add_step_arguments
from synthfactory.errors import SynthfactoryError
from synthfactory.result import publish

# name -> (module, one-line help): the list `synthfactory --help` prints. The steps a DAG
# runs are declared in the steps table (synthfactory/contract/steps.py), flags and all;
# the rest are tools a user runs by hand, each module with its own add_arguments.
TOOLS: dict[str, tuple[str, str]] = {
    "corpus": ("synthfactory.corpus", "build the seed corpus from the Python stdlib docstrings"),
    "model": ("synthfactory.model", "prepare the embedded model folder (model prepare)"),
    "quality": ("synthfactory.quality.command", "per-row quality verdicts over a Parquet table"),
    "judge": ("synthfactory.judge", "a model's faithfulness verdicts over a Parquet table "
                                    "(opt-in)"),
    "catalog": ("synthfactory.catalog.browse", "list catalog tables and runs"),
    "replay": ("synthfactory.rephrase.replay.command",
               "a pipeline's replay index: its size; compact it, drop old entries"),
    "preview-lengths": ("synthfactory.training.preview_command", "preview a length spec"),
    "estimate": ("synthfactory.estimate.command",
                 "GPU-hours, wall-clock, dollars, shards and runs for a token target"),
}
COMMANDS: dict[str, tuple[str, str]] = {
    **{name: (step.module, step.help) for name, step in STEPS.items()}, **TOOLS}


def _usage() -> str:
    lines = ["usage: synthfactory COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<16} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", f"--debug (anywhere, or {DEBUG_ENV}=1) shows the traceback of an error"]
    return "\n".join(lines)


DEBUG_FLAG = "--debug"
MAX_MESSAGE = 600  # some libraries put a whole config dump in the message


def split_debug(argv: list[str]) -> tuple[list[str], bool]:
    """Remove ``--debug`` from the command's own options (anywhere before a bare ``--``;
    what follows ``--`` is passed on untouched, e.g. plan's rephrase options)."""
    cut = argv.index("--") if "--" in argv else len(argv)
    own = [a for a in argv[:cut] if a != DEBUG_FLAG]
    debug = len(own) != cut or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    return own + argv[cut:], debug


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line, for an exception nobody turned into ours."""
    message = " ".join(str(exc).split()) or "(no message)"
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + "..."
    return f"{type(exc).__name__}: {message}"


def _step_metrics(name: str):
    """Every step pushes its seconds and storage retries (stitch, validate, join and
    register their rows too) when a Pushgateway is configured, and serves them when a
    metrics port is (a pod's) (synthfactory/metrics/step_rows.py; rephrase pushes and
    serves its own)."""
    if not (os.environ.get(PUSHGATEWAY_ENV) or os.environ.get(METRICS_PORT_ENV)):
        return None  # nobody to push to: prometheus_client is not even imported
    from synthfactory.metrics import step_metrics

    return step_metrics(name)


def _record_retries(name: str, args: argparse.Namespace, summary, outcome: str,
                    before: dict[str, int]) -> None:
    """A step that retried storage requests leaves their counts in its run folder
    (``storage_retries/``), done or failed, for report.json and the Run report; a step
    that retried none writes nothing. Best effort: the storage may be what is failing."""
    counts = (summary.get("storage_retries") if isinstance(summary, dict) else None
              ) or storage_retries.since(before)
    run = _run_of(name, args)
    if not counts or not run:
        return
    from synthfactory import storage
    from synthfactory.contract import paths

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    url = storage.join(run, paths.STORAGE_RETRIES, f"{name}-{stamp}-{os.getpid()}.json")
    try:
        storage.write_json(url, {"step": name, "outcome": outcome, "retries": counts})
    except Exception as exc:  # noqa: BLE001 - the counts are in the summary and metrics too
        logging.getLogger(__name__).warning("%s: storage retries not recorded (%s)",
                                            url, one_line(exc))


def _run_of(name: str, args: argparse.Namespace) -> str | None:
    """The run folder a step works in: its --run, else rephrase's first shard's run,
    else crawl's manifest folder's parent."""
    run = getattr(args, "run", None)
    if isinstance(run, str) and run:
        return run
    shards = getattr(args, "shard", None)
    if name == "rephrase" and shards:
        from synthfactory.layout import run_url_of_shard

        return run_url_of_shard(shards[0])
    out = getattr(args, "out", None)
    if name == "crawl" and isinstance(out, str) and out.rstrip("/").endswith("/manifest"):
        return out.rstrip("/").rsplit("/", 1)[0]
    return None


def build_parser(name: str, parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser
                 ) -> argparse.ArgumentParser:
    """The parser of subcommand ``name``, as ``main`` parses it (imports its module);
    ``parser_class``: an ArgumentParser subclass (a test's, raising instead of exiting)."""
    parser = parser_class(prog=f"synthfactory {name}", description=COMMANDS[name][1])
    module = importlib.import_module(COMMANDS[name][0])
    if name in STEPS:  # the table's flags, then those another owner declares (the engines')
        add_step_arguments(parser, STEPS[name], alias=deprecated_flag)
        getattr(module, "add_more_arguments", lambda _parser: None)(parser)
    else:
        module.add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv, debug = split_debug(list(sys.argv[1:] if argv is None else argv))
    if debug:  # steps look at it too (Spark's task log) and so do child processes
        os.environ[DEBUG_ENV] = "1"
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return EXIT_DONE if argv else EXIT_USAGE
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"synthfactory: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    prefix = f"synthfactory {name}: error:"
    try:
        module = importlib.import_module(COMMANDS[name][0])
        # a bad option: argparse's usage + error, exit 2; an old spelling of a flag: one
        # deprecation line on stderr, then the same value (synthfactory/cli_alias.py)
        args = build_parser(name).parse_args(rest)
        metrics = _step_metrics(name)
        summary, outcome = None, "failed"
        before = storage_retries.counts()  # this step's own, when main runs in-process again
        try:
            summary = module.run(args)
            outcome = "done"
            if isinstance(summary, dict) and name in STEPS:
                summary["storage_retries"] = storage_retries.add(
                    summary.get("storage_retries") or {}, storage_retries.since(before))
            if metrics is not None:
                metrics.finished(summary)
        finally:
            if metrics is not None:
                metrics.close()  # the last push, done or failed
            if name in STEPS:
                _record_retries(name, args, summary, outcome, before)
        try:
            publish(summary if summary is not None else {})
        except BrokenPipeError:  # `synthfactory ... | head` closed stdout: not an error
            sys.stderr.close()
    except SynthfactoryError as exc:
        if debug:
            traceback.print_exc()
        print(f"{prefix} {exc}", file=sys.stderr)
        return exc.exit_code  # 3 unless a RetryableError: Airflow does not retry (errors.py)
    except KeyboardInterrupt:
        print(f"synthfactory {name}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            return _unforeseen(exc, prefix, debug)
        # a full scratch folder (the export's temp files, a library's cache): the
        # storage layer names its own files' (storage.full_disk); this names any other.
        # Not retried: a full disk stays full until someone acts.
        if debug:
            traceback.print_exc()
        print(f"{prefix} {_full_disk_line(exc)}", file=sys.stderr)
        return EXIT_PERMANENT
    except Exception as exc:  # a bug or an input we did not foresee: still one line
        return _unforeseen(exc, prefix, debug)
    return EXIT_DONE


def _unforeseen(exc: BaseException, prefix: str, debug: bool) -> int:
    if debug:
        traceback.print_exc()
        print(f"{prefix} {one_line(exc)}", file=sys.stderr)
    else:
        print(f"{prefix} {one_line(exc)} (rerun with {DEBUG_FLAG} for the traceback)",
              file=sys.stderr)
    return EXIT_RETRYABLE


def _full_disk_line(exc: OSError) -> str:
    """``{path}: no space left on the disk: {free} bytes are free in {folder}``."""
    path = exc.filename or exc.filename2
    if not path:
        return f"no space left on a disk ({one_line(exc)})"
    folder = os.path.dirname(os.path.abspath(str(path)))
    while folder and not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    try:
        stat = os.statvfs(folder)
        free = f"{stat.f_bavail * stat.f_frsize:,} bytes are free in {folder}"
    except OSError:
        free = f"under {folder}"
    return f"{path}: cannot write (no space left on the disk: {free})"


if __name__ == "__main__":
    sys.exit(main())
