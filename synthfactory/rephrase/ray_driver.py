"""The Ray pool's driver: hands shards to replicas, one at a time each, until every shard
has come back, and deals with what happens meanwhile (docs/rephrase.md, ADR 0056).

Each replica's state is one ``Slot``; the driver's own fields are the work (the queue,
what is in flight, the results) and the pool's events. Each event has its method: a
shard came back (done, or its replica was lost with it), a (re)started replica answered
its probe, a replacement is started on a node with room, the work finished. The driver
keeps its own list of slots (replacements join it); the pool stops every actor in it
when the run ends. Ray is imported by the pool before a driver exists
(``ray_pool.rephrase_on_ray``), never when this module is.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from synthfactory.errors import RetryableError
from synthfactory.rephrase import ray_errors

log = logging.getLogger(__name__)

PROBE_RETRY_S = 0.5  # a replica Ray is still restarting is asked again after this


@dataclass
class Slot:
    """One replica: its actor, the node it is pinned to (None: Ray places it) and its
    cores (a local Ray's share of this machine, else None), and what the driver knows of
    it."""

    actor: object
    node: str | None
    cores: list[int] | None
    alive: bool = True  # False: given up (restarts exhausted, its node gone, replaced)
    deaths: int = 0  # times its process died with a shard
    # a suspect: its process stopped answering while Ray still calls its node alive (it
    # says so only after its health checks, ~15 s and more); the revival probe's ref
    suspect_probe: object | None = None
    wanted: bool = False  # given up, its place still empty: a replacement is wanted
    replaced_by: int | None = None  # the replica started in its place


class Driver:
    """One run of the pool over ``shard_urls``: ``start(index, node, cores)`` starts a
    replica's actor, ``room(ray_nodes, pinned, avoid)`` is a node with room for one more
    (or None), ``pool`` the ``PoolOptions``; ``on_result`` sees each shard's result as it
    comes in and never fails the run."""

    def __init__(self, ray, slots: list[Slot], start: Callable, room: Callable, pool,
                 shard_urls: list[str], run_url: str | None, options,
                 on_result: Callable[[dict], None] | None = None):
        from ray import exceptions

        self.ray, self.start, self.room, self.pool = ray, start, room, pool
        self.slots = list(slots)  # the driver's own: replacements join it
        self.shard_urls, self.run_url, self.options = shard_urls, run_url, options
        self.on_result = on_result
        self.unavailable = exceptions.ActorUnavailableError  # still restarting
        self.unschedulable = exceptions.ActorUnschedulableError  # its node is gone
        # its process died (RayActorError), or its node did
        self.lost = (exceptions.RayActorError, exceptions.ActorUnschedulableError)
        self.failed_task = exceptions.RayTaskError  # the task's own exception
        self.queue = deque((url, 1) for url in shard_urls)
        self.idle = deque(range(len(slots)))  # replicas waiting for a shard, in turn
        # ref -> (replica, shard URL or None for a revival probe, attempt)
        self.in_flight: dict = {}
        self.results: dict[str, dict] = {}
        self.requeued = 0
        # what happened when (wall clock): where a lost node's time goes
        self.events: list[dict] = []
        # Replacing a lost replica: pinned pools only (an unpinned one is restarted by Ray
        # wherever there is room)
        self.replacing = bool(pool.replicas_per_node) and pool.replace_lost
        self.replacement_processes: list[dict] = []
        self.dead_nodes: set[str] = set()

    def actors(self) -> list:
        """Every replica's actor, replacements included: the pool stops them all."""
        return [slot.actor for slot in self.slots]

    def _alive(self) -> list[int]:
        return [i for i, slot in enumerate(self.slots) if slot.alive]

    def _suspects(self) -> list[int]:
        return [i for i, slot in enumerate(self.slots) if slot.suspect_probe is not None]

    def run(self) -> tuple[list[dict], dict]:
        """Every shard's result, in ``shard_urls`` order, and the pool's figures."""
        while self.queue or any(url for _, url, _ in self.in_flight.values()):
            if self._looking_for_room():
                self.replace_where_room()
            if not self._alive():
                raise RetryableError("every replica is gone (died more often than "
                                     f"max_restarts {self.pool.max_restarts}, or its node "
                                     f"did); giving up with {len(self.queue)} shard(s) left")
            self._hand_out()
            ready, _ = self.ray.wait(  # look for room again in a second while it is wanted
                list(self.in_flight), num_returns=1,
                timeout=self.pool.node_poll_s if self._looking_for_room() else None)
            if not ready:
                continue
            ref = ready[0]
            index, url, attempt = self.in_flight.pop(ref)
            if url is None:
                self.probe_answered(ref, index)
            else:
                self.shard_returned(ref, index, url, attempt)
        return self.finished()

    def shard_returned(self, ref, index: int, url: str, attempt: int) -> None:
        """Its result is in; or its replica was lost with it; or it failed on its own (a
        retry on another replica is no cure: a bad input, a rival writer), which stops
        the task."""
        try:
            self.results[url] = self.ray.get(ref)
        except self.lost as exc:  # its process or its node died
            self.replica_lost(index, url, attempt, exc)
            return
        except self.failed_task as exc:
            ours = ray_errors.task_error(exc)
            if ours is not None:
                raise ours from None
            raise
        if self.on_result is not None:
            try:
                self.on_result(self.results[url])
            except Exception as exc:  # metrics must never fail the wave
                log.warning("metrics: %s", exc)
        self._event("done", index, url)
        self.idle.append(index)

    def replica_lost(self, index: int, url: str, attempt: int, exc: BaseException) -> None:
        """The replica died on ``url``: the shard goes back to the queue, first in line (it
        has parts to resume), unless it used up its attempts; the replica waits for Ray
        to restart it (a probe), or is given up when its node is gone."""
        self.slots[index].deaths += 1
        self._event("lost", index, url, error=type(exc).__name__)
        if attempt >= self.pool.max_shard_attempts:
            raise RetryableError(
                f"{url}: its replica died {attempt} time(s) (max attempts "
                f"{self.pool.max_shard_attempts}); last: {ray_errors.cause(exc)}") from exc
        log.warning("replica %d died on %s (attempt %d): %s; the shard goes back to the "
                    "queue", index, url, attempt, ray_errors.cause(exc))
        self.queue.appendleft((url, attempt + 1))
        self.requeued += 1
        if isinstance(exc, self.unschedulable):  # pinned to a node that is gone
            self.give_up(index, exc)
        else:  # no work for it until Ray has restarted it: the probe resolves then
            probe = self._probe(index)
            if self.replacing:
                self.slots[index].suspect_probe = probe

    def probe_answered(self, ref, index: int) -> None:
        """A (re)started replica's probe: its engine is up and it takes shards; or Ray is
        still restarting it (ask again); or it is gone for good; or its engine cannot
        start (no cure elsewhere either: the task stops)."""
        try:
            info = self.ray.get(ref)
        except self.unavailable:
            time.sleep(PROBE_RETRY_S)
            probe = self._probe(index)
            if self.slots[index].suspect_probe is not None:
                self.slots[index].suspect_probe = probe
            return
        except self.lost as exc:  # restarts exhausted, or no node
            self.give_up(index, exc)
            return
        except self.failed_task as exc:
            ours = ray_errors.task_error(exc)
            if ours is not None:
                raise ours from None
            raise
        self.slots[index].suspect_probe = None
        if index >= self.pool.replicas and index not in {
                p["replica"] for p in self.replacement_processes}:
            self.replacement_processes.append(
                {k: v for k, v in info.items() if k not in ("engine_start_s", "warm_s")})
        self._event("ready", index, engine_start_s=info["engine_start_s"],
                    warm_s=info.get("warm_s"))
        self.idle.append(index)

    def give_up(self, index: int, exc: BaseException) -> None:
        """The replica is gone for good (restarts exhausted, or its node is gone); its
        place is wanted for a replacement while replacements are allowed."""
        slot = self.slots[index]
        slot.alive, slot.suspect_probe = False, None
        self._event("gone", index, error=type(exc).__name__)
        log.warning("replica %d is gone for good: %s", index, ray_errors.cause(exc))
        if isinstance(exc, self.unschedulable) and slot.node:
            self.dead_nodes.add(slot.node)
        replaced_or_wanted = sum(s.replaced_by is not None or s.wanted for s in self.slots)
        if self.replacing and replaced_or_wanted < (
                self.pool.replicas * max(1, self.pool.max_restarts)):
            slot.wanted = True

    def replace_where_room(self) -> None:
        """Start a replica on a node with room for each one given up, and in place of
        each suspect as soon as another node has room (the suspect is killed first: one
        replica per place, and its shard is already back in the queue)."""
        ray_nodes = self.ray.nodes()
        self.dead_nodes.update(n["NodeID"] for n in ray_nodes if not n.get("Alive"))
        for index in self._suspects():
            slot = self.slots[index]
            if slot.node in self.dead_nodes:
                self.ray.kill(slot.actor, no_restart=True)
                self.in_flight.pop(slot.suspect_probe, None)
                self.give_up(index, self.unschedulable(f"replica {index}: its node is dead"))
        wanted = [i for i, slot in enumerate(self.slots) if slot.wanted]
        for index in wanted + self._suspects():
            pinned = [s.node for s in self.slots if s.alive and s.suspect_probe is None]
            node = self.room(ray_nodes, pinned, self.dead_nodes | {self.slots[index].node})
            if node is not None:
                self.replacement_started(index, node)

    def replacement_started(self, index: int, node: str) -> None:
        """A new replica on ``node`` in place of ``index`` (a suspect is fenced first: never
        two replicas of one place at work); it takes shards once its engine is up."""
        old = self.slots[index]
        if old.suspect_probe is not None:
            self.ray.kill(old.actor, no_restart=True)
            self.in_flight.pop(old.suspect_probe, None)
            old.alive, old.suspect_probe = False, None
            self._event("gone", index, error="replaced while unreachable")
        old.wanted = False
        new = len(self.slots)
        self.slots.append(Slot(self.start(new, node, old.cores), node, old.cores))
        old.replaced_by = new
        self._event("replacing", new, node=node, instead_of=index)
        log.warning("replica %d starts on node %s in place of replica %d", new, node, index)
        self._probe(new)

    def finished(self) -> tuple[list[dict], dict]:
        """The results in ``shard_urls`` order, and what the run cost in replicas."""
        figures = {"replicas": self.pool.replicas,
                   "actor_deaths": sum(s.deaths for s in self.slots),
                   "requeued": self.requeued,
                   "replicas_gone": [i for i, s in enumerate(self.slots) if not s.alive],
                   "replaced": [i for i, s in enumerate(self.slots)
                                if s.replaced_by is not None],
                   "events": self.events,
                   "replacement_processes": self.replacement_processes}
        return [self.results[url] for url in self.shard_urls], figures

    def _looking_for_room(self) -> bool:
        return self.replacing and any(s.wanted or s.suspect_probe is not None
                                      for s in self.slots)

    def _hand_out(self) -> None:
        while self.queue and self.idle:
            index = self.idle.popleft()
            url, attempt = self.queue.popleft()
            ref = self.slots[index].actor.rephrase.remote(url, self.run_url, self.options)
            self.in_flight[ref] = (index, url, attempt)
            self._event("handed", index, url, attempt=attempt)

    def _probe(self, index: int):
        """Ask the replica to load its engine (``warm``); its answer is the probe's event."""
        probe = self.slots[index].actor.warm.remote()
        self.in_flight[probe] = (index, None, 0)
        return probe

    def _event(self, name: str, index: int, url: str | None = None, **extra) -> None:
        self.events.append({"t": round(time.time(), 3), "event": name, "replica": index,
                            "shard": url, **extra})
