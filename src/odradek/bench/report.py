"""The results of a run: a text table for people, JSON for tools and charts.

JSON layout (``format`` 1)::

    {"format": 1, "started_at": ISO-8601, "seconds": …, "environment": {…}, "options": {…},
     "broker": {"bootstrap": …, "started_by_harness": bool},
     "scenarios": {"produce": {"name", "title", "status", "seconds", "rows": [{…}],
                               "targets": [{"description", "measured", "threshold", "unit",
                                            "higher_is_better", "met", "note"}],
                               "notes": [...], "error": null}, …}}

Rows hold each scenario's figures under stable keys (``records_per_s``, ``mb_per_s``,
``p99_ms``, …; latencies in milliseconds, MB = 10^6 bytes); a row with a latency also has its
percentile ``curve`` as ``[[percentile, ms], …]``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from odradek.bench.scenarios import ScenarioResult, TargetCheck

FORMAT = 1


def environment() -> dict[str, Any]:
    """What the figures depend on besides the code: the machine and how busy it was."""
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    try:
        import confluent_kafka

        info["confluent_kafka"] = confluent_kafka.version()[0]
        info["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    try:
        from importlib.metadata import version

        info["odradek"] = version("odradek")
    except Exception:
        info["odradek"] = None
    return info


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        try:
            return fmt.format(value)
        except (ValueError, TypeError):
            return str(value)
    return str(value)


def error_head(error: str, most: int = 4) -> list[str]:
    """The first lines of a scenario's exception (its type and message) out of the traceback
    the runner kept: its last line may be the tail of a broker's output the message quoted."""
    lines = error.strip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    start = frames[-1] + 1 if frames else 0
    while start < len(lines) and lines[start].startswith(" "):
        start += 1  # the failing frame's source line (and its ^^^ marks)
    return lines[start : start + most] or lines[-1:]


def format_scenario(result: ScenarioResult) -> str:
    lines = [f"== {result.name}: {result.title} [{result.status}, {result.seconds:.1f} s]"]
    if result.error:
        lines += [f"   error: {line}" for line in error_head(result.error)]
    if result.rows and result.columns:
        headers = [c.header for c in result.columns]
        body = [[_cell(row.get(c.key), c.format) for c in result.columns] for row in result.rows]
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
        lines.append("   " + "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
        for cells in body:
            lines.append("   " + "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)))
    for note in result.notes:
        lines.append(f"   note: {note}")
    return "\n".join(lines)


def _target_line(scenario: str, target: TargetCheck) -> list[str]:
    sign = "≥" if target.higher_is_better else "≤"
    if target.measured is None:
        measured = "-"
    elif abs(target.measured) >= 100:
        measured = f"{target.measured:,.0f}"
    else:
        measured = f"{target.measured:.2f}"
    met = {True: "met", False: "NOT met", None: "n/a"}[target.met]
    threshold = target.threshold
    shown = f"{threshold:,.0f}" if threshold == int(threshold) else f"{threshold:g}"
    wanted = f"{sign} {shown} {target.unit}"
    got = measured if target.measured is None else f"{measured} {target.unit}"
    return [scenario, target.description, wanted, got, met, target.note or ""]


def format_targets(results: Sequence[ScenarioResult]) -> str:
    rows = [_target_line(r.name, t) for r in results for t in r.targets]
    if not rows:
        return ""
    headers = ["scenario", "target", "wanted", "measured", "", "note"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    out = ["== targets (reported, not asserted)"]
    out.append("   " + "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in rows:
        out.append("   " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(out)


def format_report(report: dict[str, Any], results: Sequence[ScenarioResult]) -> str:
    env = report["environment"]
    load = env.get("load_average")
    header = (
        f"odradek bench — broker {report['broker']['bootstrap']}"
        f"{' (started by the harness)' if report['broker']['started_by_harness'] else ''}, "
        f"{env.get('cpus')} CPUs, load average {load[0]:.2f} at start"
        if load
        else f"odradek bench — broker {report['broker']['bootstrap']}"
    )
    if load and env.get("cpus") and load[0] > 0.5 * env["cpus"]:
        header += "\n   warning: the machine was busy; figures are low and noisy"
    parts = [header, *(format_scenario(r) for r in results)]
    targets = format_targets(results)
    if targets:
        parts.append(targets)
    return "\n\n".join(parts)


def write_json(report: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    temporary.replace(path)
