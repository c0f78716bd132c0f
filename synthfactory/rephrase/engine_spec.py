"""What it takes to build a generation engine, as a small picklable value.

The single-process worker builds its engine from it, and so does every Ray replica in
its own process (an engine cannot be pickled; its recipe can). What each engine makes
of it, and its own ``settings``, is its registry entry's (engine_registry/).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from synthfactory.rephrase.engine_registry import DEFAULT_ENGINE, engine_kind


@dataclass(frozen=True)
class EngineSpec:
    model: str
    engine: str = DEFAULT_ENGINE  # its name in the registry (--engine)
    engine_args: dict = field(default_factory=dict)  # the user's: they always win
    # the sweep's winner next to the model (read_tuned), applied by the engine only on
    # the hardware it was measured on: a Ray replica decides on its own node
    tuned: dict | None = None
    sampling: dict = field(default_factory=dict)
    max_in_flight: int = 256
    # the context window the shards were cut for (rephrase --max-model-len); None: unknown
    window: int | None = None
    # the engine's own settings from its own flags (engine_registry: EchoSettings,
    # EndpointSettings); never a secret: an endpoint's key is read where it is built
    settings: object | None = None

    def build(self):
        return engine_kind(self.engine).build(self)
