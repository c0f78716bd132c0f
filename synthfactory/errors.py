"""Errors a user can act on: the CLI prints them as one line and exits non-zero.

Exit codes (``synthfactory.contract``, docs/contracts.md, docs/adr/0131): a
``SynthfactoryError`` exits 3 by default: a bad input or state that the same inputs
reproduce, so Airflow fails the task without spending its retries. Retry is the
exception: only a failure that a later attempt can cure (a timeout, an HTTP 5xx or
throttling that outlasted the client's own retries, a lost connection, a commit conflict,
an engine that died or ran out of memory, a store or cluster out of reach) raises a
``RetryableError``, which exits 1, as does an exception nobody foresaw (the CLI's
catch-all). 2 is a bad command line (argparse).

Across a process (docs/adr/0145): a Spark Python worker's error and a Ray replica's
failed start reach the driver only as the text of their traceback. In such a process
(``RECORDS_ENV`` set: the Spark session and the Ray pool set it for their workers) each
of our errors carries its record (its class, its retry decision, its exit code, its
message) as one marked JSON line, a note that every formatted traceback of it prints,
and the driver reads the decision from that line (``carried_record``), never from a
class name.
"""

import json
import os

from synthfactory.contract import EXIT_PERMANENT, EXIT_RETRYABLE

# Not a Python exception line ("name: message" with no space in the name), so nothing
# that looks for the innermost exception line in a traceback mistakes it for one.
RECORD_MARK = "synthfactory error record: "
# "1" in a worker whose errors reach its driver as text; unset elsewhere, where the note
# would only lengthen tracebacks and the messages that tests match
RECORDS_ENV = "SYNTHFACTORY_ERROR_RECORDS"


class SynthfactoryError(Exception):
    """A bad input or state, with a message naming the input and the problem; the same
    inputs fail the same way, so it is not retried."""

    exit_code = EXIT_PERMANENT

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        # at birth, so a raise anywhere in a worker carries it, without a wrapper around
        # each function that Spark or Ray runs there
        if os.environ.get(RECORDS_ENV) == "1":
            self.add_note(RECORD_MARK + json.dumps(error_record(self)))


class PermanentError(SynthfactoryError):
    """Kept for the raise sites and ``except PermanentError`` clauses written when the
    base error was retryable: the same exit code as its base, and the same narrower
    catch as before."""

    exit_code = EXIT_PERMANENT


class RetryableError(SynthfactoryError):
    """A failure a later attempt may cure with the same inputs: Airflow retries it."""

    exit_code = EXIT_RETRYABLE


def same_kind(exc: SynthfactoryError, message: str) -> SynthfactoryError:
    """``message`` as an error that is retried exactly when ``exc`` is: a wrapper that
    adds context must not turn a timeout into a bad input."""
    return (RetryableError if isinstance(exc, RetryableError) else SynthfactoryError)(message)


def error_record(exc: SynthfactoryError) -> dict:
    """What another process needs to know of our error: its class (for the reader), its
    retry decision and exit code (a subclass has its parent's: the class hierarchy
    decides, not the name) and its message."""
    kind = type(exc)
    return {"type": f"{kind.__module__}.{kind.__qualname__}",
            "retryable": isinstance(exc, RetryableError), "exit_code": exc.exit_code,
            "message": str(exc)}


def carried_record(exc: BaseException) -> dict | None:
    """The record of our error that another process raised, read from the text that
    reached this one (``exc``'s message: a Spark job's failure, a Ray actor that died in
    its creation); the last one when there are several (an error of ours re-raised as
    another of ours, each printed in the chain); None when none of ours is in it."""
    lines = [line.split(RECORD_MARK, 1)[1] for line in str(exc).splitlines()
             if RECORD_MARK in line]
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:  # cut short by whoever shortened the text: look further back
            continue
        if isinstance(record, dict) and {"retryable", "exit_code", "message"} <= set(record):
            return record
    return None


def as_error(record: dict) -> SynthfactoryError:
    """The error to raise here for ``record``: retried exactly when the remote one was,
    exiting with its code, with its message."""
    error = (RetryableError if record["retryable"] else SynthfactoryError)(record["message"])
    error.exit_code = record["exit_code"]
    return error
