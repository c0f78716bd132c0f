"""Rules between the trigger form's fields, checked by the run's first task.

JSON schema checks each Param alone (the form refuses a bad one before a run exists);
these rules span fields, or look at the run's conf itself, which the schema lets
through. Plain Python: no engine import, so ``check_params`` costs a second, not a
Spark or vLLM start.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from synthfactory.contract import STYLES
from synthfactory_airflow.operators.template_folder import template_ids


def problems(params: Mapping[str, Any], conf: Mapping[str, Any],
             known: Iterable[str],
             list_templates: Callable[[str], set[str]] = template_ids) -> list[str]:
    """One line per broken rule, each naming the field(s); empty when all hold.
    ``list_templates``: the template ids a ``templates_url`` folder holds."""
    known = sorted(known)
    found: list[str] = []
    for key in sorted(set(conf) - set(known)):
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        found.append(f"conf key {key!r}: not a Param of this DAG{hint}; it would be ignored")
    templates = params.get("templates") or []
    # with routing, stitch takes the routing table's templates and checks the table with
    # the folder (ADR 0139): `templates` is not sent
    if not params.get("routing"):
        found += template_problems(templates, params.get("templates_url"), list_templates)
    chosen = len(set(templates))
    if not params.get("routing") and params.get("styles_per_doc", 1) > chosen:
        found.append(
            f"styles_per_doc={params['styles_per_doc']}: more than the {chosen} template(s) "
            f"chosen in templates={list(templates)}"
        )
    if params.get("shard_tokens", 0) < params.get("max_model_len", 0):
        found.append(
            f"shard_tokens={params['shard_tokens']}: below max_model_len="
            f"{params['max_model_len']}; one prompt plus its output would not fit in a shard"
        )
    engine_window = (params.get("engine_args") or {}).get("max_model_len")
    if (isinstance(engine_window, int) and not isinstance(engine_window, bool)
            and engine_window < params.get("max_model_len", 0)):
        found.append(
            f"engine_args max_model_len={engine_window}: below max_model_len="
            f"{params['max_model_len']}, the window stitch cuts the prompts for and every "
            "rephrase task runs with; raise it or leave it out of engine_args")
    if params.get("min_quality") is not None and not params.get("quality_column"):
        found.append(
            f"min_quality={params['min_quality']}: needs quality_column, the seed files' "
            "column to compare with it; set quality_column or empty min_quality"
        )
    if params.get("engine") == "endpoint" and params.get("engine_args"):
        found.append(
            f"engine_args={params['engine_args']}: engine = endpoint takes its engine "
            "arguments from the server; empty engine_args or use engine = offline")
    return found


def template_problems(templates: list[str], url: str | None,
                      list_templates: Callable[[str], set[str]]) -> list[str]:
    """The form lets any id through (a folder of one's own has its own): shipped styles
    without ``templates_url``, else ids whose file is in that folder."""
    if not url:
        missing = sorted(set(templates) - set(STYLES))
        return [f"templates={missing}: not shipped templates (shipped: {sorted(STYLES)}); "
                "set templates_url to the folder that holds them"] if missing else []
    try:
        there = list_templates(url)
    except Exception as exc:  # missing folder, no access: the run would fail at stitch
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        return [f"templates_url={url}: cannot list the folder ({reason})"]
    missing = sorted(set(templates) - there)
    if missing:
        return [f"templates={missing}: not in templates_url={url} "
                f"(there: {sorted(there) or 'no *.json files'})"]
    return []


def check_params_task(known: Iterable[str]):
    """The DAG's first task: fail the run at once, naming the field, when a rule between
    fields breaks. AirflowFailException: a retry with the same conf cannot pass."""
    from airflow.sdk import task
    from airflow.sdk.exceptions import AirflowFailException

    names = sorted(known)

    @task(task_id="check_params", retries=0)
    def check_params(params=None, dag_run=None) -> dict:
        found = problems(params or {}, (dag_run.conf if dag_run else None) or {}, names)
        if found:
            raise AirflowFailException("the run's Params break a rule: " + "; ".join(found))
        return {"checked": names}

    return check_params()
