"""The report's PNG figures (matplotlib, headless), written next to report.json.

Each figure is drawn from numbers that report.json also holds, so a reader of the JSON
can check a figure's bars against it. A figure with nothing to draw is not written and
report.json's ``figures`` leaves it out.
"""

from __future__ import annotations

import io

from synthfactory import storage
from synthfactory.report.collect import RANK, Lengths

BLUE, RED, GREY = "#4c72b0", "#c44e52", "#8c8c8c"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, url: str) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    storage.write_bytes(url, buf.getvalue())


def rows_bars(report: dict) -> list[tuple[str, int, str]]:
    """(label, rows, colour) of the rows figure: the funnel from documents to rows out."""
    stitch, rephrase = report["stitch"], report["rephrase"]
    bars = []
    if report["documents_in"] is not None:
        bars.append(("documents in", report["documents_in"], GREY))
    for reason, rows in stitch["quarantined_by_reason"].items():
        bars.append((f"stitch quarantine:\n{reason}", rows, RED))
    if report["prompts"]["rows"] is not None:
        bars.append(("prompt rows", report["prompts"]["rows"], GREY))
    bars.append(("rows generated", rephrase["rows_generated"], BLUE))
    for reason, rows in rephrase["quarantined_by_reason"].items():
        bars.append((f"rephrase quarantine:\n{reason}", rows, RED))
    return bars


def write_figures(report: dict, lengths: Lengths, folder: str) -> dict[str, str]:
    """Draw every figure that has data; returns {figure name: file name under folder}."""
    plt = _pyplot()
    written: dict[str, str] = {}

    bars = rows_bars(report)
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(bars) + 1.2), dpi=100)
    labels = [b[0] for b in bars][::-1]
    values = [b[1] for b in bars][::-1]
    ax.barh(labels, values, color=[b[2] for b in bars][::-1])
    for y, value in enumerate(values):
        ax.text(value, y, f" {value}", va="center")
    ax.set_xlabel("rows")
    ax.set_title("rows: documents in, prompts, generated and quarantined")
    _save(plt, fig, storage.join(folder, "rows_generated.png"))
    written["rows_generated"] = "rows_generated.png"

    shards = [s for s in report["shards"] if s["tokens_per_s"] is not None]
    if shards:
        fig, ax = plt.subplots(figsize=(8, 3.5), dpi=100)
        ax.bar([s["name"] for s in shards], [s["tokens_per_s"] for s in shards], color=BLUE)
        ax.set_ylabel("output tokens / s")
        ax.set_title("generation throughput per shard")
        ax.tick_params(axis="x", rotation=45)
        _save(plt, fig, storage.join(folder, "tokens_per_s.png"))
        written["tokens_per_s"] = "tokens_per_s.png"

    quality = report.get("quality")
    if quality and quality["rows"]:
        reasons = sorted(quality["reasons"].items(),  # the gate's order, top down
                         key=lambda item: RANK.get(item[0], len(RANK)), reverse=True)
        fig, ax = plt.subplots(figsize=(8, 0.4 * len(reasons) + 1.2), dpi=100)
        ax.barh([r for r, _ in reasons], [n for _, n in reasons], color=RED)
        for y, (_, rows) in enumerate(reasons):
            ax.text(rows, y, f" {rows}", va="center")
        ax.xaxis.get_major_locator().set_params(integer=True)  # rows: no 0.25 ticks
        ax.set_xlabel("rows (a row may have several reasons)")
        ax.set_title(f"quality gate: {quality['rejected']} of {quality['rows']} rows "
                     "rejected, by reason")
        _save(plt, fig, storage.join(folder, "rejection_reasons.png"))
        written["rejection_reasons"] = "rejection_reasons.png"

    for name, values, what in (("prompt_lengths", lengths.prompt, "prompt"),
                               ("output_lengths", lengths.output, "output")):
        if not values:
            continue
        fig, ax = plt.subplots(figsize=(8, 3.5), dpi=100)
        ax.hist(values, bins=min(40, max(5, len(set(values)))), color=BLUE)
        ax.set_xlabel(f"{what} length (tokens)")
        ax.set_ylabel("rows")
        ax.set_title(f"{what} lengths ({len(values)} rows)")
        _save(plt, fig, storage.join(folder, f"{name}.png"))
        written[name] = f"{name}.png"
    return written
