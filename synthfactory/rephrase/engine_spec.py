"""What it takes to build a generation engine, as a small picklable value.

The single-process worker builds its engine from it, and so does every Ray replica in
its own process (an engine cannot be pickled; its recipe can).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from synthfactory.errors import SynthfactoryError
from synthfactory.rephrase.engines import EchoEngine

ENGINES = ("vllm", "echo")


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


@dataclass(frozen=True)
class EngineSpec:
    model: str
    engine_args: dict = field(default_factory=dict)
    sampling: dict = field(default_factory=dict)
    engine: str = "vllm"  # "echo": the deterministic stand-in, for tests and dry runs
    echo_delay_s: float = 0.0  # echo only: seconds per poll, to make a shard take time

    def build(self):
        if self.engine == "echo":
            return SlowEcho(self.echo_delay_s) if self.echo_delay_s else EchoEngine()
        if self.engine != "vllm":
            raise SynthfactoryError(f"--engine {self.engine!r}: expected one of {ENGINES}")
        from synthfactory.rephrase.engines import VllmEngine

        try:
            return VllmEngine(self.model, self.engine_args, self.sampling)
        except (ValueError, TypeError) as exc:  # vLLM's config checks, pydantic's too
            raise SynthfactoryError(
                f"--model {self.model} with engine arguments {json.dumps(self.engine_args)}: "
                f"vLLM refused to start the engine ({describe(exc)})") from exc


class SlowEcho(EchoEngine):
    """The echo engine taking ``delay_s`` per poll, like a model that takes time."""

    def __init__(self, delay_s: float):
        super().__init__(per_poll=2)
        self.delay_s = delay_s

    def poll(self):
        time.sleep(self.delay_s)
        return super().poll()
