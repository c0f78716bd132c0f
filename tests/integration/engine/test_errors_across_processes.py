"""Our errors cross a process as data (docs/adr/0145): each class, and subclasses that no
name search would know, raised in a real Ray task (a shard, through the pool's driver),
in a real Ray actor's creation (a replica that cannot start) and in a real Spark job (a
stitch worker); the driver decides retry or not, and the exit code, as the class does.

One local Ray (1 CPU) and one local Spark session (the module's, from conftest) serve
every class.
"""

from __future__ import annotations

import logging

import pytest

from synthfactory.errors import PermanentError, RetryableError, SynthfactoryError
from synthfactory.rephrase.checkpoint import ConcurrentWriter
from synthfactory.rephrase.endpoint import EndpointUnavailable
from synthfactory.storage import AlreadyExists


def _classes() -> list[tuple[type[SynthfactoryError], bool, int]]:
    """Each class with the decision the driver must reach: retried, and the exit code.
    The two subclasses are defined here, in a function, so that Ray and Spark ship them
    by value to their workers (this test module is not importable there)."""

    class SlowStore(RetryableError):
        """A name that says nothing of retrying: its parent decides."""

    class RivalCommitted(AlreadyExists):
        """A subclass of a subclass, two steps from SynthfactoryError."""

    return [(SynthfactoryError, False, 3), (PermanentError, False, 3),
            (RetryableError, True, 1), (AlreadyExists, False, 3),
            (ConcurrentWriter, True, 1), (EndpointUnavailable, True, 1),
            (SlowStore, True, 1), (RivalCommitted, False, 3)]


CLASSES = _classes()
IDS = [kind.__name__ for kind, _, _ in CLASSES]


def _decision(error: BaseException) -> tuple[bool, int]:
    """What the driver's command ends with: retried by Airflow (exit 1), and the exit code
    the CLI returns for it (``cli.main``: ``exc.exit_code``)."""
    assert isinstance(error, SynthfactoryError), repr(error)
    return isinstance(error, RetryableError), error.exit_code


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=1, include_dashboard=False, logging_level=logging.WARNING)
    yield ray
    ray.shutdown()


def _failing_replica(ray, kind: type[SynthfactoryError], in_init: bool):
    """An actor with the replica's methods that the driver calls, raising ``kind`` in its
    ``__init__`` or in its shard's task."""

    class Replica:
        def __init__(self):
            if in_init:
                raise kind(f"{kind.__name__} in a replica's __init__")

        def ready(self) -> dict:
            return {}

        def rephrase(self, shard_url, run_url, options) -> dict:
            raise kind(f"{kind.__name__} on {shard_url}")

    from synthfactory.rephrase.ray_pool import replica_env

    return ray.remote(Replica).options(  # the replicas' environment, as the pool starts them
        num_cpus=0, max_restarts=0, runtime_env={"env_vars": replica_env(None)}).remote()


@pytest.mark.parametrize(("kind", "retryable", "exit_code"), CLASSES, ids=IDS)
def test_a_shards_error_in_a_ray_task_reaches_the_driver_with_its_decision(
        ray_local, kind, retryable, exit_code):
    from synthfactory.rephrase.ray_driver import Driver, Slot
    from synthfactory.rephrase.ray_pool import PoolOptions

    driver = Driver(ray_local, [Slot(_failing_replica(ray_local, kind, False), None, None)],
                    start=None, room=None, pool=PoolOptions(replicas=1, replace_lost=False),
                    shard_urls=["file:///shard-0"], run_url=None, options=None)
    with pytest.raises(SynthfactoryError) as caught:
        driver.run()
    assert _decision(caught.value) == (retryable, exit_code)
    assert str(caught.value) == f"{kind.__name__} on file:///shard-0"


@pytest.mark.parametrize(("kind", "retryable", "exit_code"), CLASSES, ids=IDS)
def test_a_replica_that_cannot_start_reaches_the_driver_with_its_decision(
        ray_local, kind, retryable, exit_code):
    from ray.exceptions import RayActorError

    from synthfactory.rephrase.ray_errors import start_error

    replica = _failing_replica(ray_local, kind, True)
    with pytest.raises(RayActorError) as caught:  # only its traceback's text comes back
        ray_local.get(replica.ready.remote())
    error = start_error(caught.value)
    assert _decision(error) == (retryable, exit_code)
    assert str(error) == f"a replica failed to start: {kind.__name__} in a replica's __init__"


@pytest.mark.parametrize(("kind", "retryable", "exit_code"), CLASSES, ids=IDS)
def test_an_error_in_a_spark_worker_reaches_the_driver_with_its_decision(
        spark, kind, retryable, exit_code):
    from synthfactory.stitch.spark_errors import quiet_task_logs, spark_failure

    def worker(batches):
        raise kind(f"{kind.__name__} in a Spark worker")
        yield  # a generator, as mapInArrow wants

    quiet_task_logs(spark)
    with pytest.raises(Exception) as caught:  # noqa: B017 (Spark's own wrapper)
        spark.range(1).mapInArrow(worker, "id long").collect()
    error = spark_failure(caught.value, "file:///manifest")
    assert _decision(error) == (retryable, exit_code)
    assert str(error) == f"{kind.__name__} in a Spark worker"
