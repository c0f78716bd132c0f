"""What a replica's failure tells the Ray pool's driver: stop or retry, and its line.

Our error comes back from a replica in one of two ways (docs/adr/0145). Raised in a task
(a shard, an engine's warm-up), Ray pickles it: ``RayTaskError.cause`` is the error
itself, its class and so its retry decision intact. Raised in a replica's ``__init__``,
only the text of its traceback comes back (``ActorDiedError``), and the error's record
is in it: a marked JSON line (``synthfactory.errors.carried_record``) that says retry or
not and the exit code, whatever the class is called. Anything else is Ray's own (the
process died, ran out of memory, lost its node): a later attempt may pass.
"""

from __future__ import annotations

from synthfactory.errors import RetryableError, SynthfactoryError, as_error, carried_record

MAX_CAUSE = 400  # characters of Ray's own message in a line of ours


def cause(exc: BaseException) -> str:
    """Our own error's message when the replica raised one; else Ray's message, shortened."""
    record = carried_record(exc)
    if record is not None:
        return record["message"]
    return " ".join(str(exc).split())[:MAX_CAUSE]


def start_error(exc: BaseException) -> SynthfactoryError:
    """A replica that could not start: ours fails the command as its record says (no
    CUDA, no model: the same again on the next attempt); Ray's own is retried."""
    record = carried_record(exc)
    if record is None:
        return RetryableError(f"a replica failed to start: {cause(exc)}")
    return as_error({**record, "message": f"a replica failed to start: {record['message']}"})


def task_error(exc) -> SynthfactoryError | None:
    """Our error that a replica's task raised (``exc``: Ray's ``RayTaskError``), the very
    error, with its class; None when the task failed with anything else."""
    return exc.cause if isinstance(exc.cause, SynthfactoryError) else None
