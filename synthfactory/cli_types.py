"""The argument types, declared with the steps table in synthfactory/contract/flag_types.py;
kept importable here for the commands that are not steps (corpus, estimate, ...)."""

from synthfactory.contract.flag_types import (  # noqa: F401
    AUTO,
    budget,
    fraction,
    non_negative_float,
    non_negative_int,
    number_or_unset,
    optional_text,
    positive_float,
    positive_int,
    price,
    probability,
    routing_switch,
    yes_no,
)
