"""The rules between fields of the steps table (docs/adr/0140): each takes the values by
field and a namer, so ``check_params`` and the command line run the same function and
word it for their reader. Standard library only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from synthfactory.contract import engine_names


def shard_tokens_fit_window(v: Mapping[str, Any], name: Callable[..., str]) -> str | None:
    """A shard's token budget is at least the context window: one prompt plus its output
    must fit in a shard."""
    tokens, window = v.get("shard_tokens"), v.get("max_model_len")
    if isinstance(tokens, int) and isinstance(window, int) and tokens < window:
        return (f"{name('shard_tokens')}: below {name('max_model_len')}; one prompt plus its "
                "output would not fit in a shard")
    return None


def min_quality_needs_column(v: Mapping[str, Any], name: Callable[..., str]) -> str | None:
    """A minimum quality needs the column it is compared with."""
    if v.get("min_quality") is not None and not v.get("quality_column"):
        column = name("quality_column", bare=True)
        return (f"{name('min_quality')}: needs {column}, the seed files' column to compare "
                f"with it; set {column} or empty {name('min_quality', bare=True)}")
    return None


def styles_within_templates(v: Mapping[str, Any], name: Callable[..., str]) -> str | None:
    """Without routing, a document draws at most as many styles as templates are chosen
    (with routing, stitch checks the widest route of the routing table)."""
    if v.get("routing") in (True, "on"):
        return None
    templates = v.get("templates") or []
    if isinstance(templates, str):
        templates = [t.strip() for t in templates.split(",") if t.strip()]
    chosen, styles = len(set(templates)), v.get("styles_per_doc")
    if isinstance(styles, int) and chosen and styles > chosen:
        return (f"{name('styles_per_doc')}: more than the {chosen} template(s) chosen in "
                f"templates={list(templates)}")
    return None


def engine_window_not_smaller(v: Mapping[str, Any], name: Callable[..., str]) -> str | None:
    """engine_args may set a larger context window than max_model_len, never a smaller one."""
    window = (v.get("engine_args") or {}).get("max_model_len") \
        if isinstance(v.get("engine_args"), dict) else None
    wanted = v.get("max_model_len")
    if (isinstance(window, int) and not isinstance(window, bool) and isinstance(wanted, int)
            and window < wanted):
        return (f"engine_args max_model_len={window}: below {name('max_model_len')}, the "
                "window stitch cuts the prompts for and every rephrase task runs with; raise "
                "it or leave it out of engine_args")
    return None


def server_engine_takes_no_engine_args(v: Mapping[str, Any],
                                       name: Callable[..., str]) -> str | None:
    """An OpenAI-compatible server takes its engine arguments when it is started, not
    from the run (the engine registry's entry refuses --engine-args the same way)."""
    if engine_names.is_server(v.get("engine")) and v.get("engine_args"):
        return (f"{name('engine_args')}: engine = {v.get('engine')} takes its engine "
                f"arguments from the server; empty engine_args or use engine = "
                f"{engine_names.VLLM}")
    return None
