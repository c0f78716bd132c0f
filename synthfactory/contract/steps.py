"""The steps table: each ``synthfactory`` step declared once (docs/adr/0140).

One ``Step`` per subcommand a DAG runs: its name, kind (the pool it runs in), its flags
(name, type, default, help and the trigger-form Param it takes), the run-folder paths it
reads and writes, and its rules between fields. Everything else is derived from here:

- ``synthfactory/cli.py`` builds each step's parser from it (``add_arguments``);
- the DAGs render each task's argv from it as Jinja templated at run time (``argv``),
  so a trigger's conf reaches every flag that takes a Param;
- ``operators/lineage.py`` takes a task's inputs and outputs from it (``parse_argv``
  reads the argv with the parser built here, never a parser of its own);
- ``check_params`` and the engine run the same rule functions (``problems``);
- docs/steps.md is generated from it (scripts/steps_doc.py) and checked by a test.

It also builds finished argv (``options``, ``command``: plan's, the dry runs', the RayJob
wave's) and reads any argv back (``read_argv``, ``parse_argv``; docs/adr/0144). The
table's parts live beside it and are re-exported here, the one import path:
``step_model`` (Flag, Rule, Step), ``step_rules`` (the rules), ``step_table`` (the steps).

Standard library only, like the rest of the contract: both sides of the wall import it.
Param names are the DAG's and stay as they are (saved trigger confs keep working); a
flag's name is the engine's, with its old spellings as hidden aliases (docs/adr/0137).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

# the table's parts, re-exported so ``synthfactory.contract.steps`` stays the one import
# path: step_model (its shapes), step_rules (its rules), step_table (the steps); the
# flag types some users reach through here
from synthfactory.contract.flag_types import (
    budget,
    routing_switch,
    yes_no,
)
from synthfactory.contract.step_model import (
    CATALOG,
    CPU,
    GPU,
    INPUT,
    OUTPUT,
    RUN,
    SHARD,
    SPARK_DRIVER,
    TABLE,
    Flag,
    Rule,
    Step,
)
from synthfactory.contract.step_rules import (
    engine_window_not_smaller,
    min_quality_needs_column,
    server_engine_takes_no_engine_args,
    shard_tokens_fit_window,
    styles_within_templates,
)
from synthfactory.contract.step_table import (
    AUDIT,
    CARD,
    CATALOG_FLAGS,
    CRAWL,
    ENGINE_VALUE,
    ENVIRONMENT_PARAMS,
    EXPORT,
    GATE_FLAGS,
    JOIN,
    PLAN,
    REGISTER,
    REPHRASE,
    REPORT,
    SMOKE,
    STEPS,
    STITCH,
    SWEEP,
    VALIDATE,
)

__all__ = [
    "AUDIT", "CARD", "CATALOG", "CATALOG_FLAGS", "CPU", "CRAWL", "ENGINE_VALUE",
    "ENVIRONMENT_PARAMS", "EXPORT", "Flag", "GATE_FLAGS", "GPU", "INPUT", "JOIN", "OUTPUT",
    "PLAN", "REGISTER", "REPHRASE", "REPORT", "RUN", "Rule", "SHARD", "SMOKE", "SPARK_DRIVER",
    "STEPS", "STITCH", "SWEEP", "Step", "TABLE", "VALIDATE", "add_arguments", "argv", "budget",
    "cli_name", "cli_values", "command", "engine_window_not_smaller", "gate_values",
    "min_quality_needs_column", "options", "options_of", "param_name", "parse_argv",
    "passed_on", "problems", "read_argv", "routing_switch",
    "server_engine_takes_no_engine_args", "shard_tokens_fit_window", "styles_within_templates",
    "yes_no",
]


def gate_values(args: Any) -> dict[str, Any]:
    """The GATE_FLAGS of parsed ``args`` by flag name (unset ones left out), for
    ``command("validate", ...)``."""
    return {flag.name: value for flag in GATE_FLAGS
            if (value := getattr(args, flag.dest, None)) is not None}


# -- the parser -------------------------------------------------------------------------

AliasAdder = Callable[[Any, str, argparse.Action], Any]


def _hidden_alias(parser: Any, old: str, target: argparse.Action) -> argparse.Action:
    return parser.add_argument(old, dest=target.dest, help=argparse.SUPPRESS,
                               nargs=target.nargs, type=target.type, choices=target.choices)


def add_arguments(parser: argparse.ArgumentParser, step: Step | str,
                  alias: AliasAdder = _hidden_alias, lenient: bool = False) -> None:
    """``step``'s flags on ``parser``, as the table declares them. ``alias`` adds an old
    spelling (the engine's prints a deprecation line, synthfactory/cli_alias.py).
    ``lenient``: every value a string, nothing required, no positional (lineage reads a
    rendered argv; it never converts or judges it)."""
    step = STEPS[step] if isinstance(step, str) else step
    groups: dict[str, Any] = {}
    for flag in step.flags:
        if flag.defined_by or (lenient and not flag.name.startswith("-")):
            continue
        where: Any = parser
        if flag.group and not lenient:
            where = groups.get(flag.group) or groups.setdefault(
                flag.group, parser.add_mutually_exclusive_group(required=True))
        kwargs: dict[str, Any] = {"help": flag.help}
        if not flag.name.startswith("-"):
            where.add_argument(flag.name, nargs=flag.nargs, **kwargs)
            continue
        if flag.action == "boolean":
            kwargs.update(action=argparse.BooleanOptionalAction, default=flag.default)
        elif flag.action == "store_true":
            kwargs.update(action="store_true")
        else:
            kwargs.update(default=flag.default, metavar=flag.metavar)
            if flag.action:
                kwargs["action"] = flag.action
            if flag.nargs:
                kwargs.update(nargs=flag.nargs, const=flag.const)
            if not lenient:
                kwargs.update(type=flag.type, choices=flag.choices)
        if flag.required and not flag.group and not lenient:
            kwargs["required"] = True
        action = where.add_argument(flag.name, **kwargs)
        for old in flag.aliases:
            alias(where, old, action)


def parse_argv(argv: Sequence[str]) -> tuple[Step | None, dict[str, Any]]:
    """(the step, its flags' values by dest: a given value as the argv's string, an
    absent one the table's default, a repeated flag a list) of a rendered ``synthfactory``
    argv; (None, {}) for a command that is not in the table. Unknown flags are ignored
    (an engine's own, or one from a newer engine), as are the options after a bare ``--``
    (plan's are the rephrase steps'), and nothing exits. ``--flag=value`` reads as
    ``--flag value``."""
    step, values, _ = _read(argv, defaults=True)
    return step, values


def read_argv(argv: Sequence[str]) -> tuple[Step | None, dict[str, Any], list[str]]:
    """(the step, the table's flags the argv gives, by flag name, as ``options`` takes
    them, the items the table does not know, in their order: an engine's own flags) of a
    ``synthfactory`` argv, read with the same parser as ``parse_argv``."""
    step, values, rest = _read(argv, defaults=False)
    if step is None:
        return None, {}, []
    names = {flag.dest: flag.name for flag in step.flags}
    return step, {names[dest]: value for dest, value in values.items()}, rest


def _read(argv: Sequence[str], defaults: bool) -> tuple[Step | None, dict[str, Any], list]:
    items = [str(a) for a in argv or []]
    step = STEPS.get(items[0]) if items else None
    if step is None:
        return None, {}, []
    own = items[1:items.index("--")] if "--" in items else items[1:]
    # no abbreviations: rephrase's --engine (the registry's) must not read as --engine-args
    parser = _Lenient(prog=f"synthfactory {step.name}", add_help=False, allow_abbrev=False)
    add_arguments(parser, step, lenient=True)
    if not defaults:  # only what the argv says: an absent flag is no attribute at all
        for action in parser._actions:
            action.default = argparse.SUPPRESS
    try:
        values, rest = parser.parse_known_args(own)
    except _Refused as exc:  # lineage goes without datasets; the step itself will say why
        logging.getLogger(__name__).debug("%s: argv not read: %s", step.name, exc)
        return step, {}, []
    return step, vars(values), rest


class _Refused(Exception):
    pass


class _Lenient(argparse.ArgumentParser):
    def error(self, message: str):  # never exit the caller (a task's lineage)
        raise _Refused(message)


# -- the DAG's argv ---------------------------------------------------------------------

def argv(step: Step | str, fixed: Mapping[str, str] | None = None,
         extra: Iterable[str] = ()) -> list[str]:
    """A task's arguments: the step's name, then ``fixed`` (flag -> template, in the
    table's order), then each flag that takes a Param or a run value (``--flag TEMPLATE``,
    or one ``--flag=TEMPLATE`` item for a value that may render empty), then ``extra``.
    Rendered by Airflow at run time, so the trigger's conf reaches every flag."""
    step = STEPS[step] if isinstance(step, str) else step
    fixed = dict(fixed or {})
    names = {flag.name for flag in step.flags}
    unknown = sorted(set(fixed) - names)
    if unknown:
        raise KeyError(f"{step.name}: no flag {', '.join(unknown)} in the steps table")
    out = [step.name]
    for flag in step.flags:
        if flag.name in fixed:
            out += [flag.name, fixed[flag.name]]
        elif flag.template is not None:
            out += options_of(flag)
    return out + list(extra)


def options_of(flag: Flag) -> list[str]:
    if flag.action == "boolean":
        negated = "--no-" + flag.name[2:]
        body = flag.template.strip()[2:-2].strip()  # "{{ params.apply }}" -> params.apply
        return ["{{ '" + flag.name + "' if " + body + " else '" + negated + "' }}"]
    if flag.one_item:
        return [f"{flag.name}={flag.template}"]
    return [flag.name, flag.template]


def passed_on(step: Step | str) -> list[str]:
    """What plan passes on after its ``--``: the rendered options of the step it plans
    (rephrase) that take a Param."""
    step = STEPS[step] if isinstance(step, str) else step
    return [item for flag in step.flags if flag.param for item in options_of(flag)]


def options(step: Step | str, values: Mapping[str, Any]) -> list[str]:
    """Finished argv items (nothing left to render) for ``values`` (flag name -> value; a
    list repeats the flag), in the table's order: ``--flag VALUE``, one ``--flag=VALUE``
    item for a ``one_item`` flag, ``--flag`` alone for a store_true flag set to True and
    ``--flag``/``--no-flag`` for a boolean one."""
    step = STEPS[step] if isinstance(step, str) else step
    unknown = sorted(set(values) - {flag.name for flag in step.flags})
    if unknown:
        raise KeyError(f"{step.name}: no flag {', '.join(unknown)} in the steps table")
    out: list[str] = []
    for flag in step.flags:
        if flag.name not in values:
            continue
        value = values[flag.name]
        for one in value if isinstance(value, list | tuple) else [value]:
            if flag.action == "boolean":
                out.append(flag.name if one else "--no-" + flag.name[2:])
            elif flag.action == "store_true":
                out += [flag.name] if one else []
            elif flag.one_item:
                out.append(f"{flag.name}={one}")
            else:
                out += [flag.name, str(one)]
    return out


def command(step: Step | str, values: Mapping[str, Any], extra: Iterable[str] = ()) -> list[str]:
    """A finished argv: the step's name, ``options(step, values)``, then ``extra`` (an
    engine's own options, kept as they were given)."""
    step = STEPS[step] if isinstance(step, str) else step
    return [step.name, *options(step, values), *extra]


# -- rules ------------------------------------------------------------------------------

def problems(step_names: Iterable[str], values: Mapping[str, Any],
             name: Callable[..., str]) -> list[str]:
    """One line per broken rule of these steps (each rule once), in the table's order."""
    seen: set[int] = set()
    found: list[str] = []
    for step_name in step_names:
        for rule in STEPS[step_name].rules:
            if id(rule.check) in seen:
                continue
            seen.add(id(rule.check))
            problem = rule.check(values, name)
            if problem:
                found.append(problem)
    return found


def cli_values(step: Step | str, args: Any, **overrides: Any) -> dict[str, Any]:
    """A parsed command line's values by field, for ``problems`` (``overrides``: a value
    the step has already parsed further, e.g. engine_args as a dict)."""
    step = STEPS[step] if isinstance(step, str) else step
    values = {flag.field: getattr(args, flag.dest, None) for flag in step.flags}
    return {**values, **overrides}


def cli_name(step: Step | str, values: Mapping[str, Any]) -> Callable[..., str]:
    """A field as the command line shows it: ``--shard-tokens 1024``."""
    flags = (STEPS[step] if isinstance(step, str) else step).by_field()

    def name(field_name: str, bare: bool = False) -> str:
        flag = flags.get(field_name)
        shown = flag.name if flag else field_name
        value = values.get(field_name)
        return f"{shown} {value}" if value not in (None, "") and not bare else shown

    return name


def param_name(values: Mapping[str, Any]) -> Callable[..., str]:
    """A field as the trigger form shows it: ``shard_tokens=1024``."""

    def name(field_name: str, bare: bool = False) -> str:
        return field_name if bare else f"{field_name}={values.get(field_name)}"

    return name

