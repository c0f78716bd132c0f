"""The sweep's table for the terminal and the PNG comparing configurations."""

from __future__ import annotations

import io

COLUMNS = (("config", 44), ("status", 13), ("start s", 8), ("out tok/s", 10),
           ("prompt tok/s", 12), ("peak MiB", 9), ("cpu", 5), ("$/B out", 9))


def _fmt(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(records: list[dict], winner_key: str | None = None) -> str:
    header = "  ".join(f"{name:<{width}}" for name, width in COLUMNS)
    lines = [header, "-" * len(header)]
    for r in records:
        label = ("* " if r["key"] == winner_key else "  ") + r["label"]
        if r.get("role") == "backoff":
            label += " (backed off)"
        status = r["status"] if r["status"] == "ok" else r.get("error_kind", "failed")
        cells = [label[:44], status[:13], _fmt(r.get("startup_s")),
                 _fmt(r.get("output_tokens_per_s")), _fmt(r.get("prompt_tokens_per_s")),
                 _fmt(r.get("peak_rss_mb"), 0), _fmt(r.get("cpu_share")),
                 _fmt(r.get("cost_per_billion_output_tokens"), 2)]
        lines.append("  ".join(f"{c:<{w}}" for c, (_, w) in zip(cells, COLUMNS, strict=True)))
        if r["status"] != "ok" and r.get("error"):
            lines.append("      " + " ".join(r["error"].split())[:200])
    if winner_key:
        lines.append("* = fastest configuration")
    return "\n".join(lines)


def png(records: list[dict], title: str, winner_key: str | None = None) -> bytes:
    """Output tokens/s per configuration (failed ones marked) beside peak memory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r["label"] + (" (backed off)" if r.get("role") == "backoff" else "")
              for r in records]
    speed = [r.get("output_tokens_per_s") or 0 for r in records]
    memory = [r.get("peak_rss_mb") or 0 for r in records]
    colors = ["#c0392b" if r["status"] != "ok" else
              "#27ae60" if r["key"] == winner_key else "#2e86c1" for r in records]
    height = max(2.5, 0.45 * len(records) + 1.2)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, height), sharey=True,
                                      gridspec_kw={"width_ratios": [3, 2]})
    y = range(len(records))
    left.barh(y, speed, color=colors)
    right.barh(y, memory, color=colors)
    for i, r in enumerate(records):
        if r["status"] != "ok":
            left.text(0, i, f" failed: {r.get('error_kind', 'error')}", va="center",
                      color="#c0392b", fontsize=8)
    left.set_yticks(list(y), [t if len(t) <= 60 else t[:57] + "..." for t in labels],
                    fontsize=8)
    left.invert_yaxis()
    left.set_xlabel("output tokens/s (higher is better)")
    right.set_xlabel("peak resident memory, MiB")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()
