"""What Airflow itself costs at production counts: synthetic_rephrase under a real
scheduler with a plan of ``--groups`` shard groups (1,024: what a 12T-token daily run
maps), each a ``shard.rephrase`` and a ``shard.validate`` task.

`airflow standalone` (scheduler, DAG processor, triggerer, API server) with the
LocalExecutor, or with ``--executor celery`` the Celery deployment of `make celery`
(scripts/celery_airflow.py: the same four components and two Celery workers serving every
queue, ``--parallelism`` slots between them, a private Redis broker, Celery's results in
the metadata database), on a PostgreSQL metadata database of its own (created, and dropped at the
end, on the server of ``$SYNTHFACTORY_BENCH_PG_DSN``, default
postgresql://postgres@127.0.0.1:5432/postgres), the local runner, and one manual run of
the unchanged DAG: check_params, crawl, stitch (Spark), plan, the capacity sensor, the
mapped ``shard`` groups, register, audit, smoke, report. The seed partition is one
document repeated, so stitch cuts one prompt row a shard and plan makes exactly
``--groups`` equal groups of ``--shards-per-group`` shards. Every rephrase task runs the
echo engine (no model) whose shards take ``--shard-seconds`` each: the DAG's dry-run
setting ``SYNTHFACTORY_DRY_RUN_ECHO_DELAY_S`` puts ``--engine echo --echo-delay-s S`` on
the rephrase argv. Airflow's parallelism, the DAG's active tasks and the gpu pool are
``--parallelism`` so sleeping shards overlap.

From the scheduler's own records (PostgreSQL's task_instance and xcom rows) and the task
logs, per mapped task: the scheduler's reaction (upstream's end to scheduled), the wait
for a free slot (scheduled to queued: capacity, not overhead), the launch (queued to
start), and the task's own time outside its step's process (start to end minus the
step's process, from the operator's "running" line to the step's summary line). Airflow's
overhead per task is reaction + launch + outside the step; the work is the echo engine's
generation seconds (the GPU's share). Also: the plan's XCom (bytes, and the same plan at
the 12T plan's shape), the metadata database's growth, CPU seconds by component, and one
poke of the capacity sensor for a wave of ``--groups`` groups.

    .venv/bin/python benchmarks/orchestration.py [--groups 1024] [--shards-per-group 1]
        [--shard-seconds 3] [--parallelism 8] [--executor local|celery] [--keep]

Last line: ``RESULT orchestration groups=G tasks=N wall_s=W work_s=S
overhead_per_task_ms=O xcom_plan_bytes=B db_growth_mb=D sensor_poke_ms=P isa=I`` (tasks:
the mapped ones, 2 a group; wall: the DAG run's; I: the CPU's vector extensions,
benchmarks/machine.py); under Celery the line goes on with ``executor=celery workers=2``.
Run it alone: every figure here is a latency on 2 shared cores.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import orchestration_support as sup  # noqa: E402  (this folder is on sys.path)
from machine import print_machine, result_line  # noqa: E402

from tests.support.airflow_standalone import wait_for  # noqa: E402
from tests.support.paths import MODEL  # noqa: E402

DAY = date(2026, 11, 15)  # the seed partition's day; the run's logical date is the next
SHARD_MINUTES = 30  # the production shard the projection counts against
PRODUCTION_SHARDS = 72_500  # a 12T-token daily run's shards (docs/scale.md), for the plan
PROD_RUN_URL = len("s3://synthfactory-prod/data/synthetic_rephrase/2026-11-30")
FIXED_TASKS = ("check_params", "crawl_metadata", "stitch_prompts", "plan_shards",
               "wait_for_capacity", "join_chunks", "register_catalog", "audit_run",
               "smoke_test_training",
               "write_report")
REPHRASE, VALIDATE = "shard.rephrase", "shard.validate"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1024, help="shard groups (<= 1024)")
    parser.add_argument("--shards-per-group", type=int, default=1)
    parser.add_argument("--shard-seconds", type=float, default=3.0,
                        help="the echo engine's time per shard (one poll of a 1-row shard)")
    parser.add_argument("--parallelism", type=int, default=8,
                        help="Airflow's [core] parallelism, the DAG's active tasks and the "
                             "gpu pool's slots")
    parser.add_argument("--timeout-s", type=float, default=3600,
                        help="give up on the DAG run after this long")
    parser.add_argument("--executor", choices=("local", "celery"), default="local",
                        help="local: `airflow standalone`; celery: `make celery`'s deployment "
                             "with two workers")
    parser.add_argument("--database", default="synthfactory_orchestration")
    parser.add_argument("--keep", action="store_true",
                        help="keep the folder and the database (for a look afterwards)")
    args = parser.parse_args()
    if not 1 <= args.groups <= 1024:
        parser.error("--groups: 1..1024 (Airflow's default max_map_length)")
    return args


def conf(home: Path, groups: int) -> dict:
    # shard_tokens = max_model_len with auto budgets: every row fills its shard alone
    return {"source": f"file://{home}/corpus", "output_root": f"file://{home}/data",
            "catalog_uri": f"sqlite:///{home}/catalog.db",
            "warehouse": f"file://{home}/warehouse", "templates": ["summary"],
            "model": str(MODEL), "shard_tokens": 2048, "max_model_len": 2048,
            "max_new_tokens": "auto", "checkpoint_rows": 16, "spark_partitions": 2,
            "max_shard_groups": groups, "include_rejected": True, "smoke_steps": 2}


def run_dag(args: argparse.Namespace, home: Path, db_uri: str) -> dict:
    env = {"AIRFLOW__CORE__PARALLELISM": str(args.parallelism),
           "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(args.parallelism),
           "SYNTHFACTORY_DRY_RUN_ECHO_DELAY_S": f"{args.shard_seconds:g}"}
    env = {k: os.environ.get(k, v) for k, v in env.items()}  # the caller's settings win
    out: dict = {}
    deployment = (sup.celery(home, db_uri, env, args.parallelism) if args.executor == "celery"
                  else sup.standalone(home, db_uri, env))
    with deployment as airflow:
        api = airflow.api
        wait_for(lambda: api.call("GET", f"/api/v2/dags/{sup.DAG_ID}"), 600, "the DAG to parse")
        sup.retry(api, "POST", "/api/v2/pools", {"name": "gpu", "slots": args.parallelism,
                                                 "include_deferred": False})
        sup.retry(api, "PATCH", f"/api/v2/dags/{sup.DAG_ID}", {"is_paused": False})
        out["db_before"] = sup.database_bytes(args.database)
        out["tables_before"] = sup.table_bytes(args.database)
        sampler = sup.CpuSampler(airflow.pid).start()
        run_id = "orchestration"
        logical = (DAY + timedelta(days=1)).isoformat() + "T00:00:00Z"
        started = time.monotonic()
        sup.retry(api, "POST", f"/api/v2/dags/{sup.DAG_ID}/dagRuns",
                  {"dag_run_id": run_id, "logical_date": logical,
                   "conf": conf(home, args.groups)})
        print(f"triggered {run_id} ({args.groups} groups x {args.shards_per_group} shards, "
              f"{args.shard_seconds:g} s a shard, parallelism {args.parallelism})", flush=True)
        state, last = None, 0.0
        while time.monotonic() - started < args.timeout_s:
            state = sup.run_state(args.database, run_id)  # the database: the API may lag
            if state in ("success", "failed"):
                break
            if time.monotonic() - last > 60:
                last = time.monotonic()
                done = sup.query(args.database, "SELECT count(*) AS n FROM task_instance WHERE "
                                 "run_id = %s AND state IN ('success','failed',"
                                 "'upstream_failed','skipped')", (run_id,))[0]["n"]
                print(f"  {time.monotonic() - started:6.0f} s: {done} task instances done, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
            time.sleep(5)
        sampler.stop()
        out.update(state=state, run_id=run_id, polled_s=time.monotonic() - started,
                   run=sup.dag_run(args.database, run_id), sampler=sampler,
                   load=os.getloadavg()[0])
        out["db_after"] = sup.database_bytes(args.database)
        out["tables_after"] = sup.table_bytes(args.database)
        out["tis"] = sup.task_instances(args.database, run_id)
        out["rephrase_xcoms"] = sup.xcom_values(args.database, run_id, REPHRASE)
        out["plan_xcom"] = sup.xcom_bytes(args.database, run_id, "plan_shards")
        out["plan_value"] = sup.xcom_values(args.database, run_id, "plan_shards").get(-1) or []
        out["rows"] = sup.row_counts(args.database, ["task_instance", "xcom",
                                                     "rendered_task_instance_fields", "log"])
        # The plan at the 12T plan's shape, stored beside this run's and read back as a
        # task's pull reads it (after the database was measured: it is not the run's).
        value = out["plan_value"]
        options = value[0]["rephrase"][value[0]["rephrase"].index("--run") + 2:] if value else []
        with tempfile.TemporaryDirectory(prefix="synthfactory-plan-") as tmp:
            prod = sup.plan_value(Path(tmp), PRODUCTION_SHARDS, 1024, PROD_RUN_URL, options)
        out["prod_plan_bytes"] = sup.json_bytes(prod)
        out["pull_s"] = sup.time_pulls(api, run_id, "plan_shards", "return_value")
        sup.retry(api, "POST", f"/api/v2/dags/{sup.DAG_ID}/dagRuns/{run_id}/taskInstances/"
                  "plan_shards/xcomEntries", {"key": "plan_at_12t_shape", "value": prod})
        out["prod_pull_s"] = sup.time_pulls(api, run_id, "plan_shards", "plan_at_12t_shape")
    out["marks"] = {t: {} for t in (REPHRASE, VALIDATE)}
    for logs in sup.task_log_folders(home):  # each Celery worker keeps the logs of its tasks
        for t in out["marks"]:
            out["marks"][t].update(sup.log_marks(logs, run_id, t))
    return out


def ms(a, b) -> float | None:
    return (b - a).total_seconds() * 1000 if a and b else None


PARTS = ("react", "slot", "launch", "boot", "parse", "pre", "step", "post", "outside")


def task_parts(ti: dict, upstream_end, marks: dict) -> dict[str, float | None]:
    """One mapped task's time, ms: react (its upstream's end to scheduled), slot (scheduled
    to queued: waiting for a free slot, capacity rather than overhead), launch (queued to
    start), then inside the task: boot (start to its first log line), parse (the DAG
    file), pre (rendering, the plan's XCom pulled, up to the step's process), step (the
    step's process: "running" to its summary line), post (to the end: XCom pushed, state
    reported); outside = everything in the task but the step."""
    scheduled = ti["scheduled_dttm"] or ti["queued_dttm"]
    parts = {"react": ms(upstream_end, scheduled), "slot": ms(scheduled, ti["queued_dttm"]),
             "launch": ms(ti["queued_dttm"], ti["start_date"]),
             "boot": ms(ti["start_date"], marks.get("first")),
             "parse": ms(marks.get("parse_start"), marks.get("parse_end")),
             "step": ms(marks.get("running"), marks.get("summary")),
             "post": ms(marks.get("summary"), ti["end_date"])}
    inside = ms(ti["start_date"], ti["end_date"])
    before = ms(marks.get("first"), marks.get("running"))
    parts["pre"] = before - parts["parse"] if None not in (before, parts["parse"]) else None
    parts["outside"] = inside - parts["step"] if None not in (inside, parts["step"]) else None
    return parts


def analyse(out: dict) -> dict:
    tis = out["tis"]
    by = {(t["task_id"], t["map_index"]): t for t in tis}
    failed = [f"{t['task_id']}[{t['map_index']}]={t['state']}" for t in tis
              if t["state"] != "success"]
    wave = by.get(("wait_for_capacity", -1)) or {}
    parts = {t: {k: [] for k in PARTS} for t in (REPHRASE, VALIDATE)}
    overheads: dict[str, list[float]] = {REPHRASE: [], VALIDATE: []}
    gaps = []
    for (task_id, index), ti in sorted(by.items()):
        if task_id not in parts or ti["state"] != "success":
            continue
        upstream = wave.get("end_date") if task_id == REPHRASE else \
            by[(REPHRASE, index)]["end_date"]
        got = task_parts(ti, upstream, out["marks"][task_id].get(index, {}))
        for key, value in got.items():
            if value is not None:
                parts[task_id][key].append(value)
        if None not in (got["react"], got["launch"], got["outside"]):
            overheads[task_id].append(got["react"] + got["launch"] + got["outside"])
        if task_id == VALIDATE:
            gaps.append(ms(by[(REPHRASE, index)]["end_date"], ti["start_date"]))
    generation = [x.get("generation_s", 0.0) for x in out["rephrase_xcoms"].values()
                  if isinstance(x, dict)]
    mapped = [t for t in tis if t["task_id"] in parts]
    first = min((t["start_date"] for t in mapped if t["start_date"]), default=None)
    final = max((t["end_date"] for t in mapped if t["end_date"]), default=None)
    wall = ms(out["run"]["start_date"], out["run"]["end_date"])
    cpu = out["sampler"].between(first.timestamp(), final.timestamp()) if first and final \
        else {}
    return {"parts": parts, "overheads": overheads, "gaps": gaps, "generation": generation,
            "work_s": sum(generation), "failed": failed, "mapped": len(mapped),
            "wall_s": wall / 1000 if wall is not None else None,
            "shard_phase_s": (final - first).total_seconds() if first and final else None,
            "cpu": cpu, "fixed": {t: by.get((t, -1)) for t in FIXED_TASKS}}


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def report(args: argparse.Namespace, out: dict, a: dict, home: Path) -> None:
    groups = len(out["plan_value"])
    mapped = max(a["mapped"], 1)
    print(f"\nexecutor: {args.executor}"
          + (f", {len(sup.CELERY_WORKERS)} Celery workers" if args.executor == "celery" else ""))
    print(f"DAG run {out['state']} in {a['wall_s'] or 0:.0f} s; {a['mapped']} mapped tasks "
          f"in a shard phase of {a['shard_phase_s'] or 0:.0f} s (first mapped start to last "
          f"end); load average {out['load']:.1f} at the end, on {os.cpu_count()} cores")
    if a["failed"]:
        print(f"not successful: {len(a['failed'])}: {', '.join(a['failed'][:12])}")
    fixed = {t: ms(ti["start_date"], ti["end_date"]) for t, ti in a["fixed"].items()
             if ti and ti["start_date"] and ti["end_date"]}
    print("fixed tasks, s: " + "  ".join(f"{t} {v / 1000:.1f}" for t, v in fixed.items()))
    print("\nper mapped task, ms (react: upstream's end -> scheduled; slot: -> queued, a wait "
          "for a free slot,\n  not counted; launch: -> started; boot, parse (the DAG file), "
          "pre, post: the task's own time\n  around its step's process; outside = boot + parse "
          "+ pre + post)")
    for task_id, p in a["parts"].items():
        for key in PARTS:
            print(f"  {task_id:15s} {key:8s} {sup.spread(p[key])}")
    print(f"  rephrase end -> its validate's start   {sup.spread(a['gaps'])}")
    every = a["overheads"][REPHRASE] + a["overheads"][VALIDATE]
    overhead = mean(every)
    print(f"  Airflow's overhead a task (react + launch + outside)  {sup.spread(every)}")
    gen = a["generation"]
    print(f"\nwork: echo generation {a['work_s']:.1f} s in {len(gen)} rephrase tasks "
          f"({mean(gen):.2f} s each)")
    cpu = a["cpu"]
    central = sum(cpu.get(k, 0.0) for k in sup.COMPONENTS)
    print("CPU seconds in the shard phase (psutil every 0.5 s; task processes and steps are "
          "lower bounds): " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(cpu.items())))
    print(f"  a mapped task: scheduler, API server, DAG processor, triggerer {central / mapped:.2f}"
          f" s; its task process {cpu.get('task processes', 0) / mapped:.2f} s; its step "
          f"{cpu.get('steps', 0) / mapped:.2f} s")
    if a["shard_phase_s"]:
        per_group = a["shard_phase_s"] / max(groups, 1)
        fixed_s = sum(fixed.values()) / 1000
        print(f"  shard phase {per_group:.2f} s a group here: 1,024 groups would take "
              f"~{per_group * 1024 / 60:.0f} min + the fixed tasks' ~{fixed_s / 60:.0f} min "
              f"(linear: the phase is CPU-bound on these cores)")
    text_bytes, stored = out["plan_xcom"]
    pulls = 2 * groups
    print(f"\nplan XCom: {text_bytes} bytes of JSON ({stored} stored), {groups} groups; each "
          f"mapped task pulls all of it: {pulls} pulls, {pulls * text_bytes / 1e6:.1f} MB; one "
          f"read through the API {out['pull_s'] * 1000:.0f} ms")
    prod, prod_s = out["prod_plan_bytes"], out["prod_pull_s"]
    print(f"  at the 12T plan's shape ({PRODUCTION_SHARDS} shards in 1,024 groups, a "
          f"{PROD_RUN_URL}-character run URL): {prod / 1e6:.1f} MB, one read {prod_s:.2f} s; "
          f"2,048 pulls = {2048 * prod / 1e9:.1f} GB and {2048 * prod_s / 60:.0f} min of API "
          f"server time, 1,024 of them at the wave's start")
    growth = out["db_after"] - out["db_before"]
    deltas = {t: out["tables_after"].get(t, 0) - out["tables_before"].get(t, 0)
              for t in out["tables_after"]}
    top = sorted(deltas.items(), key=lambda kv: -kv[1])[:5]
    print(f"metadata database: +{growth / 1e6:.1f} MB ({growth / mapped / 1000:.1f} kB a mapped "
          "task); most: " + ", ".join(f"{t} +{b / 1e6:.1f} MB" for t, b in top))
    print("  rows: " + ", ".join(f"{t} {n}" for t, n in out["rows"].items()))
    poke, where = sup.sensor_poke_ms(args.groups)
    wave = a["fixed"].get("wait_for_capacity")
    print(f"capacity check, {where}: {poke:.0f} ms a poke (poke_interval 30 s); this run's "
          f"wait_for_capacity (the local wave) took {fixed.get('wait_for_capacity', 0):.0f} ms"
          if wave else f"capacity check, {where}: {poke:.0f} ms a poke (poke_interval 30 s)")
    # At production shard sizes: a group's GPU time against Airflow's time around its
    # rephrase task (the GPU pod's life), and around both tasks (conservative).
    rephrase = mean(a["overheads"][REPHRASE])
    for k in sorted({1, args.shards_per_group, 71}):
        gpu_ms = k * SHARD_MINUTES * 60_000
        print(f"projection, {k} {SHARD_MINUTES}-minute shard(s) a group: Airflow's overhead "
              f"{rephrase / gpu_ms:.3%} of the group's GPU time (its rephrase task), "
              f"{2 * overhead / gpu_ms:.3%} (both tasks); target < 1%")
    if args.keep:
        print(f"kept: {home} and database {args.database}")
    wall_s, work_s = f"{a['wall_s'] or 0:.0f}", f"{a['work_s']:.0f}"
    overhead_ms, growth_mb, poke_ms = f"{overhead:.0f}", f"{growth / 1e6:.1f}", f"{poke:.0f}"
    # the same line under Celery, with the executor and its workers after it
    if args.executor == "celery":
        print(result_line("orchestration", groups=groups, tasks=a["mapped"], wall_s=wall_s,
                          work_s=work_s, overhead_per_task_ms=overhead_ms,
                          xcom_plan_bytes=text_bytes, db_growth_mb=growth_mb,
                          sensor_poke_ms=poke_ms, executor="celery",
                          workers=len(sup.CELERY_WORKERS)))
    else:
        print(result_line("orchestration", groups=groups, tasks=a["mapped"], wall_s=wall_s,
                          work_s=work_s, overhead_per_task_ms=overhead_ms,
                          xcom_plan_bytes=text_bytes, db_growth_mb=growth_mb,
                          sensor_poke_ms=poke_ms))


def main() -> None:
    args = parse_args()
    home = Path(tempfile.mkdtemp(prefix="synthfactory-orchestration-"))
    try:
        db_uri = sup.recreate_database(args.database)
        (home / "var" / "models").mkdir(parents=True)
        sup.write_corpus(home / "corpus", DAY.isoformat(), args.groups * args.shards_per_group)
        print_machine()
        out = run_dag(args, home, db_uri)
        print_machine()
        if out["state"] != "success":
            print(f"DAG run {out['state']} after {out['polled_s']:.0f} s (timeout "
                  f"{args.timeout_s:.0f} s): figures below cover what finished")
        analysis = analyse(out)
        report(args, out, analysis, home)
        if out["state"] != "success":
            raise SystemExit(1)
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
            with contextlib.suppress(Exception):
                sup.drop_database(args.database)


if __name__ == "__main__":
    main()
