"""``odradek bench``: run the chosen scenarios against a broker and report.

Without ``--bootstrap-server`` the harness starts a broker of its own (a child process over a
temporary data directory) for the scenarios that share one, and fresh ones for those that need
their own (partition scaling, recovery). The cluster scenarios (:mod:`odradek.bench.cluster`)
start a cluster each, over one ZooKeeper the run shares; the single broker is not started when
only they run. ``--peer`` hands the run to :mod:`odradek.bench.peer`. A failing scenario is
reported and the run goes on; the exit status is 1 if any failed.
"""

from __future__ import annotations

import datetime
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from odradek.bench.broker import ChildBroker
from odradek.bench.cluster import CLUSTER_SCENARIO_FUNCTIONS
from odradek.bench.options import SCENARIOS, BenchOptions
from odradek.bench.report import FORMAT, environment, format_report, write_json
from odradek.bench.scenarios import (
    SCENARIO_FUNCTIONS,
    BenchContext,
    ScenarioResult,
    settle_page_cache,
)
from odradek.cli.progress import Progress


def run_scenario(name: str, ctx: BenchContext) -> ScenarioResult:
    settle_page_cache()
    started = time.monotonic()
    try:
        result = {**SCENARIO_FUNCTIONS, **CLUSTER_SCENARIO_FUNCTIONS}[name](ctx)
    except Exception:
        result = ScenarioResult(name, name, status="failed", error=traceback.format_exc())
    result.seconds = time.monotonic() - started
    return result


def run(options: BenchOptions, quiet: bool = False) -> int:
    """Run the scenarios, showing which one runs on stderr (nothing if ``quiet``)."""
    if options.peer is not None:
        from odradek.bench.peer import run_peer

        return run_peer(options)
    started_at = datetime.datetime.now(datetime.UTC)
    started = time.monotonic()
    env = environment()
    if options.work_dir is not None:
        options.work_dir.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=options.work_dir))
    broker: ChildBroker | None = None
    results: list[ScenarioResult] = []
    try:
        if options.bootstrap:
            bootstrap = options.bootstrap
        elif any(name in SCENARIOS for name in options.scenarios):
            broker = ChildBroker(work_dir / "broker", options.broker_overrides)
            broker.start()
            bootstrap = broker.bootstrap
        else:
            bootstrap = "a cluster per scenario (ZooKeeper + 3 brokers)"
        ctx = BenchContext(options, bootstrap, broker, work_dir)
        try:
            with Progress("bench", len(options.scenarios), quiet=quiet, tick_s=1.0) as progress:
                for name in options.scenarios:
                    progress.step(f"running {name}")
                    results.append(run_scenario(name, ctx))
                    progress.advance()
        finally:
            ctx.close()
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work_dir, ignore_errors=True)

    report: dict[str, Any] = {
        "format": FORMAT,
        "started_at": started_at.isoformat(timespec="seconds"),
        "seconds": time.monotonic() - started,
        "environment": env,
        "load_average_at_end": environment().get("load_average"),
        "options": options.to_json(),
        "broker": {"bootstrap": bootstrap, "started_by_harness": not options.bootstrap},
        "scenarios": {r.name: r.to_json() for r in results},
    }
    print()
    print(format_report(report, results))
    write_json(report, options.json_path)
    print(f"\nresults: {options.json_path}")
    if options.charts:
        try:
            from odradek.bench.charts import write_charts

            for path in write_charts(report, options.json_path):
                print(f"chart:   {path}")
        except ImportError:
            print("charts:  skipped (matplotlib missing: pip install 'odradek[bench]')")
    return 1 if any(r.status == "failed" for r in results) else 0
