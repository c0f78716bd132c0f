"""Errors a user can act on: the CLI prints them as one line and exits non-zero.

Exit codes (``synthfactory.contract``, docs/contracts.md, docs/adr/0131): a
``SynthfactoryError`` exits 3 by default: a bad input or state that the same inputs
reproduce, so Airflow fails the task without spending its retries. Retry is the
exception: only a failure that a later attempt can cure (a timeout, an HTTP 5xx or
throttling that outlasted the client's own retries, a lost connection, a commit conflict,
an engine that died or ran out of memory, a store or cluster out of reach) raises a
``RetryableError``, which exits 1, as does an exception nobody foresaw (the CLI's
catch-all). 2 is a bad command line (argparse).
"""

from synthfactory.contract import EXIT_PERMANENT, EXIT_RETRYABLE


class SynthfactoryError(Exception):
    """A bad input or state, with a message naming the input and the problem; the same
    inputs fail the same way, so it is not retried."""

    exit_code = EXIT_PERMANENT


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
