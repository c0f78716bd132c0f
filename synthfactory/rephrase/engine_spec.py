"""What it takes to build a generation engine, as a small picklable value.

The single-process worker builds its engine from it, and so does every Ray replica in
its own process (an engine cannot be pickled; its recipe can).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from synthfactory.contract import ENDPOINT_URL_ENV
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.rephrase.engines import EchoEngine

ENGINES = ("vllm", "echo", "openai")  # openai: any OpenAI-compatible server


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
    engine_args: dict = field(default_factory=dict)  # the user's: they always win
    # the sweep's winner next to the model (read_tuned), applied by the engine only on
    # the hardware it was measured on: a Ray replica decides on its own node
    tuned: dict | None = None
    sampling: dict = field(default_factory=dict)
    engine: str = "vllm"  # "echo": the deterministic stand-in, for tests and dry runs
    echo_delay_s: float = 0.0  # echo only: seconds per poll, to make a shard take time
    # openai only: where, and which served model; the API key is read from the
    # environment where the engine is built, never carried here (a spec is pickled)
    endpoint: str | None = None
    served_model: str | None = None
    endpoint_retry_s: float = 600.0
    max_in_flight: int = 256
    # the context window the shards were cut for (rephrase --max-model-len); None: unknown
    window: int | None = None

    def build(self):
        if self.engine == "echo":
            return SlowEcho(self.echo_delay_s) if self.echo_delay_s else EchoEngine()
        if self.engine == "openai":
            return self._endpoint_engine()
        if self.engine != "vllm":
            raise SynthfactoryError(f"--engine {self.engine!r}: expected one of {ENGINES}")
        from synthfactory.rephrase.engines import VllmEngine

        try:
            return VllmEngine(self.model, self.engine_args, self.sampling, tuned=self.tuned,
                              window=self.window)
        except (ValueError, TypeError) as exc:  # vLLM's config checks, pydantic's too
            raise SynthfactoryError(
                f"--model {self.model} with engine arguments {json.dumps(self.engine_args)}: "
                f"vLLM refused to start the engine ({describe(exc)})") from exc


    def _endpoint_engine(self):
        import os

        from synthfactory.contract import ENDPOINT_API_KEY_ENV
        from synthfactory.rephrase.endpoint import EndpointOptions, OpenAIEndpointEngine

        if not self.endpoint:
            raise PermanentError("--engine openai: no endpoint (give --endpoint URL or set "
                                 f"{ENDPOINT_URL_ENV})")
        options = EndpointOptions(url=self.endpoint, model=self.served_model,
                                  api_key=os.environ.get(ENDPOINT_API_KEY_ENV) or None,
                                  retry_s=self.endpoint_retry_s,
                                  connect_wait_s=min(30.0, self.endpoint_retry_s),
                                  window=self.window)
        return OpenAIEndpointEngine(options, self.sampling, self.max_in_flight)


class SlowEcho(EchoEngine):
    """The echo engine taking ``delay_s`` per poll, like a model that takes time."""

    def __init__(self, delay_s: float):
        super().__init__(per_poll=2)
        self.delay_s = delay_s

    def poll(self):
        time.sleep(self.delay_s)
        return super().poll()
