"""Rules between the trigger form's fields, checked by the run's first task.

JSON schema checks each Param alone (the form refuses a bad one before a run exists);
these rules span fields, or look at the run's conf itself, which the schema lets
through. The rules are the steps table's (synthfactory/contract/steps.py): the
functions stitch and the engine entries run on the command line. Plain Python: no engine
import, so ``check_params`` costs a second, not a Spark or vLLM start.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from synthfactory.contract import STYLES, engine_names, steps
from synthfactory.contract.param_names import FORMER_PARAMS, deprecations
from synthfactory_airflow.operators.template_folder import template_ids

# every step's rules: a rule names the fields it reads, and the trigger's Params hold
# them all (plan passes the rephrase options on, so rephrase's rules apply too)
RUN_STEPS = tuple(steps.STEPS)


def problems(params: Mapping[str, Any], conf: Mapping[str, Any],
             known: Iterable[str],
             list_templates: Callable[[str], set[str]] = template_ids,
             step_names: Iterable[str] = RUN_STEPS) -> list[str]:
    """One line per broken rule, each naming the field(s); empty when all hold.
    ``list_templates``: the template ids a ``templates_url`` folder holds; ``step_names``:
    the steps whose rules apply (the steps table's, synthfactory/contract/steps.py)."""
    known = sorted(known)
    found: list[str] = []
    for key in sorted(set(conf) - set(known) - set(FORMER_PARAMS)):
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        found.append(f"conf key {key!r}: not a Param of this DAG{hint}; it would be ignored")
    # with routing, stitch takes the routing table's templates and checks the table with
    # the folder (ADR 0139): `templates` is not sent
    if not params.get("routing"):
        found += template_problems(params.get("templates") or [], params.get("templates_url"),
                                   list_templates)
    # the rules between fields of the DAG's steps: the same functions the engine runs
    found += steps.problems(step_names, params, steps.param_name(params))
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


def installed_version() -> str:
    """The installed synthfactory distribution (the Airflow layer and the contract)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("synthfactory")
    except PackageNotFoundError:  # imported from a checkout that was never installed
        return "not installed"


def check_params_task(known: Iterable[str]):
    """The DAG's first task: fail the run at once, naming the field, when a rule between
    fields breaks. AirflowFailException: a retry with the same conf cannot pass."""
    from airflow.sdk import task
    from airflow.sdk.exceptions import AirflowFailException

    names = sorted(known)

    @task(task_id="check_params", retries=0)
    def check_params(params=None, dag_run=None) -> dict:
        # a former engine name (offline, openai) still runs, mapped by the steps table;
        # said once per run, here, rather than by every rephrase task
        deprecated = engine_names.deprecation((params or {}).get("engine"))
        if deprecated:
            logging.getLogger(__name__).warning(deprecated)
        for line in deprecations((dag_run.conf if dag_run else None) or {}):  # renamed Params
            logging.getLogger(__name__).warning(line)
        found = problems(params or {}, (dag_run.conf if dag_run else None) or {}, names)
        found += deployment_problems(params or {})
        if found:
            raise AirflowFailException("the run's Params break a rule: " + "; ".join(found))
        # a DAG bundle versions dags/ only; the operators and the engine's contract come
        # with the installed package, so the run records which one it ran with
        installed = installed_version()
        logging.getLogger(__name__).info("installed synthfactory %s", installed)
        return {"checked": names, "installed": {"synthfactory": installed}}

    return check_params()


def deployment_problems(params: Mapping[str, Any]) -> list[str]:
    """The executor's demands on the run (operators/celery_checks.py); none under the
    LocalExecutor."""
    from airflow.configuration import conf

    from synthfactory_airflow.operators import celery_checks
    from synthfactory_airflow.operators.settings import Settings

    if not celery_checks.executor_is_celery(conf.get("core", "executor")):
        return []
    settings = Settings()
    return celery_checks.problems(
        params, settings,
        celery_checks.needed_queues(settings, conf.get("operators", "default_queue")))
