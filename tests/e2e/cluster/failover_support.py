"""Shared pieces of the cluster end-to-end tests that kill brokers, freeze ZooKeeper and send bad
requests: a cluster that is torn down fast, partition metadata as each broker answers it, RF=3
topics, the waits for a new leader or a full ISR, and clients running under load on threads of
their own (:class:`Load`) that note what was acknowledged and what was read (:class:`Ledger`).

Everything here asks the brokers over real sockets (Metadata v9 through the tests' raw
:class:`~tests.server.conftest.KafkaConnection`), never ZooKeeper: what is checked is what clients
are told. Waits poll with deadlines (:func:`odradek.testing.wait_until`).
"""

from __future__ import annotations

import contextlib
import queue
import re
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from odradek.client.core import ClientError
from odradek.protocol.errors import ErrorCode
from odradek.testing import RunningCluster, ZooKeeperServer, wait_until
from tests.server.conftest import CREATE_TOPICS, METADATA, KafkaConnection

# Short enough that a killed leader is replaced in seconds, long enough that a broker busy on
# two shared cores does not lose its session.
SESSION_TIMEOUT_MS = 4000
FAILOVER_TIMEOUT_S = 45
METADATA_VERSION = 9  # leader epochs and offline replicas, topics by name
NO_NODE = -1


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition as one broker's Metadata answer describes it."""

    error_code: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


def unique_name(prefix: str) -> str:
    return f"{re.sub(r'[^a-zA-Z0-9._-]+', '-', prefix)[:40]}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def started_cluster(
    directory: Path,
    size: int = 3,
    *,
    zookeeper: ZooKeeperServer | ZooKeeperProxy | None = None,
    settings: dict[str, str] | None = None,
) -> Iterator[RunningCluster]:
    """A running cluster for the block. Torn down with kill -9 (a controlled shutdown of each
    broker in turn waits on a controller that is itself stopping); every broker's log is printed,
    which pytest shows for a failed test."""
    cluster = RunningCluster(
        directory,
        size,
        zookeeper=zookeeper,  # type: ignore[arg-type]  # a proxy serves as well
        settings={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS), **(settings or {})},
    )
    cluster.start()
    try:
        yield cluster
    finally:
        for broker_id in cluster.brokers:
            if cluster.is_running(broker_id):
                cluster.resume(broker_id)
                cluster.kill(broker_id)
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            cluster.stop()
        for broker_id in cluster.brokers:
            lines = [
                line
                for line in cluster.output(broker_id).splitlines()
                if "kazoo.client: Connecting" not in line and "Connection dropped" not in line
            ]
            print(f"===== broker {broker_id} (last run) =====")
            print("\n".join(lines[-80:]))


def live_ids(cluster: RunningCluster) -> list[int]:
    return [b for b in sorted(cluster.brokers) if cluster.is_running(b)]


def address(cluster: RunningCluster, broker_id: int) -> str:
    return cluster.brokers[broker_id].bootstrap


def describe(address: str, topic: str) -> list[PartitionMetadata] | None:
    """The topic's partitions as the broker at ``address`` answers Metadata; None when the broker
    does not answer or does not know the topic."""
    try:
        with KafkaConnection(address, timeout=5) as connection:
            response = connection.request(
                METADATA,
                METADATA_VERSION,
                topics=[{"name": topic}],
                allow_auto_topic_creation=False,
            )
    except (ClientError, OSError, TimeoutError):
        return None
    (found,) = response.topics
    if found.error_code != ErrorCode.none:
        return None
    return [
        PartitionMetadata(
            int(p.error_code),
            int(p.leader_id),
            int(p.leader_epoch),
            tuple(int(r) for r in p.replica_nodes),
            tuple(int(r) for r in p.isr_nodes),
            tuple(int(r) for r in p.offline_replicas),
        )
        for p in sorted(found.partitions, key=lambda p: int(p.partition_index))
    ]


def advertised_brokers(cluster: RunningCluster, broker_id: int) -> set[int]:
    """The brokers that broker ``broker_id`` names in its Metadata answer."""
    with KafkaConnection(address(cluster, broker_id)) as connection:
        response = connection.request(
            METADATA, METADATA_VERSION, topics=[], allow_auto_topic_creation=False
        )
    return {int(b.node_id) for b in response.brokers}


def metadata_everywhere(
    cluster: RunningCluster, topic: str, index: int = 0
) -> dict[int, PartitionMetadata | None]:
    """Partition ``index`` as every running broker describes it."""
    answers: dict[int, PartitionMetadata | None] = {}
    for broker_id in live_ids(cluster):
        partitions = describe(address(cluster, broker_id), topic)
        answers[broker_id] = (
            partitions[index] if partitions is not None and index < len(partitions) else None
        )
    return answers


def agreed(cluster: RunningCluster, topic: str, index: int = 0) -> PartitionMetadata | None:
    """The partition's metadata if every running broker gives the same, else None."""
    answers = metadata_everywhere(cluster, topic, index)
    values = set(answers.values())
    if len(values) != 1 or None in values:
        return None
    (value,) = values
    return value


def wait_for_leader(
    cluster: RunningCluster,
    topic: str,
    index: int = 0,
    *,
    not_on: tuple[int, ...] = (),
    isr_size: int | None = None,
    timeout_s: float = FAILOVER_TIMEOUT_S,
) -> PartitionMetadata:
    """Wait until every running broker names the same live leader (not one of ``not_on``) and,
    if given, an ISR of ``isr_size``; returns that metadata."""

    def settled() -> PartitionMetadata | None:
        found = agreed(cluster, topic, index)
        if found is None or found.leader == NO_NODE or found.leader in not_on:
            return None
        if not cluster.is_running(found.leader):
            return None
        if isr_size is not None and len(found.isr) != isr_size:
            return None
        return found

    result: PartitionMetadata = wait_until(
        settled, timeout_s, interval_s=0.2, what=f"a leader of {topic}-{index}"
    )
    return result


def create_topic(
    cluster: RunningCluster,
    topic: str,
    partitions: int = 1,
    replication_factor: int = 3,
    **configs: str,
) -> Any:
    """Create the topic with CreateTopics v5 on a running broker; returns the topic's result
    (the caller checks its error code when it expects one)."""
    with KafkaConnection(address(cluster, live_ids(cluster)[0])) as connection:
        response = connection.request(
            CREATE_TOPICS,
            5,
            timeout=15_000,
            topics=[
                {
                    "name": topic,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
        )
    (result,) = response.topics
    return result


def create_replicated_topic(
    cluster: RunningCluster, topic: str, partitions: int = 1, **configs: str
) -> list[PartitionMetadata]:
    """An RF=3 topic whose every partition has a leader and a full ISR on every broker."""
    result = create_topic(cluster, topic, partitions, 3, **configs)
    assert result.error_code == ErrorCode.none, result
    return [wait_for_leader(cluster, topic, i, isr_size=3) for i in range(partitions)]


# -- clients under load ---------------------------------------------------------------------

# Enough records at each stage to show the client moving, few enough to keep the test short.
STEP = 40
# A produce waits out the failover (about the ZooKeeper session timeout) and then some.
DELIVERY_TIMEOUT_MS = 90_000
PACE_S = 0.005  # between sends: a few hundred records a second
READ_BACK_TIMEOUT_S = 60


class Ledger:
    """What one client saw: the records acknowledged (offset → value), the records it consumed
    (offset → value), and anything that went wrong on the client's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acked: dict[int, bytes] = {}
        self.consumed: dict[int, bytes] = {}
        self.failures: list[str] = []
        self.conflicts: list[tuple[int, bytes, bytes]] = []

    def ack(self, offset: int, value: bytes) -> None:
        with self._lock:
            if offset in self.acked and self.acked[offset] != value:
                self.conflicts.append((offset, self.acked[offset], value))
            self.acked[offset] = value

    def consume(self, offset: int, value: bytes) -> None:
        with self._lock:
            if offset in self.consumed and self.consumed[offset] != value:
                self.conflicts.append((offset, self.consumed[offset], value))
            self.consumed[offset] = value

    def fail(self, what: str) -> None:
        with self._lock:
            self.failures.append(what)

    def acks(self) -> int:
        with self._lock:
            return len(self.acked)

    def reads(self) -> int:
        with self._lock:
            return len(self.consumed)

    def unread(self) -> list[int]:
        with self._lock:
            return sorted(o for o in self.acked if o not in self.consumed)


class Load:
    """A client's producing or consuming loop on a thread of its own, until :meth:`stop`."""

    def __init__(self, name: str, ledger: Ledger, loop: Callable[[threading.Event], None]) -> None:
        self.stopping = threading.Event()
        self.ledger = ledger
        self.thread = threading.Thread(target=self._run, args=(loop,), name=name, daemon=True)
        self.thread.start()

    def _run(self, loop: Callable[[threading.Event], None]) -> None:
        try:
            loop(self.stopping)
        except BaseException as e:
            self.ledger.fail(f"{self.thread.name}: {e!r}")
            raise

    def stop(self, timeout_s: float = DELIVERY_TIMEOUT_MS / 1000 + 30) -> None:
        self.stopping.set()
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), f"{self.thread.name} did not stop"


def wait_for_progress(count: Callable[[], int], more: int, what: str) -> None:
    mark = count()
    wait_until(lambda: count() >= mark + more, FAILOVER_TIMEOUT_S, 0.05, what)


def assert_read_back(ledger: Ledger, cluster: RunningCluster, topic: str) -> None:
    """Every acknowledged record was consumed at its acknowledged offset. If the client does not
    get there, the partition is read from its leader to tell a stuck client from lost records."""
    try:
        wait_until(
            lambda: not ledger.unread(), READ_BACK_TIMEOUT_S, 0.1, "every acknowledged record read"
        )
    except AssertionError as e:
        unread = ledger.unread()
        raise AssertionError(
            f"{len(unread)} of {len(ledger.acked)} acknowledged records not consumed "
            f"(offsets {unread[:5]}...{unread[-5:]}, consumed up to "
            f"{max(ledger.consumed, default=-1)}); the leader's log: "
            f"{log_against_acks(ledger, cluster, topic)}"
        ) from e
    print(f"{len(ledger.acked)} acknowledged, {len(ledger.consumed)} consumed")
    assert ledger.failures == []
    assert ledger.conflicts == []
    assert len(ledger.acked) >= 3 * STEP
    for offset, value in ledger.acked.items():
        assert ledger.consumed[offset] == value, f"offset {offset}"
    # Idempotence: no record was written twice.
    values = list(ledger.consumed.values())
    assert len(values) == len(set(values))


def log_against_acks(ledger: Ledger, cluster: RunningCluster, topic: str) -> str:
    """How partition 0 as its leader serves it compares with the acknowledgements."""
    state = agreed(cluster, topic)
    if state is None or state.leader == NO_NODE:
        return f"no agreed leader ({metadata_everywhere(cluster, topic)})"
    with KafkaConnection(address(cluster, state.leader)) as connection:
        records = {r.offset: r.value for r in connection.read_all(topic, 0)}
    missing = sorted(o for o, v in ledger.acked.items() if records.get(o) != v)
    return (
        f"leader {state.leader} epoch {state.leader_epoch} ISR {state.isr} serves "
        f"{len(records)} records; {len(missing)} acknowledged ones differ or are missing "
        f"({missing[:10]})"
    )


def confluent_producer(
    bootstrap: str, topic: str, ledger: Ledger
) -> Callable[[threading.Event], None]:
    """A loop for :class:`Load`: an idempotent acks=all confluent-kafka producer sending to
    partition 0 until stopped, then flushing; acknowledgements go to ``ledger``."""

    def produce(stopping: threading.Event) -> None:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            }
        )

        def delivered(err: KafkaError | None, message: Any) -> None:
            if err is not None:
                ledger.fail(f"delivery: {err}")
            else:
                ledger.ack(message.offset(), message.value())

        i = 0
        while not stopping.is_set():
            producer.produce(topic, value=b"c%d" % i, partition=0, on_delivery=delivered)
            i += 1
            producer.poll(PACE_S)
        assert producer.flush(DELIVERY_TIMEOUT_MS / 1000) == 0

    return produce


def confluent_consumer(
    bootstrap: str, topic: str, ledger: Ledger
) -> Callable[[threading.Event], None]:
    """A loop for :class:`Load`: a confluent-kafka consumer assigned partition 0 from the
    beginning (no group), putting what it reads in ``ledger`` until stopped."""

    def consume(stopping: threading.Event) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                # librdkafka wants a group id even for assign(); no group API is used with it.
                "group.id": "odradek-e2e-unused",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "fetch.wait.max.ms": 100,
            }
        )
        consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
        try:
            while not stopping.is_set():
                message = consumer.poll(0.2)
                if message is None or message.error() is not None:
                    continue  # transport errors while a leader moves are retried
                ledger.consume(message.offset(), message.value())
        finally:
            consumer.close()

    return consume


class ZooKeeperProxy:
    """A TCP forwarder in front of a :class:`ZooKeeperServer` that a test can :meth:`cut` (every
    connection closed, new ones closed as they come) and :meth:`restore`: the brokers, which
    connect through it, lose ZooKeeper for exactly as long as the test says, while ZooKeeper runs
    on and expires their sessions on its own clock. Give it to :class:`RunningCluster` as its
    ``zookeeper``: the cluster only asks it for ``connect_string``."""

    def __init__(self, target: ZooKeeperServer) -> None:
        self.target = target
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._cut = False
        self.port = 0
        # How late ZooKeeper's answers reach the brokers (a slow ZooKeeper or a long way to it;
        # this kernel has no netem). Each chunk is held this long, not the stream behind it.
        self.delay_s = 0.0

    def connect_string(self, chroot: str = "") -> str:
        return f"127.0.0.1:{self.port}{chroot}"

    def start(self) -> ZooKeeperProxy:
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, name="zk-proxy", daemon=True).start()
        return self

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # stopped
            if self._cut:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target.port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            held: queue.Queue[tuple[float, bytes]] = queue.Queue()
            threading.Thread(target=self._pump, args=(upstream, client, held), daemon=True).start()
            release = threading.Thread(
                target=self._release, args=(held, upstream, client), daemon=True
            )
            release.start()

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        held: queue.Queue[tuple[float, bytes]] | None = None,
    ) -> None:
        try:
            while data := source.recv(65536):
                if held is None:
                    sink.sendall(data)
                else:
                    held.put((time.monotonic() + self.delay_s, data))
        except OSError:
            pass
        finally:
            if held is None:
                self._close(source, sink)
            else:
                held.put((0.0, b""))

    def _release(
        self, held: queue.Queue[tuple[float, bytes]], source: socket.socket, sink: socket.socket
    ) -> None:
        """ZooKeeper's answers, each sent once its delay has passed, in order."""
        try:
            while True:
                due, data = held.get()
                if not data:
                    break
                time.sleep(max(0.0, due - time.monotonic()))
                sink.sendall(data)
        except OSError:
            pass
        finally:
            self._close(source, sink)

    def _close(self, *sockets: socket.socket) -> None:
        with self._lock:
            for s in sockets:
                self._sockets.discard(s)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def cut(self) -> None:
        self._cut = True
        with self._lock:
            open_sockets = list(self._sockets)
        self._close(*open_sockets)

    def restore(self) -> None:
        self._cut = False

    def stop(self) -> None:
        self.cut()
        if self._listener is not None:
            self._listener.close()
