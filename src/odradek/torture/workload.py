"""The campaign's clients, each on a thread of its own, recording into a :class:`History`.

The clients are librdkafka's (confluent-kafka), not odradek's own client: the workload needs an
idempotent producer that retries on its own, a transactional producer and consumers in groups,
which odradek's client (a data client for connectors and a transactional producer for the Spark
writer, neither with group membership or retrying idempotence) does not have. A fault campaign
also judges the broker best through a client that is not built on the broker's own assumptions.

- :class:`IdempotentProducer`: acks=all, enable.idempotence, values ``<name>-<n>`` to partitions
  in turn; every delivery report becomes :class:`Acked` or :class:`SendFailed`.
- :class:`TransactionalProducer`: transactions of a few records over the partitions, one in five
  aborted on purpose; each ends in :class:`TxnEnded` (committed, aborted or unknown).
- :class:`GroupConsumer`: a member of a group (read_committed or not), committing synchronously
  after what it polled; every record is a :class:`Read`, every answered commit a
  :class:`CommitAcked`, an unreadable batch a :class:`ReadError`.
- :class:`OffsetMonitor`: fetches the groups' committed offsets (:class:`CommitObserved`), with
  odradek's own group admin client.
- :func:`read_back`: one reader's complete read of every partition (:class:`ReadComplete`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from odradek.torture.history import (
    Acked,
    CommitAcked,
    CommitObserved,
    History,
    Isolation,
    Read,
    ReadComplete,
    ReadError,
    SendFailed,
    Sent,
    TxnEnded,
)

log = logging.getLogger("odradek.torture")

IDEMPOTENT_TOPIC = "torture-idempotent"
TRANSACTIONAL_TOPIC = "torture-transactional"
TOPICS = [IDEMPOTENT_TOPIC, TRANSACTIONAL_TOPIC]
GROUPS: dict[str, Isolation] = {
    "torture-read-uncommitted": "read_uncommitted",
    "torture-read-committed": "read_committed",
}
MEMBERS_PER_GROUP = 2

Clock = Callable[[], float]

# librdkafka logs only what is fatal: a campaign's faults make every client log connection errors
# by the thousand, which are expected.
CLIENT_LOG_LEVEL = 2

# librdkafka's errors that mean "the bytes served were not a batch" (CRC or framing).
_CORRUPT_ERRORS = ("_BAD_MSG", "CORRUPT_MESSAGE", "CRC")


def client_config(bootstrap: str) -> dict[str, Any]:
    """What every librdkafka client of the campaign is given."""
    return {
        "bootstrap.servers": bootstrap,
        "log_level": CLIENT_LOG_LEVEL,
        "socket.connection.setup.timeout.ms": 5_000,
    }


def _now() -> float:
    return time.monotonic()


def _where(message: Any) -> tuple[str, int, int]:
    """A message's topic, partition and offset (librdkafka leaves them unset on some errors)."""
    return message.topic() or "", message.partition() or 0, message.offset() or 0


def _text(message: Any) -> str:
    value = message.value()
    return value.decode(errors="replace") if value is not None else ""


class Worker:
    """A client on a thread: :meth:`start`, then :meth:`stop` (joins)."""

    name = "worker"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failures: list[str] = []

    def start(self) -> Worker:
        self._thread = threading.Thread(target=self._guarded, name=self.name, daemon=True)
        self._thread.start()
        return self

    def _guarded(self) -> None:
        try:
            self.run()
        except Exception as e:  # the campaign goes on; the report names the failure
            log.exception("%s failed", self.name)
            self.failures.append(f"{self.name}: {e!r}")

    def run(self) -> None:
        raise NotImplementedError

    def stop(self, timeout_s: float = 120) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()


class IdempotentProducer(Worker):
    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        partitions: int,
        history: History,
        rate_per_s: float = 100,
    ) -> None:
        super().__init__()
        self.name = name
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.interval_s = 1 / rate_per_s
        self.fatal_errors: list[str] = []

    def _producer(self) -> Any:
        from confluent_kafka import Producer

        return Producer(
            {
                **client_config(self.bootstrap),
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
            }
        )

    def run(self) -> None:
        from confluent_kafka import KafkaException

        producer = self._producer()
        sent = 0
        fatal_handled = 0

        def delivered(error: Any, message: Any) -> None:
            value = message.value().decode()
            if error is not None:
                self.history.add(SendFailed(self.name, value, str(error), _now()))
                if error.fatal():
                    self.fatal_errors.append(str(error))
            else:
                self.history.add(
                    Acked(
                        self.name,
                        value,
                        message.topic(),
                        message.partition(),
                        message.offset(),
                        None,
                        _now(),
                    )
                )

        while not self.stopping:
            if len(self.fatal_errors) > fatal_handled:
                # A fatal idempotence error ends this producer id: what is queued fails, and a
                # fresh producer (a new producer id) carries on.
                fatal_handled = len(self.fatal_errors)
                producer.flush(5)
                producer = self._producer()
            value = f"{self.name}-{sent:06d}"
            partition = sent % self.partitions
            try:
                producer.produce(
                    self.topic, value=value.encode(), partition=partition, on_delivery=delivered
                )
            except BufferError:
                producer.poll(0.1)
                continue
            except KafkaException as e:  # the producer is in a fatal state
                self.fatal_errors.append(str(e))
                continue
            self.history.add(Sent(self.name, value, self.topic, partition, None, _now()))
            sent += 1
            producer.poll(0)
            self._stop.wait(self.interval_s)
        remaining = producer.flush(90)
        if remaining:
            log.warning("%s: %d records still unacknowledged at the end", self.name, remaining)


class TransactionalProducer(Worker):
    def __init__(
        self,
        name: str,
        transactional_id: str,
        bootstrap: str,
        topic: str,
        partitions: int,
        history: History,
        seed: int,
        pause_s: float = 0.1,
    ) -> None:
        super().__init__()
        self.name = name
        self.transactional_id = transactional_id
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rng = random.Random(seed)
        self.pause_s = pause_s
        self.outcomes: dict[str, int] = {"committed": 0, "aborted": 0, "unknown": 0}

    def _producer(self) -> Any:
        from confluent_kafka import Producer

        producer = Producer(
            {
                **client_config(self.bootstrap),
                "transactional.id": self.transactional_id,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "transaction.timeout.ms": 60_000,
                "message.timeout.ms": 55_000,
            }
        )
        while not self.stopping:
            try:
                producer.init_transactions(30)
                return producer
            except Exception as e:
                log.info("%s: init_transactions: %s (retrying)", self.name, e)
                self._stop.wait(1)
        return producer

    def _end(self, txn: str, outcome: str) -> None:
        self.outcomes[outcome] += 1
        self.history.add(TxnEnded(self.name, txn, outcome, _now()))  # type: ignore[arg-type]

    def run(self) -> None:
        from confluent_kafka import KafkaException

        producer = self._producer()
        number = 0
        while not self.stopping:
            txn = f"{self.name}-{number:05d}"
            number += 1
            size = self.rng.randint(2, 6)
            abort = self.rng.random() < 0.2

            def delivered(error: Any, message: Any, txn: str = txn) -> None:
                if error is None:
                    self.history.add(
                        Acked(
                            self.name,
                            message.value().decode(),
                            message.topic(),
                            message.partition(),
                            message.offset(),
                            txn,
                            _now(),
                        )
                    )

            try:
                producer.begin_transaction()
            except KafkaException as e:
                log.info("%s: begin_transaction: %s", self.name, e)
                producer = self._producer()
                continue
            outcome = "unknown"
            try:
                for index in range(size):
                    value = f"{txn}-{index}"
                    partition = self.rng.randrange(self.partitions)
                    self.history.add(Sent(self.name, value, self.topic, partition, txn, _now()))
                    producer.produce(
                        self.topic, value=value.encode(), partition=partition, on_delivery=delivered
                    )
                producer.poll(0)
                if abort:
                    # Flushed first, so the aborted records are in the log for readers to skip
                    # (an abort would otherwise drop them while still queued in the client).
                    producer.flush(30)
                    producer.abort_transaction(60)
                    outcome = "aborted"
                else:
                    outcome = self._commit(producer)
            except KafkaException as e:
                error = e.args[0]
                if error.txn_requires_abort():
                    outcome = self._abort(producer)
                else:
                    log.info("%s: transaction %s: %s", self.name, txn, error)
            self._end(txn, outcome)
            if outcome == "unknown":
                # The producer's state is not known: a fresh one fences it (init_transactions
                # completes or aborts whatever it left open).
                producer = self._producer()
            self._stop.wait(self.pause_s)

    def _commit(self, producer: Any) -> str:
        from confluent_kafka import KafkaException

        for _ in range(5):
            try:
                producer.commit_transaction(60)
                return "committed"
            except KafkaException as e:
                error = e.args[0]
                if error.txn_requires_abort():
                    return self._abort(producer)
                if not error.retriable():
                    log.info("%s: commit: %s", self.name, error)
                    return "unknown"
        return "unknown"

    def _abort(self, producer: Any) -> str:
        from confluent_kafka import KafkaException

        for _ in range(5):
            try:
                producer.abort_transaction(60)
                return "aborted"
            except KafkaException as e:
                if not e.args[0].retriable():
                    log.info("%s: abort: %s", self.name, e.args[0])
                    return "unknown"
        return "unknown"


class GroupConsumer(Worker):
    def __init__(
        self,
        name: str,
        group: str,
        bootstrap: str,
        topics: Sequence[str],
        isolation: Isolation,
        history: History,
    ) -> None:
        super().__init__()
        self.name = name
        self.group = group
        self.bootstrap = bootstrap
        self.topics = list(topics)
        self.isolation = isolation
        self.history = history

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer(
            {
                **client_config(self.bootstrap),
                "group.id": self.group,
                "client.id": self.name,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": self.isolation,
                "check.crcs": True,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 1_000,
            }
        )
        consumer.subscribe(self.topics)
        uncommitted = 0
        last_commit = time.monotonic()
        try:
            while not self.stopping:
                message = consumer.poll(0.2)
                if message is not None:
                    error = message.error()
                    if error is None:
                        self.history.add(
                            Read(
                                self.name,
                                self.group,
                                self.isolation,
                                *_where(message),
                                _text(message),
                                _now(),
                            )
                        )
                        uncommitted += 1
                    elif any(word in error.name() for word in _CORRUPT_ERRORS):
                        self.history.add(ReadError(self.name, *_where(message), str(error), _now()))
                if uncommitted and time.monotonic() - last_commit > 0.5:
                    start = _now()
                    try:
                        committed = consumer.commit(asynchronous=False)
                    except KafkaException as e:
                        log.debug("%s: commit: %s", self.name, e)
                        committed = None
                    end = _now()
                    for tp in committed or []:
                        if tp.error is None and tp.offset >= 0:
                            self.history.add(
                                CommitAcked(
                                    self.group,
                                    self.name,
                                    tp.topic,
                                    tp.partition,
                                    tp.offset,
                                    start,
                                    end,
                                )
                            )
                    uncommitted = 0
                    last_commit = time.monotonic()
        finally:
            consumer.close()


class OffsetMonitor(Worker):
    """Fetches each group's committed offsets about every ``interval_s``, with odradek's own
    group admin client (OffsetFetch to the group's coordinator): librdkafka's admin client, under
    faults that time its requests out, aborted the process on an assertion of its own."""

    name = "offset-monitor"

    def __init__(
        self, bootstrap: str, groups: Sequence[str], history: History, interval_s: float = 0.5
    ) -> None:
        super().__init__()
        self.bootstrap = bootstrap
        self.groups = list(groups)
        self.history = history
        self.interval_s = interval_s
        self.latest: dict[tuple[str, str, int], int] = {}

    def fetch(self, group: str, timeout_s: float = 5) -> dict[tuple[str, int], int] | None:
        from odradek.client.admin import GroupAdmin
        from odradek.client.core import ClientError

        async def committed() -> dict[tuple[str, int], int]:
            async with await GroupAdmin.connect(self.bootstrap, timeout_s=timeout_s) as admin:
                return {
                    (tp[0], tp[1]): offset for tp, offset in (await admin.committed(group)).items()
                }

        start = _now()
        try:
            found = asyncio.run(asyncio.wait_for(committed(), timeout_s))
        except (ClientError, OSError, TimeoutError) as e:
            log.debug("offset fetch for %s: %s", group, e)
            return None
        end = _now()
        for (topic, partition), offset in sorted(found.items()):
            self.history.add(CommitObserved(group, topic, partition, offset, start, end))
            self.latest[(group, topic, partition)] = offset
        return found

    def run(self) -> None:
        while not self.stopping:
            for group in self.groups:
                self.fetch(group)
            self._stop.wait(self.interval_s)


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: Isolation) -> list[int]:
    """Each partition's end: the high watermark, or for read_committed the last stable offset."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {**client_config(bootstrap), "group.id": "torture-ends", "isolation.level": isolation}
    )
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def read_back(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: Isolation,
    history: History,
    timeout_s: float = 120,
) -> None:
    """Read every partition of ``topic`` from offset 0 to its end as one reader, recording each
    record and, per partition read to its end, :class:`ReadComplete`."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    reader = f"final-{isolation}"
    ends = end_offsets(bootstrap, topic, partitions, isolation)
    consumer = Consumer(
        {
            **client_config(bootstrap),
            "group.id": f"torture-{reader}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "check.crcs": True,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    done = {p for p in range(partitions) if ends[p] == 0}
    deadline = time.monotonic() + timeout_s
    try:
        while len(done) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            _, partition, offset = _where(message)
            if error is None:
                history.add(
                    Read(reader, None, isolation, topic, partition, offset, _text(message), _now())
                )
            elif error.code() == KafkaError._PARTITION_EOF:
                if offset >= ends[partition]:
                    done.add(partition)
            elif any(word in error.name() for word in _CORRUPT_ERRORS):
                history.add(ReadError(reader, topic, partition, offset, str(error), _now()))
    finally:
        consumer.close()
    for partition in sorted(done):
        history.add(ReadComplete(reader, isolation, topic, partition, ends[partition], _now()))
    if len(done) < partitions:
        log.warning(
            "%s: partitions %s of %s not read to their end within %.0f s",
            reader,
            sorted(set(range(partitions)) - done),
            topic,
            timeout_s,
        )
