"""Run reports in the Airflow UI (docs/adr/0100): a FastAPI app mounted by the API
server, linked from every synthetic_rephrase DAG run page as an external view."""
