"""What the steps table is made of: ``Flag``, ``Rule`` and ``Step``, and the words a flag's
role and a step's kind are spelt with (docs/adr/0140). Standard library only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from synthfactory.contract.param_names import param_expr

# What a flag names, for lineage: the run folder, a prompt shard in one ({run}/prompts/
# shard-N.parquet), a dataset read or written outside the run folder, the Iceberg table
# and the catalog it is in.
RUN, SHARD, INPUT, OUTPUT, TABLE, CATALOG = "run", "shard", "input", "output", "table", "catalog"
# The pool a step's task runs in; a Spark driver runs in the CPU pool as a driver pod.
CPU, GPU, SPARK_DRIVER = "cpu", "gpu", "spark driver"


@dataclass(frozen=True)
class Flag:
    """One option of a step (or a positional, when ``name`` has no leading dashes).

    ``param``: the trigger-form Param whose value it takes; ``value``: the Jinja template
    the DAG renders for it (default ``{{ params.<param> }}``); a flag with neither is set
    by hand (``fixed`` in ``argv``) or left at its default. ``defined_by``: another owner
    adds it to the parser (the engine registry owns ``--engine``, docs/adr/0135); the
    table still renders it and documents it."""

    name: str
    help: str = ""
    type: Callable[[str], Any] | None = None
    default: Any = None
    required: bool = False
    choices: tuple[str, ...] | None = None
    action: str | None = None  # "append", "store_true", "boolean" (--x/--no-x)
    nargs: str | None = None
    const: Any = None
    metavar: str | None = None
    aliases: tuple[str, ...] = ()  # old spellings: hidden, one deprecation line each
    param: str | None = None
    value: str | None = None
    role: str | None = None  # RUN, SHARD, INPUT, OUTPUT, TABLE, CATALOG
    group: str | None = None  # a required mutually exclusive group of the step
    defined_by: str | None = None
    # rendered as one --flag=VALUE item: an optional value the engine reads as unset when
    # it renders empty (the rest are two items, --flag VALUE)
    one_item: bool = False

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")

    @property
    def field(self) -> str:
        """The name rules use: the Param's where the flag takes one, else the dest."""
        return self.param or self.dest

    @property
    def template(self) -> str | None:
        """What the DAG renders for the flag's value, or None when the DAG sends nothing."""
        if self.value is not None:
            return self.value
        return "{{ " + param_expr(self.param) + " }}" if self.param else None


@dataclass(frozen=True)
class Rule:
    """A rule between fields: ``check(values, name)`` returns the problem in one line, or
    None. ``values`` are keyed by field (a Param's name, else the flag's dest); ``name(f)``
    shows a field as its reader knows it: ``shard_tokens=1024`` in the trigger form,
    ``--shard-tokens 1024`` on the command line (``name(f, bare=True)``: without the
    value)."""

    fields: tuple[str, ...]
    check: Callable[[Mapping[str, Any], Callable[..., str]], str | None]

    @property
    def doc(self) -> str:
        return (self.check.__doc__ or "").strip().splitlines()[0]


@dataclass(frozen=True)
class Step:
    name: str
    help: str  # the line `synthfactory --help` prints
    module: str  # the engine module whose run(args) does the work
    kind: str  # CPU, GPU or SPARK_DRIVER
    flags: tuple[Flag, ...]
    reads: tuple[str, ...] = ()  # run-folder paths
    writes: tuple[str, ...] = ()
    table: str | None = None  # "reads" or "writes": the --table it names
    rules: tuple[Rule, ...] = ()
    passes_on: str | None = None  # after a bare --: options of this step (plan: rephrase)

    def flag(self, name: str) -> Flag:
        for flag in self.flags:
            if flag.name == name:
                return flag
        raise KeyError(f"{self.name}: no flag {name}")

    def by_field(self) -> dict[str, Flag]:
        return {flag.field: flag for flag in self.flags}
