"""Requests to object storage tried again, counted by cause, for this process.

Throttling that lasts costs a day before it fails a step: S3 answers a share of the
requests with 503 SlowDown for minutes, each is retried with backoff and the step only
gets slower. So every retry a step's S3 calls make is counted here, by cause, and the
step shows the counts in its summary (``storage_retries``), its run folder
(``storage_retries/``, summed into report.json and the Run report) and the Prometheus
counter ``synthfactory_storage_retries_total{step, cause}`` (docs/storage-faults.md).

Two clients make the requests (storage.py): boto3 for the conditional writes (rephrase's
parts and commits) and their read-backs, counted by a ``needs-retry`` observer on the
client; pyarrow for the rest, whose C++ client retries inside itself with no hook a
Python caller can see, so what is counted of pyarrow is each read storage.py tries again
after pyarrow gave up (docs/adr/0155).
"""

from __future__ import annotations

import re
import threading
from collections import Counter

CAUSES = ("throttled", "server_error", "connection")

_lock = threading.Lock()
_counts: Counter[str] = Counter()

_THROTTLED_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
                    "TooManyRequests", "TooManyRequestsException", "RequestThrottled"}
_THROTTLED_TEXT = re.compile(r"HTTP status (503|429)|SLOW_DOWN|THROTTLING|SlowDown")
_CONNECTION_TEXT = re.compile(r"NETWORK_CONNECTION|curlCode|REQUEST_TIMEOUT|[Cc]onnection")


def count(cause: str) -> None:
    with _lock:
        _counts[cause] += 1


def counts() -> dict[str, int]:
    """{cause: retries} of this process so far, causes with none left out."""
    with _lock:
        return {cause: _counts[cause] for cause in CAUSES if _counts[cause]}


def since(before: dict[str, int]) -> dict[str, int]:
    """The retries counted after ``before`` (an earlier ``counts()``)."""
    now = counts()
    return {c: now.get(c, 0) - before.get(c, 0) for c in CAUSES
            if now.get(c, 0) - before.get(c, 0)}


def add(total: dict[str, int], more: dict[str, int] | None) -> dict[str, int]:
    """``total`` with ``more`` added, cause by cause (a new dict)."""
    out = dict(total)
    for cause, n in (more or {}).items():
        out[cause] = out.get(cause, 0) + int(n)
    return out


def cause_of_message(text: str) -> str:
    """The cause of an error pyarrow raised (its message is all it gives)."""
    if _THROTTLED_TEXT.search(text):
        return "throttled"
    if _CONNECTION_TEXT.search(text):
        return "connection"
    return "server_error"


def _cause_of_answer(response, caught_exception) -> str | None:
    """The cause of a botocore attempt that failed in a way it retries, else None."""
    if caught_exception is not None:
        return "connection"  # reset, timeout, no connection: botocore's retryable ones
    if not response:
        return None
    http, parsed = response
    status = getattr(http, "status_code", 0)
    code = (parsed or {}).get("Error", {}).get("Code", "")
    if status in (429, 503) or code in _THROTTLED_CODES:
        return "throttled"
    if status >= 500:
        return "server_error"
    return None


def observe(client, max_attempts: int) -> None:
    """Count the retries ``client`` (a boto3 client) makes: botocore asks every
    ``needs-retry`` handler after each attempt; this one only looks, and counts an
    attempt that failed in a retryable way while attempts are left."""

    def needs_retry(response=None, attempts=1, caught_exception=None, **_):
        if attempts < max_attempts:
            cause = _cause_of_answer(response, caught_exception)
            if cause:
                count(cause)
        return None  # never decides: botocore's own handler does

    client.meta.events.register_first("needs-retry.s3", needs_retry)
