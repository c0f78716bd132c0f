"""The engine's exit codes, as the operators read them (docs/contracts.md).

The engine exits 2 for a bad command line and 3 for a PermanentError (bad input, a
refused commit): the same argv would fail the same way, so the task fails without
spending its retries. 1 (a store that timed out, an unforeseen error) is retried.
Kept here, not imported from synthfactory.errors: the Airflow layer never imports the
engine.
"""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowFailException

NOT_RETRYABLE = frozenset({2, 3})


def fail_without_retry_on(code: int | None, message: str) -> None:
    """Raise AirflowFailException (no retry) when ``code`` says a retry cannot help."""
    if code in NOT_RETRYABLE:
        raise AirflowFailException(f"{message} (exit code {code}: bad input, not retried)")
