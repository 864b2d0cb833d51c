"""Transaction version 2 (KIP-890 part 2) with Kafka's Java transactional producer: a Kafka 4
client, seeing ``transaction.version`` 2 finalized, adds partitions by producing (Produce v12, no
AddPartitionsToTxn) and ends each transaction with EndTxn v5 (an epoch bump each); kafka-clients
3.9 keeps to version 1. Either way read_committed sees exactly the committed records. The requests
are seen through a recording proxy in front of the broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing import RunningBroker
from tests.e2e.recording_proxy import RecordingProxy, proxied_broker

from .support import (
    classpath,
    client_requests,
    consume,
    create_topic,
    old_client_classpath,
    run_java,
    transactional_epochs,
)

PRODUCE, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 0, 24, 25, 26, 28


@pytest.fixture(scope="module")
def proxied(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RecordingProxy, RunningBroker]]:
    classpath()
    with proxied_broker(
        tmp_path_factory.mktemp("txn-v2"), group_initial_rebalance_delay_ms="0"
    ) as both:
        yield both


def commit_abort(proxy: RecordingProxy, topic: str, txn_id: str, cp: str | None = None) -> None:
    create_topic(proxy.address, topic, 3)
    out = run_java("JavaTransactions", proxy.address, topic, txn_id, "commit-abort", "20", cp=cp)
    assert out.split() == ["committed", "aborted", "committed", "fenced", "done"]
    committed = consume(proxy.address, topic, f"{txn_id}-rc", 21, "isolation.level=read_committed")
    assert sorted(r.value for r in committed.records) == sorted(
        [f"c{i}" for i in range(20)] + ["last"]
    )


def test_a_kafka_4_producer_uses_transactions_v2(proxied):
    proxy, broker = proxied
    proxy.clear()
    commit_abort(proxy, "tv2-topic", "tv2")
    sent = client_requests(proxy)
    assert sent[END_TXN] == {5}
    assert sent[PRODUCE] == {12}
    assert ADD_PARTITIONS_TO_TXN not in sent
    data_epochs, _ = transactional_epochs(broker, "tv2-topic")
    assert len(data_epochs) == 4  # one per transaction: commit, abort, commit, the zombie's


def test_consume_transform_produce_commits_offsets_without_add_offsets(proxied):
    proxy, _ = proxied
    source, sink, group = "tv2-source", "tv2-sink", "tv2-ctp"
    create_topic(proxy.address, source, 3)
    create_topic(proxy.address, sink, 1)
    out = run_java("JavaProducer", proxy.address, source, "30", "s", "5", "0")
    assert "done" in out
    proxy.clear()
    out = run_java("JavaTransactions", proxy.address, sink, "tv2-ctp", "copy", "30", source, group)
    assert out.split()[-1] == "done" and "copied 30" in out
    sent = client_requests(proxy)
    assert sent[TXN_OFFSET_COMMIT] == {5}
    assert ADD_OFFSETS_TO_TXN not in sent
    copied = consume(proxy.address, sink, "tv2-ctp-check", 30, "isolation.level=read_committed")
    assert sorted(r.value for r in copied.records) == sorted(f"xsv{i}" for i in range(30))
    assert consume(proxy.address, source, group, 0).records == []


def test_kafka_clients_3_9_keeps_transactions_v1(proxied):
    cp = old_client_classpath()
    proxy, broker = proxied
    proxy.clear()
    commit_abort(proxy, "tv1-topic", "tv1", cp)
    sent = client_requests(proxy)
    assert max(sent[END_TXN]) <= 4
    assert ADD_PARTITIONS_TO_TXN in sent
    assert max(sent[PRODUCE]) <= 11
    data_epochs, _ = transactional_epochs(broker, "tv1-topic")
    assert len(data_epochs) == 1
