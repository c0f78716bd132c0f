"""Spark failures as one line naming the input.

A failing task reaches the driver wrapped several times (PythonException around the
worker's traceback, Py4JJavaError around a Java stack) and is also logged, traceback
and all, by Spark's task loggers. The stitch command turns it into one line
(``spark_failure``): ours (a SynthfactoryError raised in a worker, a subclass included)
verbatim, retried and exiting as its record says (the marked JSON line each of our errors
prints with its traceback: ``synthfactory.errors.carried_record``, docs/adr/0145), anything
else as the innermost exception line under the input's name; the task loggers stay quiet
unless --debug.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile

from synthfactory.contract import DEBUG_ENV
from synthfactory.errors import (
    PermanentError,
    RetryableError,
    SynthfactoryError,
    as_error,
    carried_record,
)

# The loggers that print a failed task's whole Python traceback (driver and local executor).
TASK_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager",
                "org.apache.spark.storage.BlockManager")
_PYTHON_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*: \S")
# A worker's exception that a later attempt may not meet: I/O (pyarrow's S3 errors are a
# plain OSError), a lost connection, a timeout, memory. FileNotFoundError and the data's
# own errors (a cast, a missing column) are not in it: the same files fail the same way.
_TRANSIENT_PYTHON = re.compile(
    r"^(?:[\w.]*\.)?(?:OSError|IOError|\w*ConnectionError|ConnectionResetError|"
    r"BrokenPipeError|\w*Timeout\w*|MemoryError):")
MAX_REASON = 400
# a full disk, whichever side met it: Python's errno, Java's IOException
_NO_SPACE = re.compile(r"No space left on device|\[Errno 28\]|ENOSPC")


def check_master(master: str) -> None:
    """Spark reports a bad master only as "Java gateway process exited"; say it first."""
    if master == "yarn" or master.startswith(("local", "spark://", "k8s://")):
        return
    raise PermanentError(f"--master {master}: not a Spark master URL (local[*], "
                         "spark://HOST:PORT, k8s://https://HOST or yarn)")


def spark_failure(exc: BaseException, manifest: str) -> SynthfactoryError:
    """The error a failed Spark job ends the command with: ours from a Python worker as
    its record says (message, retry decision, exit code), else the innermost cause
    under ``--manifest``, retried when a later attempt may not meet it."""
    ours = our_error(exc)
    if ours is not None:
        return ours
    if _NO_SPACE.search(str(exc)):  # Spark's local folder (shuffle, broadcast) is full
        return SynthfactoryError(f"--manifest {manifest}: the Spark job failed "
                                 f"({spark_reason(exc)}): {local_folders_full()}")
    kind = RetryableError if may_pass_on_retry(exc) else SynthfactoryError
    return kind(f"--manifest {manifest}: the Spark job failed ({spark_reason(exc)}; "
                "rerun with --debug for Spark's task log)")


def local_folders_full() -> str:
    """Spark's local folders (SPARK_LOCAL_DIRS, else the temp folder) and the bytes free
    in each. Not retried (a SynthfactoryError): a full disk stays full until someone acts,
    and each of Airflow's retries would fill it again."""
    named = os.environ.get("SPARK_LOCAL_DIRS", "")
    folders = [f for f in named.split(",") if f] or [tempfile.gettempdir()]
    free = []
    for folder in folders:
        try:
            stat = os.statvfs(folder)
            free.append(f"{stat.f_bavail * stat.f_frsize:,} bytes are free in {folder}")
        except OSError:
            free.append(f"{folder} cannot be read")
    source = "SPARK_LOCAL_DIRS" if named else "the temp folder: set SPARK_LOCAL_DIRS"
    return (f"no space left on the disk of Spark's local folder ({source}): "
            + "; ".join(free))


def our_error(exc: BaseException) -> SynthfactoryError | None:
    """The SynthfactoryError raised inside a Spark Python worker, if any, rebuilt from its
    record: only text crosses the JVM, and the record is the part of it that is data."""
    record = carried_record(exc)
    return None if record is None else as_error(record)


def may_pass_on_retry(exc: BaseException) -> bool:
    """Whether a Spark failure that is not ours may pass on a later attempt: a Python
    worker's exception other than I/O, connection, timeout or memory comes from the data
    and fails the same way again; a failure on the JVM side (a lost executor, an OOM, a
    lost shuffle block) may not."""
    if "Traceback (most recent call last)" not in str(exc):
        return True
    return bool(_TRANSIENT_PYTHON.match(spark_reason(exc)))


def spark_reason(exc: BaseException) -> str:
    """The innermost cause of a Spark failure, on one line."""
    text = str(exc)
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in text:  # a Python worker's exception
        raised = [line for line in lines if _PYTHON_EXCEPTION_LINE.match(line)]
        if raised:
            return _cap(raised[-1])
    java = getattr(exc, "java_exception", None)  # py4j.protocol.Py4JJavaError
    if java is not None:
        try:
            return _cap(str(java.toString()).splitlines()[0])
        except Exception:  # the gateway may be gone already: fall back to the text
            pass
    return _cap(f"{type(exc).__name__}: {lines[0] if lines else '(no message)'}")


def quiet_task_logs(spark) -> None:
    """Silence the loggers that repeat a failed task's traceback, unless debugging; the
    failure still reaches the driver and is reported in one line. py4j's INFO lines go
    too: its "Closing down clientserver connection" comes at exit, after our line."""
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        return
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        jvm = spark.sparkContext._jvm
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in TASK_LOGGERS:
            configurator.setLevel(name, off)
    except Exception:  # another logging backend: noisier, not wrong
        pass


def _cap(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= MAX_REASON else line[:MAX_REASON] + "..."
