"""Params renamed for one name per knob (issue 51): a Param that feeds a flag has the
flag's name. A saved conf or a scheduled trigger may still send the old key: it keeps
working, read by every template through ``param_expr``, and check_params says once per
run that it is deprecated (the Params' counterpart of the flags' hidden aliases, ADR 0137).
Standard library only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# old conf key -> the Param that replaced it
FORMER_PARAMS: dict[str, str] = {"gpus_per_task": "replicas", "gpu_hour_cost": "gpu_hour_usd"}


def param_expr(name: str) -> str:
    """The Jinja expression of Param ``name``'s value in a run: the old key's value
    where the run's conf sent the old key (conf keys reach ``params`` as they are)."""
    expr = f"params.{name}"
    for old, new in FORMER_PARAMS.items():
        if new == name:
            expr = f"(params.{old} if params.{old} is defined else {expr})"
    return expr


def param_value(params: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """Param ``name``'s value in a run's ``params``, read in Python as ``param_expr`` reads
    it in a template: an old key the conf sent wins."""
    for old, new in FORMER_PARAMS.items():
        if new == name and old in params:
            return params[old]
    return params.get(name, default)


def deprecations(conf: Mapping[str, Any]) -> list[str]:
    """One line per old key the conf sends."""
    return [f"conf key {old!r} is deprecated, use {new!r}"
            for old, new in FORMER_PARAMS.items() if old in conf]
