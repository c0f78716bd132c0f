"""The engine's exit codes, as the operators read them (docs/contracts.md).

The engine exits 2 for a bad command line and 3 for a SynthfactoryError, its default
(bad input, a refused commit): the same argv would fail the same way, so the task fails
without spending its retries. 1 (a RetryableError: a store that timed out, an engine
that died; or an unforeseen error) is retried.
The codes are the contract's (synthfactory.contract, standard library only): the one
module of the engine the Airflow layer imports.
"""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowFailException

from synthfactory.contract import NOT_RETRYABLE


def fail_without_retry_on(code: int | None, message: str) -> None:
    """Raise AirflowFailException (no retry) when ``code`` says a retry cannot help."""
    if code in NOT_RETRYABLE:
        raise AirflowFailException(f"{message} (exit code {code}: bad input, not retried)")
