"""What benchmarks/orchestration.py needs besides its flow: a throwaway PostgreSQL
metadata database, `airflow standalone` on it (LocalExecutor) or the Celery deployment of
scripts/celery_airflow.py (two workers, a private Redis broker), the seed partition, the
scheduler's own records read back, CPU time by Airflow component, and the capacity
sensor's check timed in-process. Runs in .venv (Airflow); the engine's work goes through
.venv-worker's programs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tests.support.airflow_home import airflow_env
from tests.support.airflow_standalone import Api, wait_for
from tests.support.paths import AIRFLOW, ROOT, WORKER, WORKER_PYTHON
from tests.support.ports import free_port

# The server's maintenance database: CREATE / DROP DATABASE are issued there.
ADMIN_DSN_ENV = "SYNTHFACTORY_BENCH_PG_DSN"
DEFAULT_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
DAG_ID = "synthetic_rephrase"


# -- PostgreSQL --------------------------------------------------------------------------
def admin_dsn() -> str:
    return os.environ.get(ADMIN_DSN_ENV, DEFAULT_ADMIN_DSN)


def database_dsn(name: str) -> str:
    """libpq DSN of database ``name`` on the admin DSN's server."""
    base, _, _ = admin_dsn().rpartition("/")
    return f"{base}/{name}"


def recreate_database(name: str) -> str:
    """Drop and create ``name``; returns Airflow's SQLAlchemy URI of it."""
    import psycopg2

    with contextlib.closing(psycopg2.connect(admin_dsn(), connect_timeout=5)) as admin:
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            cur.execute(f'CREATE DATABASE "{name}"')
    return database_dsn(name).replace("postgresql://", "postgresql+psycopg2://", 1)


def drop_database(name: str) -> None:
    import psycopg2

    with contextlib.closing(psycopg2.connect(admin_dsn(), connect_timeout=5)) as admin:
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def query(name: str, sql: str, args: tuple = ()) -> list[dict]:
    import psycopg2
    import psycopg2.extras

    with contextlib.closing(psycopg2.connect(database_dsn(name), connect_timeout=5)) as conn:
        with conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute(sql, args)
            return [dict(r) for r in cur.fetchall()]


def database_bytes(name: str) -> int:
    return int(query(name, "SELECT pg_database_size(current_database()) AS b")[0]["b"])


def table_bytes(name: str) -> dict[str, int]:
    """Each table's size with its indexes and TOAST."""
    rows = query(name, "SELECT c.relname AS t, pg_total_relation_size(c.oid) AS b "
                       "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                       "WHERE c.relkind = 'r' AND n.nspname = 'public'")
    return {r["t"]: int(r["b"]) for r in rows}


def row_counts(name: str, tables: list[str]) -> dict[str, int]:
    return {t: int(query(name, f'SELECT count(*) AS n FROM "{t}"')[0]["n"]) for t in tables}


# -- the seed partition --------------------------------------------------------------------
# One document, the same for every id: every prompt row then costs the same tokens, so
# stitch cuts one row a shard (max_new_tokens auto fills the context window: prompt +
# budget = max_model_len = shard_tokens) and plan's groups are exactly equal.
SENTENCE = ("The module provides classes and functions for reading, writing and checking "
            "structured records, and it documents every option that a caller may pass. ")
CORPUS_SCRIPT = """
import sys, pyarrow as pa, pyarrow.parquet as pq
out, docs, text = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pq.write_table(pa.table({"id": [f"doc-{i:07d}" for i in range(docs)], "text": [text] * docs}),
               out)
"""


def write_corpus(corpus: Path, day: str, docs: int, sentences: int = 60) -> None:
    part = corpus / f"dt={day}" / "part-00000.parquet"
    part.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(WORKER_PYTHON), "-c", CORPUS_SCRIPT, str(part), str(docs),
                    SENTENCE * sentences], check=True)


# -- airflow standalone on PostgreSQL ----------------------------------------------------------
@dataclass
class Airflow:
    api: Api
    home: Path
    log: Path
    pid: int


def _login(base: str, airflow_home: Path) -> Api:
    passwords = airflow_home / "simple_auth_manager_passwords.json.generated"
    wait_for(passwords.exists, 120, "the admin password")
    password = json.loads(passwords.read_text())["admin"]
    token = Api(base).call("POST", "/auth/token",
                           {"username": "admin", "password": password})["access_token"]
    return Api(base, token)


def _stop_group(proc: subprocess.Popen, seconds: float = 90) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


CELERY_WORKERS = ("worker-a", "worker-b")


def _deployment_env(home: Path, db_uri: str, api_port: int) -> dict[str, str]:
    """What both executors' deployments share: the metadata database, the API server the
    task supervisors reach, one trigger log-server port, the local runner."""
    return {**airflow_env(home / "airflow"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_uri,
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL":
                f"http://127.0.0.1:{api_port}/execution/",
            # a loaded 2-core machine answers the task supervisors in seconds, not ms
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
            # only the run the benchmark triggers: no scheduled run of the latest day
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "SYNTHFACTORY_RUNNER": "local", "SYNTHFACTORY_HOME": str(home),
            "SYNTHFACTORY_WORKER_BIN": str(WORKER),
            "PATH": f"{AIRFLOW.parent}{os.pathsep}{os.environ.get('PATH', '')}"}


@contextlib.contextmanager
def celery(home: Path, db_uri: str, env_extra: dict[str, str],
           parallelism: int) -> Iterator[Airflow]:
    """scripts/celery_airflow.py (`make celery`): scheduler, API server, DAG processor,
    triggerer and two Celery workers serving every queue, ``parallelism`` task slots
    between them, a private Redis broker on a free port, Celery's results in the
    metadata database. Both workers are on this machine and share its disk, which the
    deployment is told (SYNTHFACTORY_WORKERS_SHARE_DISK), so the run's file:// folders
    pass check_params. Stops every component's process group, and the broker, on exit."""
    redis = shutil.which("redis-server") or "/usr/bin/redis-server"
    broker_port, port = free_port(), free_port()
    (home / "redis").mkdir(parents=True, exist_ok=True)
    broker = subprocess.Popen([redis, "--port", str(broker_port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", "--dir", str(home / "redis")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    airflow_home = home / "airflow"
    env = {**_deployment_env(home, db_uri, port),
           "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{broker_port}/0",
           "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(max(parallelism // len(CELERY_WORKERS), 1)),
           "SYNTHFACTORY_CELERY_WORKERS": " ".join(f"{w}:default,cpu,gpu"
                                                   for w in CELERY_WORKERS),
           "SYNTHFACTORY_WORKERS_SHARE_DISK": "1",
           "SYNTHFACTORY_API_PORT": str(port),
           "SYNTHFACTORY_FIRST_LOG_PORT": str(free_port()),
           "AIRFLOW__API__HOST": "127.0.0.1",
           **env_extra}
    log_path = home / "celery-deployment.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "celery_airflow.py")],
                            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: proc.poll() is None and Api(base).call("GET", "/api/v2/monitor/health"),
                 900, "the API server")
        yield Airflow(_login(base, airflow_home), home, log_path, proc.pid)
    finally:
        _stop_group(proc)
        _stop_group(broker, 10)
        log.close()


def task_log_folders(home: Path) -> list[Path]:
    """Where task logs are: the LocalExecutor's one folder, or each Celery worker's."""
    workers = sorted((home / "airflow" / "workers").glob("*/logs"))
    return workers or [home / "airflow" / "logs"]


@contextlib.contextmanager
def standalone(home: Path, db_uri: str, env_extra: dict[str, str]) -> Iterator[Airflow]:
    """`airflow standalone` (scheduler, DAG processor, triggerer, API server) with the
    LocalExecutor on ``db_uri``; stops its whole process group on exit."""
    port = free_port()
    airflow_home = home / "airflow"
    env = {**_deployment_env(home, db_uri, port),
           "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
           "AIRFLOW__API__PORT": str(port),
           "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
           **env_extra}
    log_path = home / "standalone.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([str(AIRFLOW), "standalone"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: Api(base).call("GET", "/api/v2/monitor/health"), 900, "the API server")
        yield Airflow(_login(base, airflow_home), home, log_path, proc.pid)
    finally:
        _stop_group(proc, 60)
        log.close()


# -- CPU time by component ------------------------------------------------------------------
COMPONENTS = ("scheduler", "api-server", "dag-processor", "triggerer")


@dataclass
class CpuSampler:
    """Samples the process tree of `airflow standalone` (psutil), attributing each
    process's CPU seconds to a component: the four long-lived ones (their own time and
    their reaped children's), the executor's task processes (the scheduler's descendants,
    own time), and the steps (.venv-worker processes). Short-lived processes are seen
    until their last sample: the task and step figures are lower bounds."""

    root: int
    every: float = 0.5
    seen: dict[int, tuple[str, float]] = field(default_factory=dict)
    history: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> CpuSampler:
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return self._totals()

    def _totals(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for kind, seconds in self.seen.values():
            totals[kind] = totals.get(kind, 0.0) + seconds
        return totals

    def between(self, start: float, end: float) -> dict[str, float]:
        """CPU seconds by kind spent from ``start`` to ``end`` (epoch seconds)."""
        def at(moment: float) -> dict[str, float]:
            earlier = [t for t in self.history if t[0] <= moment]
            return earlier[-1][1] if earlier else {}
        before, after = at(start), at(end)
        return {k: after[k] - before.get(k, 0.0) for k in after}

    def _loop(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                root = psutil.Process(self.root)
                tops = root.children()
                owner = {}
                for top in tops:
                    words = " ".join(top.cmdline()).replace("_", "-")  # "api_server"
                    name = ("celery workers" if "celery worker" in words else
                            next((c for c in COMPONENTS if c in words), "other"))
                    owner[top.pid] = name
                    for child in top.children(recursive=True):
                        owner[child.pid] = name
                for pid, name in owner.items():
                    with contextlib.suppress(psutil.Error):
                        proc = psutil.Process(pid)
                        times = proc.cpu_times()
                        if pid in {t.pid for t in tops}:
                            kind = name
                            seconds = (times.user + times.system + times.children_user
                                       + times.children_system)
                        elif ".venv-worker" in " ".join(proc.cmdline()):
                            kind, seconds = "steps", times.user + times.system
                        elif name in ("scheduler", "celery workers"):  # the executor's
                            kind, seconds = "task processes", times.user + times.system
                        else:
                            continue  # counted in its component's children time
                        self.seen[pid] = (kind, seconds)
            except psutil.Error:
                pass
            self.history.append((time.time(), self._totals()))
            self._stop.wait(self.every)


def retry(api: Api, method: str, path: str, body: dict | None = None, seconds: float = 300):
    """An API call, again while the server is too busy to answer (timeouts, 5xx)."""
    import urllib.error

    deadline = time.monotonic() + seconds
    while True:
        try:
            return api.call(method, path, body)
        except urllib.error.HTTPError as exc:
            if exc.code < 500 or time.monotonic() > deadline:
                raise
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(3)


# -- the scheduler's records -------------------------------------------------------------
def dag_run(db: str, run_id: str) -> dict:
    rows = query(db, "SELECT state, start_date, end_date FROM dag_run WHERE dag_id = %s "
                     "AND run_id = %s", (DAG_ID, run_id))
    return rows[0] if rows else {"state": None, "start_date": None, "end_date": None}


def run_state(db: str, run_id: str) -> str | None:
    return dag_run(db, run_id)["state"]


def task_instances(db: str, run_id: str) -> list[dict]:
    return query(db, "SELECT task_id, map_index, state, try_number, scheduled_dttm, "
                     "queued_dttm, start_date, end_date, pool FROM task_instance "
                     "WHERE dag_id = %s AND run_id = %s ORDER BY task_id, map_index",
                 (DAG_ID, run_id))


def xcom_values(db: str, run_id: str, task_id: str) -> dict[int, object]:
    rows = query(db, "SELECT map_index, value FROM xcom WHERE dag_id = %s AND run_id = %s "
                     "AND task_id = %s AND key = 'return_value'", (DAG_ID, run_id, task_id))
    return {r["map_index"]: _json(r["value"]) for r in rows}


def xcom_bytes(db: str, run_id: str, task_id: str) -> tuple[int, int]:
    """(JSON text bytes, bytes stored: TOAST-compressed) of a task's return value."""
    rows = query(db, "SELECT octet_length(value::text) AS text, pg_column_size(value) AS stored "
                     "FROM xcom WHERE dag_id = %s AND run_id = %s AND task_id = %s "
                     "AND key = 'return_value' AND map_index = -1", (DAG_ID, run_id, task_id))
    return (int(rows[0]["text"]), int(rows[0]["stored"])) if rows else (0, 0)


def _json(value: object) -> object:
    while isinstance(value, str):  # stored as JSON, possibly a JSON string of JSON
        try:
            value = json.loads(value)
        except ValueError:
            break
    return value


MARKS = (  # (phase mark, how its log event begins); first match each, in this order
    ("parse_start", "Filling up the DagBag"),  # the task process parses the DAG file
    ("parse_end", "Worker startup parse complete"),
    ("running", "running "),  # the operator starts the step's process
    ("summary", "{"),  # the step's summary: its last output line
)


def log_marks(logs: Path, run_id: str, task_id: str) -> dict[int, dict[str, datetime]]:
    """Per map index: when the task's log began and ended, and the MARKS (first try)."""
    found = {}
    folder = logs / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={task_id}"
    for path in folder.glob("map_index=*/attempt=1.log"):
        index = int(path.parent.name.split("=", 1)[1])
        marks: dict[str, datetime] = {}
        pending = list(MARKS)
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            text, stamp = str(event.get("event", "")), event.get("timestamp")
            if not stamp:
                continue
            when = _stamp(stamp)
            marks.setdefault("first", when)
            marks["last"] = when
            if pending and text.startswith(pending[0][1]):
                marks[pending.pop(0)[0]] = when
        found[index] = marks
    return found


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- numbers -------------------------------------------------------------------------------
def spread(values: list[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (f"mean {statistics.fmean(values):7.0f}  median {statistics.median(values):7.0f}  "
            f"p95 {p95:7.0f}  max {ordered[-1]:7.0f}")


# -- the capacity sensor's check ----------------------------------------------------------------
def sensor_poke_ms(groups: int, rounds: int = 5) -> tuple[float, str]:
    """Median milliseconds of one capacity check (what a poke of wait_for_capacity runs)
    for the kubernetes runner's wave of ``groups`` shard groups (a GPU pod and a CPU pod
    each) against a snapshot of a cluster where it fits: 1,024 GPUs (8 a node), CPU nodes
    for the CPU pods, and 10,000 other pods. The snapshot is built here: the API server's
    listing is not timed (benchmarks/capacity.py times the fit on 20,000 pods)."""
    from jinja2 import Template

    from synthfactory_airflow.operators.runners.kubernetes import KubernetesRunner
    from synthfactory_airflow.operators.settings import Settings
    from synthfactory_airflow.plugins.capacity.check import CapacityCheck
    from synthfactory_airflow.plugins.capacity.cluster import ClusterSnapshot

    wave = _render(KubernetesRunner(Settings(runner="kubernetes")).wave(str(groups)),
                   {"params": {"replicas": 1}}, Template)
    nodes, pods = _cluster(max(groups, 1024))
    check = CapacityCheck(wave=wave, cluster="kubernetes", kubernetes_conn_id=None)
    times, fits = [], None
    for _ in range(rounds):
        snapshot = ClusterSnapshot(nodes=nodes, pods=pods, source="kubernetes")
        started = time.perf_counter()
        result = check.run(snapshot)
        times.append((time.perf_counter() - started) * 1000)
        fits = result.fits
    return statistics.median(times), f"wave of {groups} GPU + {groups} CPU pods, " \
        f"{len(nodes)} nodes, {len(pods)} pods: fits={fits}"


def _render(value, context, template_class):
    if isinstance(value, str):
        return template_class(value).render(**context) if "{{" in value else value
    if isinstance(value, list):
        return [_render(v, context, template_class) for v in value]
    if isinstance(value, dict):
        return {k: _render(v, context, template_class) for k, v in value.items()}
    return value


def _cluster(groups: int) -> tuple[list[dict], list[dict]]:
    gpu_nodes, cpu_nodes = -(-groups // 8), -(-groups * 2 // 60)
    nodes, pods = [], []
    for i in range(gpu_nodes + cpu_nodes):
        gpu = i < gpu_nodes
        nodes.append({
            "metadata": {"name": f"node-{i:05d}",
                         "labels": {"synthfactory.io/pool": "gpu" if gpu else "cpu"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
                     if gpu else []},
            "status": {"allocatable": ({"cpu": "192", "memory": "2000Gi",
                                        "nvidia.com/gpu": "8", "pods": "110"} if gpu else
                                       {"cpu": "128", "memory": "512Gi", "pods": "110"}),
                       "conditions": [{"type": "Ready", "status": "True"}]}})
    for p in range(10_000):  # other teams' small pods, spread over the nodes
        node = f"node-{p % len(nodes):05d}"
        pods.append({"metadata": {"name": f"other-{p}"},
                     "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {
                         "requests": {"cpu": "100m", "memory": "128Mi"}}}]},
                     "status": {"phase": "Running"}})
    return nodes, pods


# -- the plan's XCom at other shapes --------------------------------------------------------------
def plan_value(tmp: Path, shards: int, groups: int, run_url_len: int,
               rephrase_options: list[str]) -> list:
    """What `synthfactory plan` returns (plan_shards' XCom) for ``shards``
    prompt shards in ``groups`` groups: shards.json written by hand (plan reads nothing
    else), the run folder's URL padded to ``run_url_len`` characters."""
    run = tmp / "plan-shape"
    pad = max(0, run_url_len - len(f"file://{run}/x"))
    run = run.with_name(run.name + "-" + "p" * pad) if pad else run
    (run / "prompts").mkdir(parents=True, exist_ok=True)
    entries = [{"name": f"shard-{i:05d}", "url": f"file://{run}/prompts/shard-{i:05d}.parquet",
                "rows": 1000, "tokens": 1_000_000} for i in range(shards)]
    # the window is shards.json's (stitch's): plan refuses --max-model-len among the options
    options, window = list(rephrase_options), None
    if "--max-model-len" in options:
        at = options.index("--max-model-len")
        window = int(options[at + 1])
        del options[at:at + 2]
    (run / "prompts" / "shards.json").write_text(json.dumps(
        {"shards": entries, **({"max_model_len": window} if window else {})}))
    out = subprocess.run([str(WORKER), "plan", "--run", f"file://{run}", "--max-shard-groups",
                          str(groups), "--", *options],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def json_bytes(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def time_pulls(api: Api, run_id: str, task_id: str, key: str, rounds: int = 3) -> float:
    """Median seconds of one read of an XCom through the REST API (the database row, as the
    execution API reads it for a task's pull)."""
    path = (f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/"
            f"{key}")
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        retry(api, "GET", path)
        times.append(time.perf_counter() - started)
    return statistics.median(times)
