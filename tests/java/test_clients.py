"""Kafka's Java producer and consumer (kafka-clients 4.x, as in pom.xml) against one broker."""

from __future__ import annotations

from collections import Counter

from odradek.protocol.partitioner import key_partition
from tests.e2e.conftest import stored_codecs

from .support import consume, create_topic, produce, run_java

PARTITIONS = 3


def java_partition(key: str, partitions: int) -> int:
    """Where Kafka's default partitioner puts a keyed record: murmur2 of the key, positive."""
    return key_partition(key.encode(), partitions)


def test_java_producer_and_group_consumer_round_trip_then_resume(bootstrap):
    topic, group = "java-round-trip", "java-round-trip-group"
    create_topic(bootstrap, topic, PARTITIONS)

    first = produce(bootstrap, topic, 40, "a")
    assert len(first.acked) == 40
    for partition in range(PARTITIONS):  # offsets of each partition are 0, 1, 2, … in send order
        values = sorted((o, v) for v, (p, o) in first.acked.items() if p == partition)
        assert [o for o, _ in values] == list(range(len(values)))

    consumed = consume(bootstrap, topic, group, 40)
    expected = {(p, o, f"ak{int(v[2:]) % 5}", v, f"n={v[2:]}") for v, (p, o) in first.acked.items()}
    got = [(r.partition, r.offset, r.key, r.value, r.headers) for r in consumed.records]
    assert len(got) == len(set(got)) == 40
    assert set(got) == expected
    for partition, _, key, _, _ in got:  # the Java partitioner agrees with odradek's murmur2
        assert partition == java_partition(key, PARTITIONS)
    assert consumed.committed == Counter((topic, r.partition) for r in consumed.records)

    second = produce(bootstrap, topic, 15, "b")
    resumed = consume(bootstrap, topic, group, 15)
    assert {r.value for r in resumed.records} == set(second.acked) == {f"bv{i}" for i in range(15)}
    assert len(resumed.records) == 15
    for record in resumed.records:
        assert (record.partition, record.offset) == second.acked[record.value]
        assert record.offset >= consumed.committed.get((topic, record.partition), 0)


def test_compressed_batches_of_the_java_producer(broker, bootstrap):
    """Each codec of the Java producer: stored as sent (compressed), read back by a
    read_committed consumer of all four topics at once."""
    codecs = ("gzip", "snappy", "lz4", "zstd")
    acked = {}
    for codec in codecs:
        topic = f"java-{codec}"
        create_topic(bootstrap, topic, 1)
        produced = produce(
            bootstrap, topic, 30, codec, 3, f"compression.type={codec}", "linger.ms=100"
        )
        acked.update({value: (topic, 0, offset) for value, (_, offset) in produced.acked.items()})
        assert stored_codecs(broker, topic) == {codec}
    consumed = consume(
        bootstrap,
        ",".join(f"java-{c}" for c in codecs),
        "java-codecs",
        len(acked),
        "isolation.level=read_committed",
    )
    assert {r.value: (r.topic, r.partition, r.offset) for r in consumed.records} == acked
    assert len(consumed.records) == len(acked) == 4 * 30


def test_java_consumer_with_the_kip_848_group_protocol(bootstrap):
    topic = "java-kip-848"
    create_topic(bootstrap, topic, PARTITIONS)
    produced = produce(bootstrap, topic, 10, "c")
    consumed = consume(bootstrap, topic, "java-kip-848-group", 10, "group.protocol=consumer")
    assert {r.value: (r.partition, r.offset) for r in consumed.records} == produced.acked


def test_java_transactions_commit_abort_and_fencing(bootstrap):
    topic = "java-transactions"
    create_topic(bootstrap, topic, PARTITIONS)
    out = run_java("JavaTransactions", bootstrap, topic, "java-txn", "commit-abort", "20")
    assert out.split() == ["committed", "aborted", "committed", "fenced", "done"]
    committed = consume(bootstrap, topic, "java-txn-rc", 21, "isolation.level=read_committed")
    assert sorted(r.value for r in committed.records) == sorted(
        [f"c{i}" for i in range(20)] + ["last"]
    )
    everything = consume(bootstrap, topic, "java-txn-ru", 42, "isolation.level=read_uncommitted")
    assert sorted(r.value for r in everything.records) == sorted(
        [f"c{i}" for i in range(20)] + [f"a{i}" for i in range(20)] + ["last", "zombie"]
    )


def test_java_consume_transform_produce(bootstrap):
    source, sink, group = "java-ctp-source", "java-ctp-sink", "java-ctp"
    create_topic(bootstrap, source, PARTITIONS)
    create_topic(bootstrap, sink, 1)
    produce(bootstrap, source, 30, "s")
    out = run_java("JavaTransactions", bootstrap, sink, "java-ctp-txn", "copy", "30", source, group)
    assert out.split()[-1] == "done" and "copied 30" in out
    copied = consume(bootstrap, sink, "java-ctp-check", 30, "isolation.level=read_committed")
    assert sorted(r.value for r in copied.records) == sorted(f"xsv{i}" for i in range(30))
    # The source offsets were committed in the transactions: the group has nothing left.
    rest = consume(bootstrap, source, group, 0)
    assert rest.records == []
