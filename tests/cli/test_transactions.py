"""``odradek transactions``: list, describe, describe-producers and abort, as a user runs them
against a broker with an open transaction of a confluent-kafka producer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import RunningBroker, running_broker

from .support import odradek, table_after

TOPIC, TID = "cli-transactions", "cli-txn"


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with running_broker(transaction_state_log_num_partitions="2") as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        yield running


def lso_and_end(bootstrap: str, partition: int) -> tuple[int, int]:
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "cli", "isolation.level": isolation}
        )
        try:
            ends.append(consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), 10)[1])
        finally:
            consumer.close()
    return ends[0], ends[1]


def test_list_describe_and_abort_an_open_transaction(broker: RunningBroker) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": TID})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"a", partition=1)
    producer.produce(TOPIC, value=b"b", partition=1)
    producer.flush(30)
    server = ["--bootstrap-server", broker.bootstrap]

    listed = table_after(odradek("transactions", "list", *server).stdout, "TransactionalId")
    assert {"TransactionalId": TID, "Coordinator": "1", "State": "Ongoing"}.items() <= next(
        row for row in listed if row["TransactionalId"] == TID
    ).items()
    assert (
        table_after(
            odradek("transactions", "list", "--state", "CompleteCommit", *server).stdout,
            "TransactionalId",
        )
        == []
    )

    (described,) = table_after(
        odradek("transactions", "describe", "--transactional-id", TID, *server).stdout,
        "CoordinatorId",
    )
    assert (described["TransactionState"], described["TopicPartitions"]) == (
        "Ongoing",
        f"{TOPIC}-1",
    )
    missing = odradek(
        "transactions", "describe", "--transactional-id", "nope", *server, check=False
    )
    assert missing.returncode == 2 and "does not exist" in missing.stdout

    (producer_row,) = table_after(
        odradek(
            "transactions", "describe-producers", "--topic", TOPIC, "--partition", "1", *server
        ).stdout,
        "ProducerId",
    )
    assert producer_row["CurrentTransactionStartOffset"] == "0"
    assert producer_row["ProducerId"] == described["ProducerId"]
    assert lso_and_end(broker.bootstrap, 1) == (0, 2)

    wrong = odradek(
        "transactions", "abort", "--topic", TOPIC, "--partition", "1", "--start-offset", "5",
        *server, check=False,
    )  # fmt: skip
    assert wrong.returncode == 1 and "no open transaction" in wrong.stderr
    aborted = odradek(
        "transactions", "abort", "--topic", TOPIC, "--partition", "1", "--start-offset", "0",
        *server,
    )  # fmt: skip
    assert "Aborted the transaction" in aborted.stdout
    assert lso_and_end(broker.bootstrap, 1) == (3, 3)  # two records and the marker, all stable
