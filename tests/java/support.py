"""Running Java programs against odradek: the test programs of ``src/`` and Kafka's tools by
their main classes, on the classpath :mod:`tests.java.jars` makes.

Without a JDK or Maven the Java tests are skipped, except under CI (``CI`` set), where
``scripts/setup.sh --test`` must have installed both and a skip would hide that it did not.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.record_batch import iter_headers
from odradek.testing import RunningBroker
from tests.e2e.recording_proxy import RecordingProxy, client_id_of

from . import jars

TIMEOUT_S = 60

# A JVM that starts fast: these programs run for seconds, so the C2 compiler and a parallel
# collector cost more than they give. The clients log to stderr at ODRADEK_JAVA_LOG_LEVEL
# (default warn; debug shows every request and response).
JVM_FLAGS = (
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xmx256m",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=" + os.environ.get("ODRADEK_JAVA_LOG_LEVEL", "warn"),
    "-Dorg.slf4j.simpleLogger.logFile=System.err",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
)

TOPICS_TOOL = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIGS_TOOL = "org.apache.kafka.tools.ConfigCommand"  # kafka.admin.ConfigCommand before 4.4
TRANSACTIONS_TOOL = "org.apache.kafka.tools.TransactionsCommand"
PRODUCER_PERF_TEST = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF_TEST = "org.apache.kafka.tools.ConsumerPerformance"
FEATURES_TOOL = "org.apache.kafka.tools.FeatureCommand"
ACLS_TOOL = "org.apache.kafka.tools.AclCommand"  # kafka.admin.AclCommand before Kafka 4
DELEGATION_TOKENS_TOOL = "org.apache.kafka.tools.DelegationTokenCommand"  # kafka-delegation-tokens


@cache
def classpath() -> str:
    """The compiled test programs and Kafka's jars; skips (fails under CI) without Java."""
    try:
        if shutil.which("java") is None:
            raise RuntimeError("java is not installed")
        return f"{jars.classes_dir()}{os.pathsep}{jars.jar_dir() / '*'}"
    except (RuntimeError, subprocess.CalledProcessError) as error:
        if os.environ.get("CI"):
            pytest.fail(f"the Java tests cannot run: {error}")
        pytest.skip(f"the Java tests need a JDK and Maven: {error}")


@cache
def old_client_classpath() -> str:
    """The test programs on kafka-clients 3.9.2 (the Java client Spark's Kafka connector pins,
    fetched with it) instead of the current one: how a client older than Kafka 4 behaves."""
    classpath()
    try:
        connector = jars.fetch_jars(jars.SPARK_KAFKA_POM)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        if os.environ.get("CI"):
            pytest.fail(f"kafka-clients 3.9.2 is not available: {error}")
        pytest.skip(f"kafka-clients 3.9.2 is not available: {error}")
    (old,) = connector.glob("kafka-clients-*.jar")
    current = [
        str(jar) for jar in sorted(jars.jar_dir().glob("*.jar")) if not jar.name.startswith("kafka")
    ]
    return os.pathsep.join([str(jars.classes_dir()), str(old), *current])


@cache
def connect_classpath() -> str:
    """A Kafka Connect worker and the file connectors (``connect-pom.xml``); skips (fails under
    CI) when they cannot be had."""
    classpath()
    try:
        return str(jars.fetch_jars(jars.CONNECT_POM) / "*")
    except (RuntimeError, subprocess.CalledProcessError) as error:
        if os.environ.get("CI"):
            pytest.fail(f"Kafka Connect is not available: {error}")
        pytest.skip(f"Kafka Connect is not available: {error}")


@cache
def legacy_client_classpath(version: str) -> str:
    """The programs of ``legacy-src/`` on kafka-clients ``version`` (a key of
    :data:`jars.LEGACY_CLIENT_POMS`); skips (fails under CI) when it cannot be had."""
    classpath()
    try:
        return jars.legacy_client_classpath(version)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        if os.environ.get("CI"):
            pytest.fail(f"kafka-clients {version} is not available: {error}")
        pytest.skip(f"kafka-clients {version} is not available: {error}")


def java_command(main_class: str, *args: str, cp: str | None = None) -> list[str]:
    return ["java", *JVM_FLAGS, "-cp", cp or classpath(), main_class, *args]


def run_java(
    main_class: str,
    *args: str,
    stdin: str | None = None,
    timeout: float = TIMEOUT_S,
    cp: str | None = None,
) -> str:
    """Run ``main_class`` to completion and return its stdout; it must exit 0. ``cp``: another
    classpath than :func:`classpath`'s."""
    done = subprocess.run(
        java_command(main_class, *args, cp=cp),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    sys.stderr.write(done.stderr)  # the JVM's log, shown by pytest when the test fails
    assert done.returncode == 0, (
        f"{main_class} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


def start_java(main_class: str, *args: str, log: Path) -> subprocess.Popen[str]:
    """Start ``main_class`` with its stdout readable line by line as it runs and its log (stderr)
    written to ``log`` (a pipe left unread could fill and stop it); its stdin is a pipe, which a
    program may take the closing of as its signal to stop."""
    with log.open("w") as stderr:
        return subprocess.Popen(
            java_command(main_class, *args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
        )


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1) -> None:
    """Create a topic with another client than the one under test (confluent-kafka's)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, replication)], operation_timeout=30, request_timeout=30
    )
    for future in futures.values():
        future.result(30)


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: str
    value: str
    headers: str


@dataclass
class Produced:
    """What JavaProducer printed: acknowledged (partition, offset) by value, and failures."""

    acked: dict[str, tuple[int, int]]
    failed: list[str]
    done: bool


def parse_produced(lines: list[str]) -> Produced:
    acked: dict[str, tuple[int, int]] = {}
    failed: list[str] = []
    done = False
    for line in lines:
        word, *rest = line.split()
        if word == "acked":
            partition, offset, value = rest
            assert value not in acked, f"{value} acknowledged twice"
            acked[value] = (int(partition), int(offset))
        elif word == "failed":
            failed.append(line)
        elif word == "done":
            done = True
    return Produced(acked, failed, done)


def produce(
    bootstrap: str, topic: str, count: int, prefix: str, keys: int = 5, *configs: str
) -> Produced:
    """JavaProducer with its defaults (and ``configs``, ``name=value``), to completion."""
    out = run_java("JavaProducer", bootstrap, topic, str(count), prefix, str(keys), "0", *configs)
    produced = parse_produced(out.splitlines())
    assert produced.done and not produced.failed, produced.failed
    return produced


@dataclass
class Consumed:
    records: list[Record]
    committed: dict[tuple[str, int], int]  # next offset by (topic, partition)


def consume(bootstrap: str, topics: str, group: str, expected: int, *configs: str) -> Consumed:
    """JavaConsumer in ``group`` on ``topics`` (comma-separated) until ``expected`` records
    (30 s at most), then a commit."""
    out = run_java("JavaConsumer", bootstrap, topics, group, str(expected), "30000", *configs)
    records: list[Record] = []
    committed: dict[tuple[str, int], int] = {}
    for line in out.splitlines():
        word, *rest = line.split(" ")
        if word == "record":
            topic, partition, offset, key, value, *headers = rest
            records.append(
                Record(topic, int(partition), int(offset), key, value, " ".join(headers))
            )
        elif word == "committed":
            committed[(rest[0], int(rest[1]))] = int(rest[2])
    return Consumed(records, committed)


def facts(output: str) -> dict[str, list[list[str]]]:
    """``name value ...`` lines (as JavaAdmin prints them) → {name: [values of each line]}."""
    found: dict[str, list[list[str]]] = defaultdict(list)
    for line in output.splitlines():
        name, *values = line.split(" ")
        found[name].append(values)
    return dict(found)


def client_requests(proxy: RecordingProxy) -> dict[int, set[int]]:
    """The versions of each API the clients sent through ``proxy`` (not the broker's own
    requests, such as its transaction markers)."""
    found: dict[int, set[int]] = {}
    for frame in proxy.frames:
        if (client_id_of(frame) or "").startswith("odradek-"):
            continue
        key, version = struct.unpack_from(">hh", frame)
        found.setdefault(key, set()).add(version)
    return found


def transactional_epochs(broker: RunningBroker, topic: str) -> tuple[set[int], set[int]]:
    """The producer epochs of the transactional data batches and of the transaction markers in
    ``topic``'s log on ``broker``'s disk: under transactions version 1 a producer keeps one epoch
    from transaction to transaction; under version 2 each transaction's end bumps it."""
    data: set[int] = set()
    markers: set[int] = set()
    for segment in sorted(broker.data_dir.glob(f"{topic}-*/*.log")):
        for header in iter_headers(segment.read_bytes()):
            if header.is_transactional:
                (markers if header.is_control else data).add(header.producer_epoch)
    return data, markers
