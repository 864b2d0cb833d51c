"""PNG charts of a results JSON: latency percentiles, partition scaling, recovery time.

Written next to the JSON as ``<stem>-latency.png``, ``<stem>-partitions.png`` and
``<stem>-recovery.png``, each only when the scenarios it draws ran. Needs matplotlib (the
``bench`` extra); without it there are simply no charts.
"""

from __future__ import annotations

import logging
import math
import textwrap
from pathlib import Path
from typing import Any

_NINES = (50.0, 90.0, 99.0, 99.9, 99.99)


def _nines(percentile: float) -> float:
    """Position on a "number of nines" axis: 90 → 1, 99 → 2, 99.9 → 3."""
    return -math.log10(1 - percentile / 100)


def _rows(report: dict[str, Any], scenario: str) -> list[dict[str, Any]]:
    entry = report.get("scenarios", {}).get(scenario)
    if not entry or entry.get("status") != "ok":
        return []
    rows: list[dict[str, Any]] = entry.get("rows", [])
    return rows


def write_charts(report: dict[str, Any], json_path: Path) -> list[Path]:
    """Draw what the report has; the paths written. Raises ImportError without matplotlib."""
    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    matplotlib.use("Agg")
    written: list[Path] = []
    stem = json_path.with_suffix("")
    for name, draw in (
        ("latency", _latency),
        ("partitions", _partitions),
        ("recovery", _recovery),
    ):
        path = Path(f"{stem}-{name}.png")
        if draw(report, path):
            written.append(path)
    return written


def _latency(report: dict[str, Any], path: Path) -> bool:
    import matplotlib.pyplot as plt

    series: list[tuple[str, list[list[float]]]] = []
    for row in _rows(report, "produce"):
        if row.get("curve"):
            series.append((f"produce {row['record_size']} B: produce→ack", row["curve"]))
    for row in _rows(report, "latency"):
        if row.get("curve"):
            series.append((f"end to end at {row['rate']:,}/s", row["curve"]))
        if row.get("ack_curve"):
            series.append((f"produce→ack at {row['rate']:,}/s", row["ack_curve"]))
    for row in _rows(report, "raw"):
        if row.get("curve"):
            series.append((f"raw {row['record_size']} B: request→response", row["curve"]))
    if not series:
        return False
    figure, axes = plt.subplots(figsize=(9, 5.5))
    for label, curve in series:
        points = [(p, v) for p, v in curve if 0 < p < 100 and v > 0]
        axes.plot([_nines(p) for p, _ in points], [v for _, v in points], marker="o", label=label)
    axes.set_xticks([_nines(p) for p in _NINES], [f"p{p:g}" for p in _NINES])
    axes.set_yscale("log")
    axes.set_ylabel("latency (ms)")
    axes.set_xlabel("percentile")
    axes.set_title("odradek latency by percentile")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def _partitions(report: dict[str, Any], path: Path) -> bool:
    import matplotlib.pyplot as plt

    rows = [r for r in _rows(report, "partitions") if r.get("records_per_s")]
    if not rows:
        return False
    counts = [r["partitions"] for r in rows]
    figure, rate_axes = plt.subplots(figsize=(8, 5))
    rate_axes.plot(counts, [r["records_per_s"] for r in rows], "o-", color="tab:blue")
    rate_axes.set_xscale("log")
    rate_axes.set_xticks(counts, [f"{c:,}" for c in counts])
    rate_axes.set_xlabel("partitions")
    rate_axes.set_ylabel("produce records/s", color="tab:blue")
    rate_axes.set_ylim(bottom=0)
    rss = [(r["partitions"], r["rss_mb"]) for r in rows if r.get("rss_mb") is not None]
    if rss:
        rss_axes = rate_axes.twinx()
        rss_axes.plot([c for c, _ in rss], [m for _, m in rss], "s--", color="tab:red")
        rss_axes.set_ylabel("broker RSS (MB)", color="tab:red")
        rss_axes.set_ylim(bottom=0)
    rate_axes.set_title("odradek partition scaling")
    rate_axes.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def _recovery(report: dict[str, Any], path: Path) -> bool:
    import matplotlib.pyplot as plt

    rows = [r for r in _rows(report, "recovery") if r.get("crash_ready_s") is not None]
    if not rows:
        return False
    figure, axes = plt.subplots(figsize=(8, 5))
    for key, label in (
        ("crash_ready_s", "kill -9, whole log unflushed"),
        ("tail_ready_s", "kill -9, log flushed + small tail"),
        ("clean_listen_s", "clean shutdown"),
    ):
        points = [(r["log_mb"], r[key]) for r in rows if r.get(key) is not None]
        axes.plot([x for x, _ in points], [y for _, y in points], "o-", label=label)
    axes.set_xlabel("log size (MB)")
    axes.set_ylabel("restart to serving (s)")
    axes.set_ylim(bottom=0)
    axes.set_title("odradek restart time")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def write_peer_chart(report: dict[str, Any], json_path: Path) -> Path:
    """``odradek bench --peer``'s chart: each figure's ratio odradek / peer on a log scale, green
    where odradek is ahead (for a figure where lower is better, a ratio under 1), red where it
    is behind. Written as ``<stem>.png``; raises ImportError without matplotlib."""
    import matplotlib
    import matplotlib.ticker

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peer = report["peer"]["name"]
    rows = [r for r in report["figures"] if r.get("ratio")]
    path = json_path.with_suffix(".png")
    figure, axes = plt.subplots(figsize=(11, 0.4 * len(rows) + 1.8))
    labels = [
        f"{r['label']} ({r['unit']}, {'higher' if r['higher_is_better'] else 'lower'} is better)"
        for r in rows
    ]
    colours = ["tab:green" if r["ahead"] else "tab:red" for r in rows]
    positions = list(range(len(rows)))[::-1]
    axes.barh(positions, [r["ratio"] for r in rows], color=colours, left=0)
    axes.set_xscale("log")
    axes.axvline(1.0, color="black", linewidth=1)
    axes.set_yticks(positions, labels, fontsize="small")
    for position, row in zip(positions, rows, strict=True):
        axes.annotate(
            f"{row['ratio']:.2f}",
            (row["ratio"], position),
            xytext=(3, -3),
            textcoords="offset points",
            fontsize="x-small",
        )
    # ticks at 1, 2 and 5 of each decade, as plain numbers; none between them
    axes.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    axes.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes.set_xlabel(f"odradek / {peer} (log scale; green: odradek ahead, red: behind)")
    description = textwrap.fill(report["peer"]["description"], 70)
    axes.set_title(f"odradek / {peer}\n{description}", fontsize="small")
    axes.grid(True, axis="x", which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
