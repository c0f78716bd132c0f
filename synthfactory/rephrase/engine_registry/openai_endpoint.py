"""``--engine endpoint``: any OpenAI-compatible server (``vllm serve``, SGLang, a
gateway) through the HTTP engine of ``synthfactory/rephrase/endpoint.py``; here its
flags, their checks, and the engine's construction (docs/rephrase.md, docs/adr/0120).
Its former name ``--engine openai`` is a deprecated alias (docs/adr/0137).

The API key is read from the environment where the engine is built, never carried in
the spec (a spec is pickled to Ray replicas and trial processes) nor in argv.
"""

from __future__ import annotations

import argparse
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass

from synthfactory.contract import ENDPOINT_API_KEY_ENV, ENDPOINT_MODEL_ENV, ENDPOINT_URL_ENV
from synthfactory.contract.engine_names import ENDPOINT
from synthfactory.contract.flag_types import positive_float
from synthfactory.contract.steps import param_name, server_engine_takes_no_engine_args
from synthfactory.errors import PermanentError, SynthfactoryError
from synthfactory.rephrase.endpoint import api_base
from synthfactory.rephrase.engine_registry.base import EngineKind

DEFAULT_RETRY_S = 600.0


@dataclass(frozen=True)
class EndpointSettings:
    """Where, and which served model; how long one request may keep failing."""

    url: str | None = None
    served_model: str | None = None
    retry_s: float = DEFAULT_RETRY_S


def add_endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """``--endpoint``, ``--served-model`` and ``--endpoint-retry-s``: the same flags for
    every command that can talk to an endpoint (rephrase, sweep)."""
    parser.add_argument("--endpoint", default=os.environ.get(ENDPOINT_URL_ENV) or None,
                        help=f"--engine endpoint: the server's URL (default ${ENDPOINT_URL_ENV}); "
                             f"its API key is read from ${ENDPOINT_API_KEY_ENV}, never argv")
    parser.add_argument("--served-model", default=os.environ.get(ENDPOINT_MODEL_ENV) or None,
                        help="--engine endpoint: the model name the server serves (default "
                             f"${ENDPOINT_MODEL_ENV}, else the server's only model)")
    parser.add_argument("--endpoint-retry-s", type=positive_float, default=DEFAULT_RETRY_S,
                        help="--engine endpoint: how long one request may keep failing (429, "
                             "5xx, server down) before the task fails, retryably")


def check_endpoint_arguments(args: argparse.Namespace) -> None:
    """An endpoint is given and is a usable URL, before any shard is read."""
    if not args.endpoint:
        raise PermanentError(f"--engine endpoint: give --endpoint URL (or set {ENDPOINT_URL_ENV})")
    api_base(args.endpoint)  # a malformed URL, or one with credentials, fails now


# What a sweep over an OpenAI-compatible endpoint can vary: the client's knobs. The
# server's own arguments are set where it was started, not by us.
ENDPOINT_KNOBS = ("max_in_flight",)


def check_endpoint_config(config: dict, where: str) -> None:
    """An endpoint grid entry names only client knobs, each a positive integer."""
    unknown = sorted(set(config) - set(ENDPOINT_KNOBS))
    if unknown:
        raise SynthfactoryError(
            f"{where}: {', '.join(unknown)} cannot be swept against an endpoint (the "
            f"server's arguments are set where it runs); an endpoint grid varies "
            f"{', '.join(ENDPOINT_KNOBS)}")
    for key, value in config.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SynthfactoryError(f"{where}: {key}={json.dumps(value)}: expected a "
                                    "positive integer")


class OpenAIEndpoint(EngineKind):
    name = ENDPOINT
    commands = {"rephrase": "an OpenAI-compatible server (--endpoint)",
                "sweep": "an OpenAI-compatible server (--endpoint), sweeping client knobs "
                         "(max_in_flight)",
                "judge": "an OpenAI-compatible server (--endpoint; --served-model: the "
                         "judge)"}
    local_devices = False  # the server's devices are not ours to count or write next to

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_endpoint_arguments(parser)

    def check(self, args: argparse.Namespace) -> None:
        check_endpoint_arguments(args)

    def check_pool(self) -> None:
        raise PermanentError("--replicas/--ray-address: engine replicas are the offline "
                             "engine's (--replicas-per-node too); with --engine endpoint the "
                             "server scales, and "
                             "--max-in-flight sets how many requests it is given at once")

    def check_engine_args(self, given: dict, model: str, window: int | None) -> dict | None:
        # the steps table's rule (check_params runs it on the trigger's Params)
        values = {"engine": self.name, "engine_args": given}
        if server_engine_takes_no_engine_args(values, param_name(values)):
            raise PermanentError("--engine-args: the engine's arguments belong to the server "
                                 "with --engine endpoint (start it with them); got "
                                 f"{sorted(given)}")
        return None

    def settings(self, args: argparse.Namespace) -> EndpointSettings:
        return EndpointSettings(url=args.endpoint, served_model=args.served_model,
                                retry_s=args.endpoint_retry_s)

    def build(self, spec):
        return self._engine(spec.settings or EndpointSettings(), spec.sampling,
                            spec.max_in_flight, spec.window)

    @staticmethod
    def _engine(settings: EndpointSettings, sampling: dict, max_in_flight: int,
                window: int | None):
        from synthfactory.rephrase.endpoint import EndpointOptions, OpenAIEndpointEngine

        if not settings.url:
            raise PermanentError("--engine endpoint: no endpoint (give --endpoint URL or set "
                                 f"{ENDPOINT_URL_ENV})")
        options = EndpointOptions(url=settings.url, model=settings.served_model,
                                  api_key=os.environ.get(ENDPOINT_API_KEY_ENV) or None,
                                  retry_s=settings.retry_s,
                                  connect_wait_s=min(30.0, settings.retry_s),
                                  window=window)
        return OpenAIEndpointEngine(options, sampling, max_in_flight)

    def replay_basis(self, spec):
        """A server cannot show its weights: the served model's name stands for them
        (docs/adr/0150: serve new weights under a new name, or run with --replay off)."""
        from synthfactory.rephrase.replay.key import basis

        settings = spec.settings
        served = settings.served_model or f"the model served at {settings.url}"
        return basis(self.name, f"name:{served}", {}, seeded=False)

    def summary(self, engine) -> dict:
        """What the server was, and how often it had to be waited for (``asked``
        False: every shard was already committed, the endpoint was never asked)."""
        if engine is None:
            return {"endpoint": {"asked": False}}
        return {"endpoint": {"asked": True, "url": engine.base,
                             "served_model": engine.served_model, "server": engine.server,
                             "retries": dict(engine.retries),
                             "rejected": len(engine.rejections)}}

    # -- the sweep: the client's knobs against a server someone else started ------------
    def check_grid_entry(self, config: dict, where: str) -> None:
        check_endpoint_config(config, where)

    def sweep_claim(self, args: argparse.Namespace) -> dict:
        return {"endpoint": {"url": args.endpoint, "served_model": args.served_model}}

    def trial_spec(self, args: argparse.Namespace) -> dict:
        return {"endpoint": {"url": args.endpoint, "served_model": args.served_model,
                             "retry_s": args.endpoint_retry_s}}

    def trial_engine(self, spec: dict):
        """The rephrase worker's own endpoint engine; its key comes from the environment."""
        endpoint = spec["endpoint"]
        return self._engine(EndpointSettings(url=endpoint["url"],
                                             served_model=endpoint.get("served_model"),
                                             retry_s=endpoint["retry_s"]),
                            spec["sampling"], spec["config"].get("max_in_flight", 256), None)

    @contextmanager
    def warm_up_budget(self, engine, max_tokens: int):
        saved = engine.sampling
        engine.sampling = {**saved, "max_tokens": max_tokens}
        try:
            yield
        finally:
            engine.sampling = saved

    def effective(self, engine) -> dict:
        return {"max_in_flight": engine.engine_args["max_in_flight"]}

    def note_winner(self, args: argparse.Namespace, engine_args: dict,
                    provenance: dict) -> None:
        """The server's model folder is not ours: say how to use the winner."""
        provenance["endpoint"] = {"url": args.endpoint, "served_model": args.served_model}
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in engine_args.items())
        print(f"not written next to a model (an endpoint's client knobs): rephrase with "
              f"{flags or 'the defaults'}", flush=True)
