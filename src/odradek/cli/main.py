"""``odradek`` on the command line."""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import logging
import signal
import sys
from pathlib import Path

from odradek.bench.options import add_arguments as add_bench_arguments
from odradek.cli.progress import quiet_option
from odradek.cli.stop_signals import StopSignals
from odradek.config import BrokerConfig, ConfigError

log = logging.getLogger("odradek.serve")

_STOP_WATCHDOG_S = 45
DEFAULT_SCHEMA_REGISTRY = ("127.0.0.1", 8081)


# Settings odradek takes under a name it does not list itself: per-listener overrides (Kafka's
# ``listener.name.<listener>.<setting>``) and the options of client-side libraries.
_PASSED_THROUGH_PREFIXES = ("listener.name.", "iceberg.catalog.")


def unknown_setting_warnings(props: dict[str, str]) -> list[str]:
    """A warning per setting that is not one of the broker's (a typo, or a Kafka setting
    odradek does not have), naming the closest known setting, as Kafka logs unused configs."""
    import difflib

    from odradek.config import BROKER_CONFIGS

    warnings = []
    for name in sorted(props):
        if name in BROKER_CONFIGS or name.startswith(_PASSED_THROUGH_PREFIXES):
            continue
        close = difflib.get_close_matches(name, list(BROKER_CONFIGS), n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        warnings.append(f"unknown setting {name!r} is ignored{hint}")
    return warnings


def _task_names(tasks: list[asyncio.Task[object]]) -> str:
    names = (f"{t.get_name()} ({getattr(t.get_coro(), '__qualname__', '?')})" for t in tasks)
    return ", ".join(sorted(names)[:20])


def _serve(args: argparse.Namespace) -> int:
    # Before the first line is logged: a SIGTERM from then on is a clean stop, during start-up
    # too (it takes effect once the broker has started).
    stop_signals = StopSignals().install()
    # kill -USR1 writes every thread's stack to stderr (Kafka's operators have jstack): the
    # evidence of a broker that hangs, which the test harness asks for before it kills one.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    overrides = list(args.override or [])
    if args.data_dir:
        overrides.append(f"log.dirs={args.data_dir}")
    if args.listen:
        overrides.append(f"listeners=PLAINTEXT://{args.listen}")
    try:
        config = BrokerConfig.load(Path(args.config) if args.config else None, overrides)
    except (ConfigError, OSError) as e:
        print(f"odradek: bad configuration: {e}", file=sys.stderr)
        return 2
    for warning in unknown_setting_warnings(config.props):
        log.warning("%s", warning)
    from odradek.cluster.metadata.zookeeper.membership import DuplicateBrokerIdError
    from odradek.cluster.metadata.zookeeper.store import ZooKeeperUnreachableError
    from odradek.server.broker import Broker
    from odradek.storage.log_dir_failure import KafkaStorageError

    # A lone broker serves the schema registry unless told otherwise, as Redpanda's
    # development mode does (schema.registry.listener set, even empty, decides instead).
    registry = None if config.raw("zookeeper.connect") else DEFAULT_SCHEMA_REGISTRY

    async def run() -> None:
        broker = Broker(config, schema_registry_default=registry)
        await broker.start()
        received = await stop_signals.wait_async()
        log.info("stopping on %s", received.name)
        # A stop that hangs (a bug) must neither keep the process, nor its ZooKeeper session and
        # leaderships, forever: past the watchdog every thread's stack is written to stderr (the
        # evidence) and the process exits; the next start recovers the logs as after a crash.
        # It stays armed until asyncio.run has cancelled the tasks left behind and joined the
        # executor's threads, either of which could hang too.
        faulthandler.dump_traceback_later(_STOP_WATCHDOG_S, exit=True)
        await broker.stop()
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if left:
            log.info("stopping: cancelling %d tasks left: %s", len(left), _task_names(left))

    try:
        try:
            asyncio.run(run())
        finally:
            faulthandler.cancel_dump_traceback_later()
    except DuplicateBrokerIdError as e:
        log.error(
            "odradek broker %d cannot start: %s (if that broker was just killed, start this one "
            "again once ZooKeeper has ended its session: zookeeper.session.timeout.ms=%d)",
            config.node_id,
            e,
            config.get_int("zookeeper.session.timeout.ms"),
        )
        return 1
    except ZooKeeperUnreachableError as e:
        log.error(
            "odradek broker %d cannot start: %s: start ZooKeeper, or set zookeeper.connect to "
            "the HOST:PORT[/chroot] of a running one",
            config.node_id,
            e,
        )
        return 1
    except OSError as e:
        print(f"odradek: cannot start: {e}", file=sys.stderr)
        return 1
    except KafkaStorageError as e:  # every log dir failed as it opened (KIP-112)
        print(f"odradek: cannot start: {e.message}", file=sys.stderr)
        return 1
    return 0


def _bench(args: argparse.Namespace) -> int:
    from odradek.bench.options import options_from_args
    from odradek.bench.runner import run

    return run(options_from_args(args), quiet=args.quiet)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek", description="A Kafka-compatible broker")
    parser.add_argument("--log-level", default="INFO")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run a broker")
    serve.add_argument("--config", help="a Kafka-style server.properties file")
    serve.add_argument(
        "-o",
        "--override",
        action="append",
        metavar="KEY=VALUE",
        help="a broker config, e.g. -o num.partitions=3 (repeatable)",
    )
    serve.add_argument("--data-dir", help="data directory (log.dirs); default ./odradek-data")
    serve.add_argument("--listen", metavar="HOST:PORT", help="default 127.0.0.1:9092")
    serve.set_defaults(run=_serve)
    bench = commands.add_parser("bench", help="benchmark a broker (a fresh one by default)")
    add_bench_arguments(bench)
    quiet_option(bench)
    bench.set_defaults(run=_bench)
    from odradek.cli import (
        acls,
        cluster,
        completion,
        configs,
        console,
        groups,
        partitions,
        records,
        schemas,
        tables,
        topics,
        torture,
        transactions,
        users,
    )

    acls.add_parser(commands)
    cluster.add_parser(commands)
    groups.add_parser(commands)
    topics.add_parser(commands)
    transactions.add_parser(commands)
    configs.add_parser(commands)
    console.add_parser(commands)
    records.add_parser(commands)
    users.add_parser(commands)
    partitions.add_parser(commands)
    schemas.add_parser(commands)
    tables.add_parser(commands)
    completion.add_parser(commands)
    torture.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    result: int = args.run(args)
    return result
