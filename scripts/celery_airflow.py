"""Airflow as platform teams run it (docs/celery.md): the CeleryExecutor with a Redis broker
and PostgreSQL, each component its own process, two Celery workers.

    .venv/bin/python scripts/celery_airflow.py            # or: make celery

Starts `airflow db migrate`, then the scheduler, the API server, the DAG processor, the
triggerer and one Celery worker per entry of SYNTHFACTORY_CELERY_WORKERS, and stops them
all (each its own process group) on Ctrl-C or SIGTERM. A worker is ``name:queue,queue``;
the default is a CPU worker (Airflow's default queue, for the tasks that are no step, and
the cpu queue) and a GPU worker that takes only GPU steps. Each worker serves its task
logs on a port of its own (8793, 8794, ...): two workers on one machine would otherwise
fight over one. Each worker also gets a folder of its own, $AIRFLOW_HOME/workers/<name>
(scratch as TMPDIR, task logs), as it would have a disk of its own on its own machine.

Defaults, each overridden by its own variable: the broker is this machine's Redis
(AIRFLOW__CELERY__BROKER_URL), the metadata database and Celery's result backend the
PostgreSQL database SYNTHFACTORY_CELERY_DATABASE (created when missing) on this
machine's server. Component logs: $AIRFLOW_HOME/logs/celery-deployment/<name>.log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
DEFAULT_WORKERS = "cpu-worker:default,cpu gpu-worker:gpu"
FIRST_LOG_PORT = 8793  # Airflow's own default, then one up per worker


def workers(spec: str) -> list[tuple[str, str]]:
    """``name:q1,q2 name2:q3`` -> [(name, "q1,q2"), ...]; one line and exit 3 on a bad
    entry (nothing started yet)."""
    found = []
    for entry in spec.split():
        name, _, queues = entry.partition(":")
        if not name or not queues or any(not q for q in queues.split(",")):
            sys.exit(print(f"SYNTHFACTORY_CELERY_WORKERS entry {entry!r}: expected "
                           "name:queue[,queue...]", file=sys.stderr) or 3)
        found.append((name, queues))
    if not found:
        sys.exit(print("SYNTHFACTORY_CELERY_WORKERS: no worker named", file=sys.stderr) or 3)
    return found


def deployment_env(base: dict[str, str]) -> dict[str, str]:
    database = base.get("SYNTHFACTORY_CELERY_DATABASE", "synthfactory_airflow")
    home = base.get("AIRFLOW_HOME", str(Path.home() / "airflow"))
    sql = base.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
                   f"postgresql+psycopg2://postgres@127.0.0.1:5432/{database}")
    return {**base, "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": sql,
            "AIRFLOW__CELERY__BROKER_URL": base.get("AIRFLOW__CELERY__BROKER_URL",
                                                    "redis://127.0.0.1:6379/0"),
            # Celery's task states in the same database (db+ is Celery's scheme for it)
            "AIRFLOW__CELERY__RESULT_BACKEND": base.get(
                "AIRFLOW__CELERY__RESULT_BACKEND", "db+" + sql.replace("+psycopg2", "")),
            # DAG bundles' clones under this deployment's home, not the machine's shared
            # temp folder (Airflow's default), where another deployment's clone of a
            # bundle of the same name would be taken for this one's
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_STORAGE_PATH": base.get(
                "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_STORAGE_PATH",
                str(Path(home, "dag_bundles")))}


def create_database(sql_url: str) -> None:
    """`airflow db migrate` needs the database itself to exist."""
    import psycopg2
    from sqlalchemy.engine import make_url

    url = make_url(sql_url)
    if not url.drivername.startswith("postgresql"):
        return
    admin = psycopg2.connect(host=url.host, port=url.port or 5432, user=url.username,
                             password=url.password, dbname="postgres", connect_timeout=10)
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (url.database,))
            if cursor.fetchone() is None:
                cursor.execute(f'CREATE DATABASE "{url.database}"')
    finally:
        admin.close()


def commands(env: dict[str, str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Every component: its name -> (argv, environment)."""
    found = {name: ([AIRFLOW, *argv], env) for name, argv in (
        ("scheduler", ["scheduler"]),
        ("api-server", ["api-server", "--port", env.get("SYNTHFACTORY_API_PORT", "8080")]),
        ("dag-processor", ["dag-processor"]),
        ("triggerer", ["triggerer"]))}
    spec = env.get("SYNTHFACTORY_CELERY_WORKERS", DEFAULT_WORKERS)
    for i, (name, queues) in enumerate(workers(spec)):
        port = str(int(env.get("SYNTHFACTORY_FIRST_LOG_PORT", FIRST_LOG_PORT)) + i)
        own = worker_folder(env, name)
        found[name] = ([AIRFLOW, "celery", "worker", "--queues", queues,
                        "--celery-hostname", f"{name}@%h"],
                       {**env, "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": port,
                        "SYNTHFACTORY_CELERY_WORKER_NAME": name,
                        # a disk of its own, as on a machine of its own: steps' scratch
                        # (TMPDIR) and task logs, so nothing one task leaves there can
                        # reach a task on the other worker
                        "TMPDIR": str(own / "tmp"),
                        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(own / "logs"),
                        # the DAG bundle versions its tasks run, cloned by this worker
                        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_STORAGE_PATH":
                            str(own / "dag_bundles")})
    return found


def worker_folder(env: dict[str, str], name: str) -> Path:
    return Path(env.get("AIRFLOW_HOME", Path.home() / "airflow"), "workers", name)


def main() -> int:
    env = deployment_env(dict(os.environ))
    planned = commands(env)  # a bad worker spec ends here, before anything starts
    create_database(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    logs = Path(env.get("AIRFLOW_HOME", Path.home() / "airflow"), "logs", "celery-deployment")
    logs.mkdir(parents=True, exist_ok=True)
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True,
                   stdout=open(logs / "migrate.log", "w"), stderr=subprocess.STDOUT)
    running: dict[str, subprocess.Popen] = {}
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for name, (argv, component_env) in planned.items():
        if "SYNTHFACTORY_CELERY_WORKER_NAME" in component_env:  # a worker's own folders
            Path(component_env["TMPDIR"]).mkdir(parents=True, exist_ok=True)
        running[name] = subprocess.Popen(argv, env=component_env, start_new_session=True,
                                         stdout=open(logs / f"{name}.log", "w"),
                                         stderr=subprocess.STDOUT)
        print(f"started {name} (pid {running[name].pid}): {' '.join(argv[1:])}", flush=True)
    worker_names = {name for name, (_, e) in planned.items()
                    if "SYNTHFACTORY_CELERY_WORKER_NAME" in e}
    gone: set[str] = set()
    try:
        while not stopping:
            for name, process in running.items():
                if name in gone or process.poll() is None:
                    continue
                gone.add(name)
                # a worker may die (an OOM, a drained node): its tasks go to the others
                # once the scheduler notices; without a scheduler, API server, DAG
                # processor or triggerer, or with no worker left, nothing would run
                fatal = name not in worker_names or worker_names <= gone
                print(f"{name} exited with {process.returncode}; see "
                      f"{logs / (name + '.log')}"
                      + ("; stopping the rest" if fatal else "; the others go on"), flush=True)
                stopping = stopping or fatal
            time.sleep(1)
    finally:
        for process in running.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 60  # a worker finishes its tasks' heartbeats first
        for process in running.values():
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
