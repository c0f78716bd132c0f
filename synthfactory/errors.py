"""Errors a user can act on: the CLI prints them as one line and exits non-zero.

Exit codes (``synthfactory.contract``, docs/contracts.md): 1 for a ``SynthfactoryError``
that a retry may cure (a throttled or unreachable store), 2 for a bad command line
(argparse), 3 for a ``PermanentError``: the same inputs would fail the same way, so
Airflow fails the task without spending its retries.
"""

from synthfactory.contract import EXIT_PERMANENT, EXIT_RETRYABLE


class SynthfactoryError(Exception):
    """A bad input or state, with a message naming the input and the problem."""

    exit_code = EXIT_RETRYABLE


class PermanentError(SynthfactoryError):
    """Bad input or a refused commit: retrying with the same inputs cannot succeed."""

    exit_code = EXIT_PERMANENT
