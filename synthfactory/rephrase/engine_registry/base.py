"""What an engine's registry entry answers: one method per question a command would
otherwise answer by branching on the engine's name (docs/adr/0135).

The defaults here are those of an engine that is neither loaded on this process's
devices nor talked to over the network (the echo engine's); an entry overrides what
its engine does differently.
"""

from __future__ import annotations

import argparse
from typing import Protocol, TypeVar


class Recipe(Protocol):
    """What an entry reads of ``engine_spec.EngineSpec``: stated here so that the registry
    needs nothing of the spec's module, which imports the registry (its ``build``)."""

    model: str
    engine_args: dict
    tuned: dict | None
    sampling: dict
    max_in_flight: int
    window: int | None
    settings: object | None


SpecT = TypeVar("SpecT", bound=Recipe)


def describe(exc: BaseException) -> str:
    """The engine's own message; for vLLM's pydantic config errors just the reasons,
    without the dump of every argument."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            reasons = [e["msg"] for e in errors() if isinstance(e, dict) and e.get("msg")]
        except Exception:  # not pydantic's errors(): fall back to str()
            reasons = []
        if reasons:
            return f"{type(exc).__name__}: " + "; ".join(reasons)
    return f"{type(exc).__name__}: {exc}"


class EngineKind:
    """One engine: its name on the command line, its flags, its checks, its defaults,
    the spec's settings it takes from its flags, and the engine it builds."""

    name: str = ""
    # the commands that can run it, each with its line in that command's --engine help
    commands: dict[str, str] = {}
    # it runs on this process's devices: GPUs per Ray replica, grid entries a CPU cannot
    # run, a sweep's winner written next to the model (a server's devices are not ours)
    local_devices: bool = False

    # -- flags and checks, before any shard is read ------------------------------------
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The engine's own flags (added for every engine a command can run)."""

    def check(self, args: argparse.Namespace) -> None:
        """The engine's flags make sense together."""

    def check_pool(self) -> None:
        """Ray replicas (``--replicas``, ``--ray-address``, ``--replicas-per-node``) run
        this engine."""

    def check_engine_args(self, given: dict, model: str, window: int | None) -> dict | None:
        """``--engine-args`` (``given``) checked for this engine; returns the sweep's
        winner next to the model that the engine may apply (None: none, or not ours)."""
        return None

    def settings(self, args: argparse.Namespace) -> object | None:
        """The engine's own part of the spec, from its flags (picklable: Ray)."""
        return None

    # -- construction ------------------------------------------------------------------
    def build(self, spec: Recipe):
        """The engine (``engines.GenerationEngine``) the spec describes."""
        raise NotImplementedError

    def default_gpus_per_replica(self) -> float:
        return 0.0

    def for_replica(self, spec: SpecT, gpus: float) -> SpecT:
        """The spec a Ray replica with ``gpus`` GPUs builds from."""
        return spec

    def check_replica_devices(self, gpu_ids: list, index: int) -> None:
        """A Ray replica was given GPUs ``gpu_ids``: can the engine use them?"""

    def replay_basis(self, spec: Recipe):
        """What besides the request decides this engine's outputs
        (``replay.key.KeyBasis``), known without starting it: the task may need no engine
        at all when every attempt is replayed (docs/adr/0150)."""
        from synthfactory.rephrase.replay.key import basis, model_identity

        return basis(self.name, model_identity(spec.model), {}, seeded=False)

    # -- what the task says of it ------------------------------------------------------
    def summary(self, engine) -> dict:
        """Keys of the task's summary (one process, no Ray) about its engine, None when
        no shard needed one."""
        return {}

    # -- the sweep (entries with a "sweep" line in ``commands``) -----------------------
    def check_grid_entry(self, config: dict, where: str) -> None:
        raise NotImplementedError(f"{self.name}: not an engine the sweep measures")

    def sweep_claim(self, args: argparse.Namespace) -> dict:
        """Keys the sweep folder's claim carries about the engine (a rerun must match)."""
        return {}

    def trial_spec(self, args: argparse.Namespace) -> dict:
        """Keys each trial process needs about the engine (never a secret)."""
        return {}

    def trial_engine(self, spec: dict):
        """The engine a sweep trial measures, from its spec (trial.py)."""
        raise NotImplementedError(f"{self.name}: not an engine the sweep measures")

    def warm_up_budget(self, engine, max_tokens: int):
        """A context manager: while inside, ``engine`` generates at most ``max_tokens`` a
        request (an entry's is a ``contextmanager``)."""
        raise NotImplementedError(f"{self.name}: not an engine the sweep measures")

    def effective(self, engine) -> dict:
        """What the engine actually used, for the sweep's report."""
        return {}

    def note_winner(self, args: argparse.Namespace, engine_args: dict,
                    provenance: dict) -> None:
        """Add to the winner's provenance, and say, what a winner not written next to
        the model is and how to use it."""
