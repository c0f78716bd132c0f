"""Rephrase a task's shards on N engine replicas, Ray actors that pull from one queue.

One GPU pod of an 8-GPU node runs one driver and 8 replicas instead of 8 pods: each
replica loads its engine once and takes the next shard when it finishes one (work
stealing: a slow GPU holds back only its own shard). At most one shard is in flight
per replica, so the driver always knows who works on what:

- a replica that dies (GPU fault, OOM, SIGKILL) is restarted by Ray (``max_restarts``)
  and its shard goes back to the queue, at most ``max_shard_attempts`` times in all; the
  worker resumes it from its checkpoint parts;
- the engine runs inside the replica's own process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``),
  so when a replica dies its engine dies with it: no orphan holding GPU memory;
- one writer per shard is enforced in storage, not here: parts and ``_COMMITTED.json``
  are created only if absent, and a re-scan before the commit fails closed
  (``synthfactory.rephrase.checkpoint``), so a replica presumed dead that still writes
  can never commit beside its successor;
- a replica Ray gave a GPU but that cannot see CUDA fails at start, instead of running
  the CPU engine on a GPU node;
- on the CPU build each replica is pinned to its own cores (affinity and its own
  ``VLLM_CPU_OMP_THREADS_BIND``), so two replicas never fight over one core;
- with ``replicas_per_node`` K, replicas are pinned K to a node (hard node affinity):
  a replica whose node dies cannot be placed again (Ray says unschedulable), so it is
  given up and its shard goes back to the queue for the replicas on surviving nodes;
- and a replica takes its place on a node with room (one that joined the cluster, as
  KubeRay brings a lost worker back) as soon as there is one: the pool does not wait for
  Ray's verdict on the node (its health checks, ~15 s and more) once the replica stopped
  answering and another node has room. A replica started (or restarted) mid-run loads
  its engine before it takes a shard (``warm``), so the shards keep going to the
  replicas that can generate. ``SYNTHFACTORY_RAY_REPLACE_LOST=0``: no replacement, the
  run ends on the survivors (what that costs, measured: docs/rephrase.md, "What a lost
  node costs").

Ray is imported only here; ``rephrase --replicas 1`` without an address never loads it.
The pool starts the replicas; its driver (``ray_driver.Driver``) hands out the shards and
handles the events above, and ``ray_errors`` says what a replica's failure means.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from synthfactory import storage_retries
from synthfactory.errors import RECORDS_ENV, RetryableError
from synthfactory.rephrase import ray_errors
from synthfactory.rephrase.engine_registry import engine_kind
from synthfactory.rephrase.engine_spec import EngineSpec
from synthfactory.rephrase.ray_driver import Driver, Slot
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from synthfactory.rephrase.worker import warm as warm_shard_path

log = logging.getLogger(__name__)

REPLACE_LOST_ENV = "SYNTHFACTORY_RAY_REPLACE_LOST"


@dataclass(frozen=True)
class PoolOptions:
    replicas: int
    gpus_per_replica: float = 0.0  # 0 on the CPU build
    address: str | None = None  # None: a local Ray; "auto" inside a RayJob
    max_shard_attempts: int = 3  # per shard, over replica deaths (--max-shard-attempts)
    max_restarts: int = 2  # per replica
    replicas_per_node: int | None = None  # None: Ray places replicas by their resources
    # A pinned replica lost with its node is started again on a node with room (one that
    # joined, or a survivor with room to spare); SYNTHFACTORY_RAY_REPLACE_LOST=0: given
    # up, the run ends on the survivors (the old behaviour: docs/rephrase.md)
    replace_lost: bool = field(
        default_factory=lambda: os.environ.get(REPLACE_LOST_ENV, "1") != "0")
    node_poll_s: float = 1.0  # while a replacement waits for a node with room


class _Replica:
    """One engine, loaded once, rephrasing one shard at a time."""

    def __init__(self, spec: EngineSpec, index: int, cores: list[int] | None):
        import ray

        self.index = index
        gpu_ids = ray.get_gpu_ids()
        if gpu_ids:  # the offline engine's entry refuses a GPU slot it cannot see
            engine_kind(spec.engine).check_replica_devices(gpu_ids, index)
        if cores:
            os.sched_setaffinity(0, cores)
        self.spec = spec
        self.engine = None

    def ready(self) -> dict:
        import ray

        return {"replica": self.index, "pid": os.getpid(),
                "node": ray.get_runtime_context().get_node_id(),
                "cores": sorted(os.sched_getaffinity(0)),
                "omp_bind": os.environ.get("VLLM_CPU_OMP_THREADS_BIND")}

    def warm(self) -> dict:
        """``ready()`` once the engine is up and the shard path loaded (worker.warm): a
        replica started (or restarted) during the run does both before it takes a shard,
        so the shards go on to the replicas that can generate meanwhile."""
        started = time.monotonic()
        self._engine()
        engine_s = time.monotonic() - started
        warm_shard_path()
        return {**self.ready(), "engine_start_s": round(engine_s, 3),
                "warm_s": round(time.monotonic() - started - engine_s, 3)}

    def rephrase(self, shard_url: str, run_url: str | None, options: WorkerOptions) -> dict:
        import ray

        before = storage_retries.counts()
        return {**rephrase_shard(shard_url, run_url, self._engine, options),
                "replica": self.index, "node": ray.get_runtime_context().get_node_id(),
                # counted in this replica's process, which the driver's CLI cannot see
                "storage_retries": storage_retries.since(before)}

    def _engine(self):
        if self.engine is None:
            self.engine = self.spec.build()
        return self.engine


def replica_cores(replicas: int) -> list[list[int]]:
    """Split this process's cores into one disjoint set per replica (round robin when
    there are more replicas than cores, with a warning)."""
    cores = sorted(os.sched_getaffinity(0))
    if replicas > len(cores):
        log.warning("%d replicas on %d cores: replicas will share cores", replicas, len(cores))
        return [[cores[i % len(cores)]] for i in range(replicas)]
    per = len(cores) // replicas
    return [cores[i * per:(i + 1) * per] for i in range(replicas)]


def _bind(cores: list[int]) -> str:
    return f"{cores[0]}-{cores[-1]}" if cores == list(range(cores[0], cores[-1] + 1)) else \
        ",".join(map(str, cores))


def replica_env(cores: list[int] | None) -> dict[str, str]:
    """The environment of a replica's process (on its own ``cores``, when given)."""
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the engine dies with its replica
           RECORDS_ENV: "1"}  # a failed start reaches the driver as text: ours carry a record
    if cores:
        env["VLLM_CPU_OMP_THREADS_BIND"] = _bind(cores)
        # Ray sets OMP_NUM_THREADS to the actor's num_cpus when unset; said here so the
        # engine's threads match its cores (1 would halve a 2-core replica)
        env["OMP_NUM_THREADS"] = str(len(cores))
    return env


def placement_nodes(nodes: list[dict], replicas: int, per_node: int, cpus: float,
                    gpus: float) -> list[str]:
    """The node ID each replica is pinned to: ``per_node`` replicas on each of the first
    nodes (of ``ray.nodes()``, alive, with room for ``per_node`` replicas), in a stable
    order (address, then ID)."""
    fit = sorted((n for n in nodes if n.get("Alive")
                  and n["Resources"].get("CPU", 0) >= per_node * cpus
                  and n["Resources"].get("GPU", 0) >= per_node * gpus),
                 key=lambda n: (n.get("NodeManagerAddress", ""), n["NodeID"]))
    needed = -(-replicas // per_node)
    if len(fit) < needed:  # retryable: nodes may still be joining the cluster
        raise RetryableError(
            f"--replicas {replicas} --replicas-per-node {per_node}: needs {needed} alive "
            f"node(s) with {per_node * cpus:g} CPU(s) and {per_node * gpus:g} GPU(s) each; "
            f"the cluster has {len(fit)} such node(s) of {len(nodes)}")
    return [fit[i // per_node]["NodeID"] for i in range(replicas)]


def _engine_args_for(spec: EngineSpec, gpus: float) -> EngineSpec:
    """The spec a replica with ``gpus`` GPUs builds from: its engine's entry decides
    (the offline engine chooses its executor backend, engine_registry/offline.py)."""
    return engine_kind(spec.engine).for_replica(spec, gpus)


def rephrase_on_ray(shard_urls: list[str], run_url: str | None, spec: EngineSpec,
                    options: WorkerOptions, pool: PoolOptions,
                    on_result: Callable[[dict], None] | None = None
                    ) -> tuple[list[dict], dict]:
    """Every shard committed (or already committed) once; returns the per-shard results
    in ``shard_urls`` order and the pool's own figures. ``on_result`` sees each shard's
    result as it comes in (the task's metrics); it never fails the pool."""
    import ray
    from ray.exceptions import RayActorError

    started_here = not ray.is_initialized()
    if started_here:
        if pool.address:
            ray.init(address=pool.address, logging_level=logging.WARNING)
        else:
            ray.init(include_dashboard=False, logging_level=logging.WARNING)
    spec = _engine_args_for(spec, pool.gpus_per_replica)
    cpu_build = pool.gpus_per_replica == 0
    # A Ray started on this machine splits this process's cores among the replicas; on
    # a cluster Ray's own CPU accounting places them.
    local = pool.address in (None, "local")
    cores = replica_cores(pool.replicas) if cpu_build and local else [None] * pool.replicas
    cpus = [len(c) if c else 1 for c in cores]
    nodes: list[str | None] = [None] * pool.replicas
    if pool.replicas_per_node:
        nodes = list(placement_nodes(ray.nodes(), pool.replicas, pool.replicas_per_node,
                                     max(cpus), pool.gpus_per_replica))
    remote = ray.remote(_Replica)

    def start(index: int, node: str | None, replica_cores: list[int] | None):
        """A replica; pinned to ``node`` when given."""
        strategy = "DEFAULT"
        if node is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            # hard (soft=False): restarted on its own node or not at all, never doubled
            # up on a survivor whose cores another replica already uses
            strategy = NodeAffinitySchedulingStrategy(node, soft=False)
        return remote.options(
            num_gpus=pool.gpus_per_replica,
            num_cpus=len(replica_cores) if replica_cores else 1,
            scheduling_strategy=strategy, max_restarts=pool.max_restarts, max_task_retries=0,
            runtime_env={"env_vars": replica_env(replica_cores)}, name=None,
        ).remote(spec, index, replica_cores)

    actors = [start(i, nodes[i], cores[i]) for i in range(pool.replicas)]
    replicas = [Slot(actors[i], nodes[i], cores[i]) for i in range(pool.replicas)]

    def room(ray_nodes: list[dict], pinned: list[str], avoid: set[str]) -> str | None:
        return _room(ray_nodes, pinned, avoid, pool.replicas_per_node, max(cpus),
                     pool.gpus_per_replica)

    driver = Driver(ray, replicas, start, room, pool, shard_urls, run_url, options, on_result)
    try:
        try:  # a replica that cannot start (no CUDA, no model) fails the command at once
            started = ray.get([a.ready.remote() for a in actors])
        except RayActorError as exc:
            raise ray_errors.start_error(exc) from exc
        log.info("%d replica(s) ready: %s", len(actors), started)
        results, figures = driver.run()
        return results, {**figures, "replicas_per_node": pool.replicas_per_node,
                         "replica_processes": started + figures.pop("replacement_processes")}
    finally:
        for actor in driver.actors():  # replacements the driver started included
            ray.kill(actor, no_restart=True)
        if started_here:
            ray.shutdown()


def _room(ray_nodes: list[dict], pinned: list[str], avoid: set[str], per_node: int,
          cpus: float, gpus: float) -> str | None:
    """An alive node, not in ``avoid``, that has room for one more replica: fewer than
    ``per_node`` of ours pinned to it (``pinned``: the nodes of the replicas still
    working) and the resources for ``per_node`` of them; the first in the stable order of
    ``placement_nodes``."""
    count = {node: pinned.count(node) for node in set(pinned)}
    for node in sorted((n for n in ray_nodes if n.get("Alive") and n["NodeID"] not in avoid
                        and n["Resources"].get("CPU", 0) >= per_node * cpus
                        and n["Resources"].get("GPU", 0) >= per_node * gpus),
                       key=lambda n: (n.get("NodeManagerAddress", ""), n["NodeID"])):
        if count.get(node["NodeID"], 0) < per_node:
            return node["NodeID"]
    return None
