"""kill -9 in the middle of a compaction: the restarted broker reads the log back whole, with
either the old or the new segments, and compaction finishes.

The broker runs as a child process (``odradek serve``) with ``ODRADEK_CLEANER_CRASH_AT`` naming
a step of the cleaner's segment swap (see ``odradek.storage.swap``): there the process ends with
``os._exit``, which leaves the files exactly as a kill -9 at that moment would.  The topic is
written uncompacted first, then switched to ``cleanup.policy=compact``, so the crash comes in
the cleaner's first pass over a log of many segments.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek.storage.formats import CLEANER_OFFSET_CHECKPOINT, parse_checkpoint
from odradek.storage.swap import CRASH_ENV, CRASH_EXIT_CODE
from odradek.testing import BrokerProcess

TOPIC = "crash-compaction"
TIMEOUT_S = 30
KEYS = 200
ROUNDS = 40
Record = tuple[int, bytes | None, bytes | None]


def start(data_dir: Path, port: int = 0, *, cleaner: bool = True) -> BrokerProcess:
    return BrokerProcess(
        data_dir,
        "-o",
        "log.cleaner.backoff.ms=100",
        "-o",
        f"log.cleaner.enable={str(cleaner).lower()}",
        port=port,
    ).start()


def fill(bootstrap: str, data_dir: Path) -> dict[int, tuple[bytes, bytes]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics(
        [
            NewTopic(
                TOPIC, 1, 1, config={"segment.bytes": "20000", "min.cleanable.dirty.ratio": "0.01"}
            )
        ]
    )
    created[TOPIC].result(TIMEOUT_S)
    acked: dict[int, tuple[bytes, bytes]] = {}

    def delivered(err: KafkaError | None, message: Message) -> None:
        assert err is None, err
        offset, key, value = message.offset(), message.key(), message.value()
        assert offset is not None and key is not None and value is not None
        acked[offset] = (key, value)

    # Batches well below segment.bytes, so that the log has many segments to clean.
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all", "batch.size": 4000}
    )
    for r in range(ROUNDS):
        for k in range(KEYS):
            producer.produce(
                TOPIC, f"value-{r}-{k}".encode() * 3, key=f"key-{k}".encode(), on_delivery=delivered
            )
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert len(acked) == KEYS * ROUNDS
    segments = list((data_dir / f"{TOPIC}-0").glob("*.log"))
    assert len(segments) > 10
    return acked


def make_compacted(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        TOPIC,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)


def read_all(bootstrap: str) -> list[Record]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "crash-reader", "enable.partition.eof": True}
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=TIMEOUT_S)
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        records: list[Record] = []
        deadline = time.monotonic() + TIMEOUT_S
        while not records or records[-1][0] + 1 < high:
            assert time.monotonic() < deadline, "the partition was not read to its end"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                if message.offset() >= high:
                    break
                continue
            offset = message.offset()
            assert offset is not None
            records.append((offset, message.key(), message.value()))
        return records
    finally:
        consumer.close()


def check_whole(records: list[Record], acked: dict[int, tuple[bytes, bytes]]) -> None:
    """Offsets unchanged and in order, every record as acknowledged, every key's latest there."""
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets))
    assert all(acked[offset] == (key, value) for offset, key, value in records)
    latest: dict[bytes, int] = {}
    for offset in sorted(acked):
        latest[acked[offset][0]] = offset
    assert set(latest.values()) <= set(offsets), "a key's latest value is missing"


def compaction_done(data_dir: Path, records: list[Record]) -> bool:
    """The cleaner's checkpoint reached the active segment, and below it each key is once."""
    bases = sorted(int(p.name[:20]) for p in (data_dir / f"{TOPIC}-0").glob("*.log"))
    try:
        first_dirty = parse_checkpoint((data_dir / CLEANER_OFFSET_CHECKPOINT).read_bytes())
    except (FileNotFoundError, ValueError):
        return False
    if first_dirty.get((TOPIC, 0)) != bases[-1]:
        return False
    keys = [key for offset, key, _ in records if offset < bases[-1]]
    return len(keys) == len(set(keys))


@pytest.mark.parametrize("step", ["prepared", "committed", "renamed-new-0"])
def test_kill_during_a_cleaning_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    started = time.monotonic()
    data_dir = tmp_path / "data"
    monkeypatch.setenv(CRASH_ENV, step)
    broker = start(data_dir)
    try:
        acked = fill(broker.bootstrap, data_dir)
        before = read_all(broker.bootstrap)
        make_compacted(broker.bootstrap)
        assert broker.process is not None
        deadline = time.monotonic() + TIMEOUT_S
        while broker.process.poll() is None:
            assert time.monotonic() < deadline, "no crash:\n" + "".join(broker.output[-30:])
            time.sleep(0.05)
        assert broker.process.returncode == CRASH_EXIT_CODE
        deadline = time.monotonic() + TIMEOUT_S
        while f"simulated crash at cleaner step {step}" not in "".join(broker.output):
            assert time.monotonic() < deadline, "".join(broker.output)  # the pipe drains
            time.sleep(0.05)

        monkeypatch.delenv(CRASH_ENV)
        # Restarted without its cleaner first, to see what recovery made of the swap.
        broker = start(data_dir, broker.port, cleaner=False)
        after = read_all(broker.bootstrap)
        check_whole(after, acked)
        if step == "prepared":
            assert after == before  # not committed: the old segments, untouched
        else:
            assert len(after) < len(before)  # committed: the new ones, the swap finished
        leftovers = [
            p.name
            for p in (data_dir / f"{TOPIC}-0").iterdir()
            if p.name.endswith((".cleaned", ".swap", ".tmp"))
        ]
        assert leftovers == []
        assert broker.terminate() == 0

        broker = start(data_dir, broker.port)
        deadline = time.monotonic() + TIMEOUT_S
        while not compaction_done(data_dir, records := read_all(broker.bootstrap)):
            assert time.monotonic() < deadline, "compaction did not finish after the restart"
            time.sleep(0.2)
        check_whole(records, acked)
        assert broker.terminate() == 0
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.kill()
    assert time.monotonic() - started < 40
