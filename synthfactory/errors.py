"""Errors a user can act on: the CLI prints them as one line and exits non-zero.

Exit codes (docs/contracts.md): 1 for a ``SynthfactoryError`` that a retry may cure
(a throttled or unreachable store), 2 for a bad command line (argparse), 3 for a
``PermanentError``: the same inputs would fail the same way, so Airflow fails the task
without spending its retries.
"""

EXIT_ERROR = 1
EXIT_USAGE = 2  # argparse's own code for a bad option
EXIT_PERMANENT = 3
NOT_RETRYABLE_EXIT_CODES = frozenset({EXIT_USAGE, EXIT_PERMANENT})


class SynthfactoryError(Exception):
    """A bad input or state, with a message naming the input and the problem."""

    exit_code = EXIT_ERROR


class PermanentError(SynthfactoryError):
    """Bad input or a refused commit: retrying with the same inputs cannot succeed."""

    exit_code = EXIT_PERMANENT
