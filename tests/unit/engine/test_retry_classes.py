"""Which failures Airflow retries (docs/adr/0131): an error exits 3 unless a later
attempt may cure it, when it is a RetryableError and exits 1. These are the sites that
read the cause to decide: S3 listing errors, a parquet read, the errors that come back
wrapped by Spark and by Ray, and a wrapper that adds context."""

from __future__ import annotations

import traceback

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, NoRegionError

from synthfactory import cli, storage
from synthfactory.errors import PermanentError, RetryableError, SynthfactoryError
from synthfactory.training.lengths import spec_from_dict

PYTHON_WORKER = ("org.apache.spark.api.python.PythonException: Traceback (most recent call "
                 "last):\n  File \"reader.py\", line 9, in read\n{line}\n\tat org.apache...")


def _raise(error: BaseException):
    def run(*args, **kwargs):
        raise error
    return run


@pytest.mark.parametrize(("error", "code"), [
    (SynthfactoryError("bad"), 3), (PermanentError("bad"), 3), (RetryableError("timed out"), 1),
])
def test_the_cli_exits_1_only_for_a_retryable_error(monkeypatch, capsys, error, code):
    import synthfactory.plan as plan

    monkeypatch.setenv("SYNTHFACTORY_DEBUG", "0")  # restored after: main() may set it
    monkeypatch.setattr(plan, "run", _raise(error))
    assert cli.main(["plan", "--run", "file:///nowhere", "--max-shard-groups", "1"]) == code
    assert capsys.readouterr().err.strip().endswith(f"error: {error}")


def _client_error(code: str, status: int) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"},
                        "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": 9}},
                       "ListObjectsV2")


@pytest.mark.parametrize(("error", "kind"), [
    (_client_error("SlowDown", 503), RetryableError),
    (_client_error("BadGateway", 502), RetryableError),  # a 5xx the throttle list lacks
    (_client_error("InvalidArgument", 400), SynthfactoryError),
    (_client_error("NoSuchBucket", 404), SynthfactoryError),
    (_client_error("AccessDenied", 403), SynthfactoryError),
    (ConnectionClosedError(endpoint_url="http://s3"), RetryableError),
    (NoRegionError(), SynthfactoryError),
])
def test_an_s3_listing_error_is_retried_only_when_a_retry_may_cure_it(error, kind):
    from synthfactory.crawl.s3_lister import S3Lister

    class Client:
        list_objects_v2 = staticmethod(_raise(error))

    lister = S3Lister("s3://bucket/corpus", Client())
    with pytest.raises(SynthfactoryError) as raised:
        lister._list({"Bucket": "bucket", "Prefix": "corpus/", "MaxKeys": 10})
    assert type(raised.value) is kind


@pytest.mark.parametrize(("local", "error", "kind"), [
    (False, OSError("AWS Error NETWORK_CONNECTION during GetObject"), RetryableError),
    (False, pa.ArrowInvalid("Parquet magic bytes not found"), SynthfactoryError),
    (True, OSError("Input/output error"), SynthfactoryError),
])
def test_an_unreadable_parquet_is_retried_only_from_s3_and_for_io(monkeypatch, local, error,
                                                                   kind):
    fs = pafs.LocalFileSystem() if local else object()
    monkeypatch.setattr(storage, "filesystem", lambda url: (fs, "bucket/part.parquet"))
    monkeypatch.setattr(storage.pq, "read_table", _raise(error))
    with pytest.raises(SynthfactoryError, match="unreadable parquet") as raised:
        storage.read_table("s3://bucket/part.parquet")
    assert type(raised.value) is kind


def _traceback(kind: type[SynthfactoryError], message: str) -> str:
    """The text a worker sends of our error (``RECORDS_ENV`` set, as in a Spark worker or
    a Ray replica): its formatted traceback."""
    from synthfactory.errors import RECORDS_ENV

    with pytest.MonkeyPatch.context() as env:
        env.setenv(RECORDS_ENV, "1")
        try:
            raise kind(message)
        except SynthfactoryError as raised:
            return "".join(traceback.format_exception(raised))


class _NamedLikeNothingWeKnow(RetryableError):
    """A subclass no name search would recognise: its parent's decision still holds."""


@pytest.mark.parametrize(("error", "message", "kind"), [
    (SynthfactoryError, "seeds.parquet: column 'q' is not numeric", SynthfactoryError),
    (PermanentError, "seeds.parquet: missing column 'id'", SynthfactoryError),
    (RetryableError, "s3://b/x.parquet: unreadable parquet (AWS Error)", RetryableError),
    (storage.AlreadyExists, "s3://b/x/part-00000.parquet: exists", SynthfactoryError),
    (_NamedLikeNothingWeKnow, "timed out", RetryableError),
])
def test_our_error_from_a_spark_worker_keeps_its_retry_class(error, message, kind):
    from synthfactory.stitch.spark_errors import spark_failure

    text = PYTHON_WORKER.format(line=_traceback(error, message))
    ours = spark_failure(Exception(text), "m")
    assert type(ours) is kind and str(ours) == message
    assert ours.exit_code == error.exit_code


@pytest.mark.parametrize(("error", "message", "kind"), [
    (SynthfactoryError, "replica 0: Ray assigned GPU(s) [0] but CUDA is not visible",
     SynthfactoryError),
    (RetryableError, "timed out", RetryableError),
    (_NamedLikeNothingWeKnow, "timed out", RetryableError),
    (None, "The actor died unexpectedly before finishing this task (the worker process was "
           "killed by the kernel: out of memory)", RetryableError),
])
def test_a_replica_that_failed_to_start_is_retried_unless_our_own_error_says_no(error, message,
                                                                                kind):
    from synthfactory.rephrase.ray_errors import start_error

    text = message if error is None else "ActorDiedError: ... " + _traceback(error, message)
    started = start_error(Exception(text))
    assert type(started) is kind
    assert " ".join(str(started).split()).startswith(f"a replica failed to start: {message}")


def test_a_wrapper_that_adds_context_keeps_the_retry_class(monkeypatch):
    import synthfactory.training.run_data as run_data

    monkeypatch.setattr(run_data, "read_output_lengths", _raise(RetryableError("timed out")))
    with pytest.raises(RetryableError, match="spec.json: timed out"):
        spec_from_dict({"type": "empirical", "source": "s3://b/run"}, name="spec.json")
    monkeypatch.setattr(run_data, "read_output_lengths", _raise(SynthfactoryError("no parts")))
    with pytest.raises(SynthfactoryError, match="spec.json: no parts") as raised:
        spec_from_dict({"type": "empirical", "source": "s3://b/run"}, name="spec.json")
    assert type(raised.value) is SynthfactoryError
