"""The sweep's table for the terminal and the PNG: one row per configuration over the
rounds it ran (median, min..max), the applied one starred."""

from __future__ import annotations

import io
import statistics

from synthfactory.sweep.grid import config_key
from synthfactory.sweep.winner import cost_per_billion, devices

COLUMNS = (("config", 44), ("status", 10), ("rounds", 6), ("out tok/s", 10),
           ("spread", 13), ("start s", 8), ("peak MiB", 9), ("cpu", 5), ("$/B out", 9))


def _median(records: list[dict], name: str) -> float | None:
    values = [r[name] for r in records if r.get(name) is not None]
    return round(statistics.median(values), 2) if values else None


def per_config(halving: dict, decision: dict | None, hour_cost: float | None) -> list[dict]:
    """Trials grouped by configuration, in the order first measured."""
    groups: dict[str, list[dict]] = {}
    for record in halving["records"]:
        groups.setdefault(record["key"], []).append(record)
    applied = config_key(decision["applied_config"]) if decision else None
    return [{**_row(trials, hour_cost), "status": _status(key, trials, halving),
             "applied": key == applied} for key, trials in groups.items()]


def _status(key: str, trials: list[dict], halving: dict) -> str:
    """The baseline, ``out rN`` (dropped after round N), ``failed rN``, or the finalist."""
    bad = [t for t in trials if t["status"] != "ok"]
    if bad:
        return f"failed r{bad[-1]['round']}"
    if trials[0]["role"] == "baseline":
        return "baseline"
    if key in halving["dropped"]:
        return f"out r{halving['dropped'][key]}"
    return "finalist" if halving["finalist"] and key == halving["finalist"]["key"] else "ok"


def _row(trials: list[dict], hour_cost: float | None) -> dict:
    ok = [t for t in trials if t["status"] == "ok"]
    bad = [t for t in trials if t["status"] != "ok"]
    first = trials[0]
    tps = [t["output_tokens_per_s"] for t in ok]
    median = _median(ok, "output_tokens_per_s")
    device = ok[0].get("device", "cpu") if ok else "cpu"
    backed = first["config"] != first.get("grid_config", first["config"])
    return {
        "key": first["key"], "label": first["label"] + (" (backed off)" if backed else ""),
        "role": first["role"], "config": first["config"], "rounds": len(ok),
        "error_kind": bad[-1].get("error_kind") if bad else None,
        "error": bad[-1].get("error") if bad else None,
        "output_tokens_per_s": median, "min": min(tps, default=None),
        "max": max(tps, default=None),
        "prompt_tokens_per_s": _median(ok, "prompt_tokens_per_s"),
        "startup_s": _median(ok, "startup_s"), "cpu_share": _median(ok, "cpu_share"),
        "peak_rss_mb": max((t["peak_rss_mb"] for t in trials if t.get("peak_rss_mb")),
                           default=None),
        "device": ok[0].get("device") if ok else None,
        "requests": ok[0].get("requests") if ok else None,
        "cost_per_billion_output_tokens": cost_per_billion(
            median, hour_cost, devices(first["config"], device)),
    }


def _fmt(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(rows: list[dict]) -> str:
    header = "  ".join(f"{name:<{width}}" for name, width in COLUMNS)
    lines = [header, "-" * len(header)]
    for r in rows:
        label = ("* " if r["applied"] else "  ") + r["label"]
        spread = "-" if r["min"] is None else f"{r['min']:.1f}..{r['max']:.1f}"
        cells = [label[:44], r["status"][:10], str(r["rounds"]),
                 _fmt(r["output_tokens_per_s"]), spread, _fmt(r["startup_s"]),
                 _fmt(r["peak_rss_mb"], 0), _fmt(r["cpu_share"]),
                 _fmt(r["cost_per_billion_output_tokens"], 2)]
        lines.append("  ".join(f"{c:<{w}}" for c, (_, w) in zip(cells, COLUMNS, strict=True)))
        if r["error"]:
            lines.append("      " + " ".join(r["error"].split())[:200])
    lines.append("out tok/s = median over the rounds; * = applied (see the decision line)")
    return "\n".join(lines)


def png(rows: list[dict], title: str) -> bytes:
    """Median output tokens/s per configuration, min..max as error bars, beside the
    peak memory; the applied one green, failures red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r["label"] for r in rows]
    speed = [r["output_tokens_per_s"] or 0 for r in rows]
    error = [[r["output_tokens_per_s"] - r["min"] if r["min"] is not None else 0 for r in rows],
             [r["max"] - r["output_tokens_per_s"] if r["max"] is not None else 0 for r in rows]]
    memory = [r["peak_rss_mb"] or 0 for r in rows]
    colors = ["#c0392b" if r["status"].startswith("failed") else
              "#27ae60" if r["applied"] else "#2e86c1" for r in rows]
    height = max(2.5, 0.45 * len(rows) + 1.2)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, height), sharey=True,
                                      gridspec_kw={"width_ratios": [3, 2]})
    y = range(len(rows))
    left.barh(y, speed, xerr=error, color=colors, ecolor="#555555", capsize=3)
    right.barh(y, memory, color=colors)
    for i, r in enumerate(rows):
        if r["status"].startswith("failed"):
            left.text(0, i, f" {r['status']}: {r.get('error_kind') or 'error'}", va="center",
                      color="#c0392b", fontsize=8)
    left.set_yticks(list(y), [t if len(t) <= 60 else t[:57] + "..." for t in labels],
                    fontsize=8)
    left.invert_yaxis()
    left.set_xlabel("output tokens/s, median and min..max over the rounds (higher is better)")
    right.set_xlabel("peak resident memory, MiB")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()
