"""Throughput and engine start-up measured elsewhere: in an engine sweep's folder, or
in a run's report.json."""

from __future__ import annotations

from dataclasses import dataclass

from synthfactory import storage
from synthfactory.contract import paths
from synthfactory.errors import PermanentError


@dataclass(frozen=True)
class Measured:
    tokens_per_s_per_gpu: float
    startup_s: float | None  # None: the source did not record it
    source: str  # what the figures are, and where they come from
    generating_fraction: float | None = None  # a run's share of wall time generating
    # a run's usable tokens per seed token, and per generated token (its report's
    # token_yield); None from a sweep, or a run reported before the join
    token_yield: float | None = None
    usable_share: float | None = None


def from_run(url: str) -> Measured:
    """The run's committed shards: output tokens per device-second (device-seconds are
    generation seconds x devices, so per GPU with tensor parallelism too) and the
    start-up of each engine the run's tasks started."""
    run_url = storage.normalize(url).rstrip("/")
    report = storage.run_folder(run_url).report()
    if report is None:
        raise PermanentError(f"--run {url}: no {paths.REPORT_JSON} there (write it with "
                             f"`synthfactory report --run {run_url}`)")
    committed = [s for s in report.get("shards") or [] if s.get("committed")]
    output = sum(s.get("output_tokens") or 0 for s in committed)
    device_s = sum(s.get("device_seconds") or 0 for s in committed)
    if not output or not device_s:
        raise PermanentError(f"--run {url}: no committed shard generated anything, so "
                             "the run measured no tokens/s")
    tokens = report.get("tokens") or {}
    starts, startup = tokens.get("engine_starts"), tokens.get("startup_s")
    devices = ", ".join(tokens.get("devices") or []) or "unknown device"
    produced = report.get("token_yield") or {}
    usable = produced.get("usable_tokens")
    # every attempt's tokens over the usable ones (docs/adr/0141): retries and rejected
    # rows are GPU time the plan pays for too
    per_usable = (report.get("attempts") or {}).get("generated_per_usable")
    return Measured(
        tokens_per_s_per_gpu=round(output / device_s, 2),
        startup_s=None if starts is None else round(startup / starts, 3) if starts else 0.0,
        source=f"run {run_url} ({len(committed)} committed shards, {devices})",
        generating_fraction=tokens.get("generating_fraction"),
        token_yield=produced.get("yield") or None,
        usable_share=(round(1 / per_usable, 4) if per_usable else
                      round(usable / tokens["output"], 4)
                      if usable and tokens.get("output") else None))


def from_sweep(url: str) -> Measured:
    """The configuration rephrase will run after the sweep: the applied winner (its
    backed-off measurement where there is one), else the defaults (the baseline)."""
    from synthfactory.sweep.results import SweepFolder
    from synthfactory.sweep.winner import devices

    folder = SweepFolder(url)
    winner = storage.read_json_or_none(folder.winner_url) or {}
    provenance = winner.get("provenance")
    if provenance:
        figures = provenance.get("backed_off_measured") or provenance.get("measured") or {}
        config, device = winner.get("engine_args") or {}, provenance.get("device") or "cpu"
        what = "the winner"
    elif storage.exists(folder.table_url):  # no winner applied: rephrase keeps the defaults
        rows = storage.read_table(folder.table_url).to_pylist()
        figures = next((r for r in rows if r["role"] == "baseline" and r["status"] == "ok"),
                       {})
        config, device = {}, figures.get("device") or "cpu"
        what = "the defaults (no winner was applied)"
    else:
        raise PermanentError(f"--from-sweep {url}: neither winner.json nor results.parquet "
                             "there (not a sweep folder, or the sweep has not finished)")
    rate = figures.get("output_tokens_per_s")
    if not rate:
        raise PermanentError(f"--from-sweep {url}: {what} has no measured output tokens/s")
    count = devices(config, device)
    return Measured(
        tokens_per_s_per_gpu=round(rate / count, 2),
        startup_s=figures.get("startup_s"),
        source=f"sweep {folder.url}, {what} ({device}, {count} device(s) an engine)")
