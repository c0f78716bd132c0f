"""``--engine echo``: the deterministic stand-in engine (``engines.EchoEngine``), for
tests and dry runs; with ``--echo-delay-s`` each poll takes time, like a model's."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from synthfactory.contract.engine_names import ECHO
from synthfactory.contract.flag_types import non_negative_float
from synthfactory.rephrase.engine_registry.base import EngineKind


@dataclass(frozen=True)
class EchoSettings:
    delay_s: float = 0.0  # seconds per poll, to make a shard take time


class Echo(EngineKind):
    name = ECHO
    commands = {"rephrase": "a deterministic stand-in engine (tests, dry runs)",
                "judge": "the stand-in: echoes the prompt, every verdict unparsed (dry runs)"}

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--echo-delay-s", type=non_negative_float, default=0.0,
                            help="--engine echo: seconds each poll of the stand-in engine "
                                 "takes (a dry run whose shards take time: "
                                 "benchmarks/orchestration.py)")

    def settings(self, args: argparse.Namespace) -> EchoSettings:
        return EchoSettings(delay_s=args.echo_delay_s)

    def build(self, spec):
        from synthfactory.rephrase.engines import EchoEngine, SlowEcho

        delay = spec.settings.delay_s if spec.settings else 0.0
        return SlowEcho(delay) if delay else EchoEngine()
