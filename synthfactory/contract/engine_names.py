"""The engines' names, the one spelling both sides of the wall use (docs/adr/0144).

The engine registry (synthfactory/rephrase/engine_registry/) names its entries with
these; the trigger forms offer them; the steps table renders the form's value as it is.
Former names (the forms' ``offline``, the command line's ``openai``) are still
accepted, mapped here to the registry's, with one deprecation line where they are read.
This module and the registry are the only places allowed to compare an engine's name
(tests/unit/engine/test_engine_registry.py). Standard library only.
"""

from __future__ import annotations

VLLM, ECHO, ENDPOINT = "vllm", "echo", "endpoint"
# what the trigger forms offer (echo is the dry runs' stand-in: operators/settings.py)
FORM_ENGINES = (VLLM, ENDPOINT)
# former name -> the registry's: those --engine still takes (docs/adr/0137), and with
# them the trigger forms' former values (saved confs and schedules)
COMMAND_LINE_FORMER: dict[str, str] = {"openai": ENDPOINT}
FORMER_NAMES: dict[str, str] = {"offline": VLLM, **COMMAND_LINE_FORMER}
# engines that are a server someone else runs: they take an endpoint connection, not
# engine arguments
SERVER_ENGINES = (ENDPOINT,)


def registry_name(name: str | None) -> str | None:
    """The registry's name for ``name``, a former one mapped (anything else unchanged)."""
    return FORMER_NAMES.get(name, name) if isinstance(name, str) else name


def is_server(name: str | None) -> bool:
    return registry_name(name) in SERVER_ENGINES


def server_only(expression: str, engine: str = "params.engine") -> str:
    """A Jinja template rendering ``expression`` when the engine ``engine`` (a Jinja
    expression) is a server, else ''. A lookup built from this module's names, so no
    template compares an engine's name by hand."""
    servers = {name: True for name in (*SERVER_ENGINES, *(
        old for old, new in FORMER_NAMES.items() if new in SERVER_ENGINES))}
    return "{{ (" + expression + ") if " + repr(servers) + ".get(" + engine + ") else '' }}"


def form_choices() -> list[str]:
    """The engine Param's enum: the registry's names the forms offer, then the former
    ones (saved confs and schedules keep working; the form labels them deprecated)."""
    return [*FORM_ENGINES, *FORMER_NAMES]


def form_labels() -> dict[str, str]:
    """The engine Param's ``values_display``: each former name shown with its new one."""
    return {old: f"{old} (deprecated: {new})" for old, new in FORMER_NAMES.items()}


def registry_template(engine: str = "params.engine") -> str:
    """A Jinja template rendering the engine ``engine`` (a Jinja expression: the form's
    value) as the registry's name: a former name mapped by lookup, never by comparison."""
    return "{{ " + repr(FORMER_NAMES) + ".get(" + engine + ", " + engine + ") }}"


def deprecation(name: object) -> str | None:
    """The one line a former name in a form gets, naming the old and the new value."""
    if isinstance(name, str) and name in FORMER_NAMES:
        return f"engine={name!r} is deprecated, use engine={FORMER_NAMES[name]!r}"
    return None
