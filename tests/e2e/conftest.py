"""Shared pieces of the end-to-end suite: one real broker per test module, unique topic names,
topic creation through a real admin client, and a look at the codec of the stored batches.

Each test makes its own topics, so the tests of a module can share a broker.
"""

from __future__ import annotations

import re
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.clock import ManualClock
from odradek.protocol.record_batch import iter_headers
from odradek.testing import RunningBroker, running_broker

ADMIN_TIMEOUT_S = 15
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# RecordBatch v2 header: baseOffset int64, batchLength int32, partitionLeaderEpoch int32,
# magic int8, crc uint32, attributes int16 — the codec is attributes' lowest 3 bits.
_BATCH_PREFIX = struct.Struct(">qiibIh")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("e2e")) as running:
        yield running


@pytest.fixture(scope="module")
def clock() -> ManualClock:
    """A manual clock starting at the real time (so that producers' timestamps are accepted),
    for a module whose ``broker`` runs on it."""
    return ManualClock(int(time.time() * 1000))


@pytest.fixture
def bootstrap(broker: RunningBroker) -> str:
    return broker.bootstrap


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name of this test alone (legal in Kafka: alphanumerics, '.', '_', '-')."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:60].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"


def create_topics(bootstrap: str, topics: dict[str, int], configs: dict[str, str] | None = None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [
            NewTopic(name, num_partitions=count, replication_factor=1, config=dict(configs or {}))
            for name, count in topics.items()
        ],
        operation_timeout=ADMIN_TIMEOUT_S,
        request_timeout=ADMIN_TIMEOUT_S,
    )
    for future in futures.values():
        future.result(timeout=ADMIN_TIMEOUT_S)


@pytest.fixture
def make_topic(bootstrap: str) -> Callable[..., str]:
    """``make_topic(name, partitions=1, **configs)`` creates the topic and returns its name;
    config names use ``_`` for ``.`` (``retention_ms="1000"``)."""

    def make(name: str, partitions: int = 1, **configs: str) -> str:
        create_topics(
            bootstrap, {name: partitions}, {k.replace("_", "."): v for k, v in configs.items()}
        )
        return name

    return make


def stored_codecs(broker: RunningBroker, topic: str, partition: int = 0) -> set[str]:
    """Codecs of the record batches the broker stored for a partition, read from its segment
    files (Kafka's layout: ``<topic>-<partition>/<base offset>.log``)."""
    names = {v: k for k, v in CODEC_IDS.items()}
    found: set[str] = set()
    directory = Path(broker.data_dir) / f"{topic}-{partition}"
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + _BATCH_PREFIX.size <= len(data):
            _, length, _, magic, _, attributes = _BATCH_PREFIX.unpack_from(data, position)
            if length <= 0:
                break
            assert magic == 2, f"batch at {segment.name}:{position} has magic {magic}"
            found.add(names[attributes & 0x7])
            position += 12 + length
    return found


def stored_max_timestamps(broker: RunningBroker, topic: str, partition: int = 0) -> list[int]:
    """The maxTimestamp of each record batch the broker stored for a partition."""
    found: list[int] = []
    for segment in sorted((Path(broker.data_dir) / f"{topic}-{partition}").glob("*.log")):
        found += [h.max_timestamp for h in iter_headers(segment.read_bytes())]
    return found


def group_by_key(records: list[tuple[int, bytes | None, bytes | None]]):
    """(partition, key, value) in consumption order → {key: (partitions seen, values in order)}."""
    by_key: dict[bytes | None, tuple[set[int], list[bytes | None]]] = {}
    for partition, key, value in records:
        partitions, values = by_key.setdefault(key, (set(), []))
        partitions.add(partition)
        values.append(value)
    return by_key


def keyed_messages(keys: int = 12, per_key: int = 8) -> list[tuple[bytes, bytes]]:
    """Interleaved (key, value) pairs; each key's values count up: k3 → v3-0, v3-1, …"""
    return [(f"k{k}".encode(), f"v{k}-{i}".encode()) for i in range(per_key) for k in range(keys)]


def assert_per_key_order(
    records: list[tuple[int, bytes | None, bytes | None]], sent: list[tuple[bytes, bytes]]
) -> None:
    """Every key lives in one partition, its values arrive in the order sent, and the keys
    spread over more than one partition."""
    by_key = group_by_key(records)
    expected: dict[bytes, list[bytes]] = {}
    for key, value in sent:
        expected.setdefault(key, []).append(value)
    assert set(by_key) == set(expected)
    for key, values in expected.items():
        partitions, got = by_key[key]
        assert len(partitions) == 1, f"key {key!r} spread over partitions {partitions}"
        assert got == values, f"key {key!r} out of order"
    used = set().union(*(p for p, _ in by_key.values()))
    assert len(used) > 1, "every key hashed to one partition"


COMPRESSIBLE = b"odradek " * 64
