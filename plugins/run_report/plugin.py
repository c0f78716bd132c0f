"""The Airflow plugin: mounts the run report app at /synthfactory and adds it to the UI.

Every Airflow component imports the plugins folder (the scheduler, DAG processor and
workers too), so this module stays cheap: the FastAPI app, Jinja and boto3 are built on
the first request, inside the API server only.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/synthfactory"


class LazyApp:
    """An ASGI app that builds the real one (plugins.run_report.app) on first use."""

    def __init__(self) -> None:
        self._app = None

    async def __call__(self, scope, receive, send) -> None:
        if self._app is None:
            from synthfactory_airflow.plugins.run_report.app import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


class RunReportPlugin(AirflowPlugin):
    name = "synthfactory_run_report"
    fastapi_apps = [
        {"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "synthfactory run reports"},
    ]
    external_views = [
        {   # a tab on every DAG run page; the app answers 404 for DAGs without run folders
            "name": "Run report",
            "href": URL_PREFIX + "/dags/{DAG_ID}/runs/{RUN_ID}",
            "destination": "dag_run",
            "url_route": "synthfactory-run-report",
        },
        {
            "name": "Synthetic runs",
            "href": URL_PREFIX + "/",
            "destination": "nav",
            "category": "browse",
            "url_route": "synthfactory-runs",
        },
    ]
