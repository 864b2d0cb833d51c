"""``odradek torture``: a fault campaign against a cluster it starts itself (see
:mod:`odradek.torture`).

Exit status: 0 when the checker found no violation, 1 when it found one (each printed with the
history around it), 2 when the campaign could not run (not root, no ``ip`` or
``iptables-legacy``, no ZooKeeper, no confluent-kafka or NetfilterQueue). SIGTERM ends a campaign
as Ctrl-C does: everything it made is removed first.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from odradek.torture import schedule


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    torture = commands.add_parser(
        "torture",
        help="a fault campaign: a real cluster, clients, a nemesis from a seed, and a checker",
    )
    torture.add_argument(
        "--duration", type=float, default=300, metavar="S", help="seconds of faults (default 300)"
    )
    torture.add_argument(
        "--seed", type=int, help="the nemesis's seed (default: from the clock, printed)"
    )
    torture.add_argument("--brokers", type=int, default=3, help="brokers (default 3)")
    torture.add_argument(
        "--partitions", type=int, default=3, help="partitions per topic (default 3)"
    )
    torture.add_argument(
        "--rate", type=float, default=50, help="records/s per idempotent producer (default 50)"
    )
    torture.add_argument(
        "--history",
        type=Path,
        metavar="FILE",
        help="write the history here (JSON lines), and each broker's log to FILE.broker-N.log",
    )
    torture.add_argument(
        "-o",
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config for every broker, e.g. -o min.insync.replicas=1 (repeatable)",
    )
    torture.add_argument(
        "--faults",
        default=None,
        metavar="KINDS",
        help="the kinds of fault dealt, comma-separated: a list (kill,slow), all, or "
        "exclusions (all,-full-disk or -full-disk); kinds: "
        + ", ".join(schedule.KINDS)
        + " (default: "
        + ("all" if schedule.DEFAULT_KINDS == schedule.KINDS else ",".join(schedule.DEFAULT_KINDS))
        + ")",
    )
    torture.add_argument(
        "--log-dir-size",
        type=int,
        default=256,
        metavar="MIB",
        help="each broker's log dir is a tmpfs of this many MiB (default 256), "
        "which the full-disk fault fills",
    )
    torture.add_argument("--plan", action="store_true", help="print the seed's fault plan and exit")
    torture.set_defaults(run=_run)


def missing_requirements() -> list[str]:
    """What this machine lacks to run a campaign (empty when it can)."""
    import importlib.util

    from odradek.testing import ZOOKEEPER_SERVER_SH
    from odradek.torture.network import missing_tools

    missing = missing_tools()
    if shutil.which("strace") is None:
        missing.append("strace (the failing-disk fault injects EIO with it)")
    if not ZOOKEEPER_SERVER_SH.exists():
        missing.append(f"ZooKeeper ({ZOOKEEPER_SERVER_SH}: Debian's zookeeper package)")
    if importlib.util.find_spec("confluent_kafka") is None:
        missing.append("confluent-kafka (pip install 'odradek[test]')")
    return missing


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _run(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    try:
        kinds = schedule.DEFAULT_KINDS if args.faults is None else schedule.parse_kinds(args.faults)
    except ValueError as e:
        print(f"odradek torture: --faults: {e}", file=sys.stderr)
        return 2
    if args.plan:
        for fault in schedule.plan(seed, args.duration, args.brokers, kinds):
            print(fault.describe())
        return 0
    try:
        missing = missing_requirements()
    except ImportError as e:  # odradek.testing needs pytest: the test extra
        missing = [f"{e.name} (pip install 'odradek[test]')"]
    if missing:
        print("odradek torture: cannot run here: " + "; ".join(missing), file=sys.stderr)
        return 2
    from odradek.torture.runner import Options, run_campaign

    settings = dict(item.split("=", 1) for item in args.override if "=" in item)
    options = Options(
        duration_s=args.duration,
        seed=seed,
        brokers=args.brokers,
        partitions=args.partitions,
        history_path=args.history,
        rate_per_s=args.rate,
        settings=settings,
        kinds=kinds,
        log_dir_bytes=args.log_dir_size << 20,
    )
    print(
        f"odradek torture --seed {seed} --duration {args.duration:g} --brokers {args.brokers}"
        f" --faults {','.join(kinds)}"
    )
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        report = run_campaign(options, sys.stdout)
    except KeyboardInterrupt:
        print("odradek torture: interrupted; everything it made is removed", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(report.describe())
    if not report.ok and args.history is None:
        kept = report.write(Path(f"odradek-torture-seed{seed}-history.jsonl"))
        print("the whole history and the brokers' logs: " + ", ".join(str(p) for p in kept))
    return 0 if report.ok else 1
