"""The generation engines a command can run, each one entry of this registry: vLLM's
offline engine, an OpenAI-compatible endpoint, and the echo stand-in (docs/adr/0135).

Each entry (``EngineKind``, base.py) owns its flags, their checks, its defaults, the
spec's settings it takes from its flags, the engine it builds and what the task's
summary says of it; ``rephrase``, ``sweep``, the Ray pool and the sweep's trial process
ask the entry instead of branching on the engine's name. A new engine is one new
module here and one line in ``REGISTRY``.
tests/unit/engine/test_engine_registry.py fails on any branch on an engine's name
outside this package.

Nothing here imports vLLM, torch, httpx or Ray: each is imported where its engine is
built.
"""

from __future__ import annotations

import argparse

from synthfactory.cli_alias import warn_deprecated
from synthfactory.contract.engine_names import COMMAND_LINE_FORMER
from synthfactory.errors import SynthfactoryError
from synthfactory.rephrase.engine_registry.base import EngineKind
from synthfactory.rephrase.engine_registry.echo import Echo, EchoSettings
from synthfactory.rephrase.engine_registry.offline import OfflineVllm
from synthfactory.rephrase.engine_registry.openai_endpoint import (
    EndpointSettings,
    OpenAIEndpoint,
)

# In the order the command line lists them (argparse's choices, the --engine help).
REGISTRY: dict[str, EngineKind] = {kind.name: kind
                                   for kind in (OfflineVllm(), Echo(), OpenAIEndpoint())}
DEFAULT_ENGINE = OfflineVllm.name
ENGINES = tuple(REGISTRY)
# former names still accepted by --engine (hidden from --help, one deprecation line
# each) and by engine_kind (docs/adr/0137): old name -> the registry's name, the
# contract's mapping (the forms' former values are its too: ADR 0144)
ALIASES: dict[str, str] = COMMAND_LINE_FORMER

__all__ = ["ALIASES", "DEFAULT_ENGINE", "ENGINES", "REGISTRY", "EchoSettings", "EndpointSettings",
           "EngineKind", "add_engine_arguments", "engine_kind", "engines_of"]


def engine_kind(name: str) -> EngineKind:
    """The registry's entry for the engine named ``name`` on the command line."""
    try:
        return REGISTRY[ALIASES.get(name, name)]
    except KeyError:
        raise SynthfactoryError(f"--engine {name!r}: expected one of {ENGINES}") from None


def engines_of(command: str) -> list[EngineKind]:
    """The engines ``command`` can run, in the registry's order."""
    return [kind for kind in REGISTRY.values() if command in kind.commands]


def add_engine_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``--engine`` with the engines ``command`` can run, then each one's own flags."""
    kinds = engines_of(command)
    parser.add_argument("--engine", type=_engine_name(parser.prog),
                        choices=tuple(kind.name for kind in kinds), default=DEFAULT_ENGINE,
                        help="; ".join(f"{kind.name}: {kind.commands[command]}"
                                       for kind in kinds))
    for kind in kinds:
        kind.add_arguments(parser)


def _engine_name(prog: str):
    """``--engine``'s type: a former name becomes the registry's, with one deprecation
    line (argparse checks the choices after it, so an alias is never listed there)."""

    def name(text: str) -> str:
        if text in ALIASES:
            warn_deprecated(prog, f"--engine {text}", f"--engine {ALIASES[text]}")
            return ALIASES[text]
        return text

    return name
