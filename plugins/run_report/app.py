"""The run report views: a FastAPI app that Airflow's API server mounts at ``/synthfactory``.

    GET /synthfactory/                               recent runs, newest first
    GET /synthfactory/report?run=URL                 one run folder's report
    GET /synthfactory/report.json?run=URL            the same as JSON
    GET /synthfactory/figure/{name}?run=URL          one PNG figure
    GET /synthfactory/dags/{dag_id}/runs/{run_id}    a DAG run's report (the external view)

Run folders are read under the configured output roots only (``run=`` cannot point at
arbitrary files); the DAG-run view trusts the folder Airflow's database names. Every
route asks Airflow's auth manager for read access to the DAG's runs, with the session
cookie the Airflow UI already holds (the view runs in an iframe of the same origin).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from jinja2 import Environment, FileSystemLoader, is_undefined, select_autoescape

from synthfactory.contract import paths
from synthfactory_airflow.plugins.run_report import dag_runs, run_files
from synthfactory_airflow.plugins.run_report.so_far import load_report

RECENT_RUNS = 60
FIGURES = ("rows_generated", "tokens_per_s", "rejection_reasons", "prompt_lengths",
           "output_lengths")
TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                        autoescape=select_autoescape(["html"]))
# "–" also for a key a report.json from an older engine does not have
REFRESH_S = 30  # a run's page reloads itself this often while it has no report.json
TEMPLATES.filters["num"] = lambda v: "–" if v is None or is_undefined(v) else (
    f"{v:,}" if isinstance(v, int) else f"{v:,.2f}")
TEMPLATES.filters["pct"] = lambda v: "–" if v is None or is_undefined(v) else f"{v:.1%}"
TEMPLATES.filters["ratio"] = lambda v: "–" if v is None or is_undefined(v) else f"{v:.3f}"


def airflow_access():
    """Read access to the runs of the path's DAG (synthetic_rephrase for run-folder routes),
    decided by Airflow's auth manager for the user of the request's token or cookie."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import get_user, requires_access_dag

    def check(request: Request, user=Depends(get_user)) -> None:  # noqa: B008 (FastAPI idiom)
        dag_id = request.path_params.get("dag_id", dag_runs.PIPELINE)
        requires_access_dag("GET", DagAccessEntity.RUN, param_dag_id=dag_id)(request, user)

    return check


def create_app(resolve_run=dag_runs.run_folder, roots=dag_runs.default_roots,
               authorize: bool = True) -> FastAPI:
    """``resolve_run(dag_id, run_id) -> URL | None`` and ``roots() -> [URL]`` are Airflow's
    database and the configured output roots by default."""
    deps = [Depends(airflow_access())] if authorize else []
    app = FastAPI(title="synthfactory run reports", dependencies=deps, docs_url=None,
                  redoc_url=None, openapi_url=None)

    def allowed(run: str) -> str:
        try:
            run = run_files.check_url(run)
        except run_files.RunFileError as exc:
            raise HTTPException(400, str(exc)) from exc
        if not any(run.startswith(root.rstrip("/") + "/") for root in roots()):
            raise HTTPException(403, f"{run}: not under the output roots {roots()}")
        return run

    def page(request: Request, template: str, status: int = 200, **context) -> HTMLResponse:
        base = request.scope.get("root_path", "").rstrip("/")
        html = TEMPLATES.get_template(template).render(base=base, quote=quote,
                                                       refresh_s=REFRESH_S, **context)
        return HTMLResponse(html, status_code=status)

    def report_page(request: Request, run: str, figure_url, card_url: str,
                    note: str | None = None):
        try:
            report = load_report(run)
        except run_files.RunFileError as exc:
            raise HTTPException(500, str(exc)) from exc
        has_card = run_files.read_bytes(run_files.join(run, paths.CARD)) is not None
        return page(request, "report.html", report=report, run=run, figure_url=figure_url,
                    card_url=card_url if has_card else None, note=note)

    def card_response(run: str) -> Response:
        data = run_files.read_bytes(run_files.join(run, paths.CARD))
        if data is None:
            raise HTTPException(404, f"{run}: no dataset card (yet: the write_card task)")
        return Response(data, media_type="text/markdown; charset=utf-8",
                        headers={"Cache-Control": "no-cache"})

    def figure_response(run: str, name: str) -> Response:
        if name not in FIGURES:
            raise HTTPException(404, f"{name}: no such figure (one of {', '.join(FIGURES)})")
        data = run_files.read_bytes(run_files.join(run, "report", f"{name}.png"))
        if data is None:
            raise HTTPException(404, f"{run}: no {name} figure (yet)")
        return Response(data, media_type="image/png", headers={"Cache-Control": "no-cache"})

    @app.get("/", response_class=HTMLResponse)
    def runs(request: Request):
        rows = []
        for root in roots():
            base = run_files.join(root, dag_runs.PIPELINE)
            for interval in reversed(run_files.list_folders(base)):
                url = run_files.join(base, interval)
                rows.append({"interval": interval, "url": url, "report": load_report(url)})
        rows.sort(key=lambda r: r["interval"], reverse=True)
        return page(request, "runs.html", rows=rows[:RECENT_RUNS], roots=roots())

    @app.get("/report", response_class=HTMLResponse)
    def report(request: Request, run: str):
        run = allowed(run)
        base = request.scope.get("root_path", "").rstrip("/")
        return report_page(
            request, run, lambda name: f"{base}/figure/{name}?run={quote(run, safe='')}",
            f"{base}/card?run={quote(run, safe='')}")

    @app.get("/report.json")
    def report_json(run: str):
        return JSONResponse(load_report(allowed(run)))

    @app.get("/figure/{name}")
    def figure(run: str, name: str):
        return figure_response(allowed(run), name)

    @app.get("/card")
    def card(run: str):
        return card_response(allowed(run))

    def dag_run_folder(dag_id: str, run_id: str) -> str:
        if dag_id not in dag_runs.REPORTED_DAGS:
            raise HTTPException(404, f"{dag_id}: its runs write no run report (only "
                                     f"{', '.join(dag_runs.REPORTED_DAGS)} does)")
        run = resolve_run(dag_id, run_id)
        if run is None:
            raise HTTPException(404, f"{dag_id}/{run_id}: no such DAG run")
        return run

    @app.get("/dags/{dag_id}/runs/{run_id}", response_class=HTMLResponse)
    def dag_run_report(request: Request, dag_id: str, run_id: str):
        run = dag_run_folder(dag_id, run_id)
        base = request.scope.get("root_path", "").rstrip("/")
        prefix = f"{base}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"
        report = load_report(run)
        note = None
        if not report["so_far"] and report.get("airflow_run_id") not in (None, run_id):
            note = (f"report.json was written by DAG run {report['airflow_run_id']}, an "
                    f"earlier run of the same interval; this run's own report comes at its end")
        return report_page(request, run, lambda name: f"{prefix}/figure/{name}",
                           f"{prefix}/card", note)

    @app.get("/dags/{dag_id}/runs/{run_id}/figure/{name}")
    def dag_run_figure(dag_id: str, run_id: str, name: str):
        return figure_response(dag_run_folder(dag_id, run_id), name)

    @app.get("/dags/{dag_id}/runs/{run_id}/card")
    def dag_run_card(dag_id: str, run_id: str):
        return card_response(dag_run_folder(dag_id, run_id))

    return app
