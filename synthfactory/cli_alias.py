"""Old spellings kept as hidden aliases: one name per concept (docs/adr/0137).

The run folder a step reads or writes is ``--run``, the price of a device-hour
``--gpu-hour-usd``, the OpenAI-compatible engine ``--engine endpoint``. An old spelling
(``rephrase --out``, ``smoke --from-run``, ``sweep --gpu-hour-cost``, ``--engine
openai`` ...) still parses to the same value, is absent from ``--help``, and prints one
line to stderr, e.g.::

    synthfactory rephrase: --out is deprecated, use --run
"""

from __future__ import annotations

import argparse
import sys


def deprecation_line(prog: str, old: str, new: str) -> str:
    """The one line an old spelling prints (``prog``: the parser's, ``synthfactory X``)."""
    return f"{prog}: {old} is deprecated, use {new}"


def warn_deprecated(prog: str, old: str, new: str) -> None:
    print(deprecation_line(prog, old, new), file=sys.stderr, flush=True)


class _DeprecatedFlag(argparse.Action):
    """A hidden option storing into the same ``dest`` as its replacement ``target``."""

    def __init__(self, option_strings, dest, target: argparse.Action, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.target = target

    def __call__(self, parser, namespace, values, option_string=None):
        warn_deprecated(parser.prog, self.option_strings[0], self.target.option_strings[0])
        # the old spelling stands for the new one: argparse checks a required option's
        # presence after every option is read, so the new one is not required any more
        self.target.required = False
        setattr(namespace, self.dest, values)


def deprecated_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                    old: str, target: argparse.Action) -> argparse.Action:
    """Accept ``old`` as a hidden spelling of the option ``target`` (the action
    ``add_argument`` returned for the new spelling): same value, same type and choices,
    one deprecation line. Only for options taking one value (``store``)."""
    if target.nargs is not None or not isinstance(target, argparse._StoreAction):
        raise TypeError(f"{old}: only an option storing one value can have an old spelling")
    return parser.add_argument(old, dest=target.dest, action=_DeprecatedFlag, target=target,
                               type=target.type, choices=target.choices,
                               metavar=target.metavar, help=argparse.SUPPRESS)
