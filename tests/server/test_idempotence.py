"""An idempotent producer's retried batch is not appended twice (raw protocol)."""

from __future__ import annotations

import time

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import encode_batch
from odradek.testing import RunningBroker
from tests.server.conftest import KafkaConnection, unique_topic, values_of

INIT_PRODUCER_ID = 22


def _batch(producer_id: int, epoch: int, sequence: int, *values: bytes) -> bytes:
    return encode_batch(
        [(None, v, (), None) for v in values],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        now_ms=int(time.time() * 1000),
    )


def test_retry_returns_the_original_offset_and_gaps_are_refused(
    odradek_broker: RunningBroker,
) -> None:
    with KafkaConnection(odradek_broker.bootstrap) as kafka:
        topic = unique_topic("idem")
        kafka.create_topic(topic)
        init = kafka.request(
            INIT_PRODUCER_ID,
            4,
            transactional_id=None,
            transaction_timeout=60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        assert init.error_code == ErrorCode.none
        other = kafka.request(
            INIT_PRODUCER_ID,
            4,
            transactional_id=None,
            transaction_timeout=60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        assert other.producer_id != init.producer_id
        pid, epoch = init.producer_id, init.producer_epoch

        first = _batch(pid, epoch, 0, b"a", b"b")
        assert kafka.produce(topic, 0, first).base_offset == 0
        retried = kafka.produce(topic, 0, first)
        assert (retried.error_code, retried.base_offset) == (ErrorCode.none, 0)
        assert kafka.produce(topic, 0, _batch(pid, epoch, 2, b"c")).base_offset == 2

        gap = kafka.produce(topic, 0, _batch(pid, epoch, 9, b"z"))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number

        fetched = kafka.fetch(topic, 0, 0)
        assert values_of(fetched.records) == [b"a", b"b", b"c"]


def test_producer_ids_are_unique_across_restarts(odradek_broker: RunningBroker) -> None:
    def new_id() -> int:
        with KafkaConnection(odradek_broker.bootstrap) as kafka:
            response = kafka.request(
                INIT_PRODUCER_ID,
                4,
                transactional_id=None,
                transaction_timeout=60000,
                producer_id=-1,
                producer_epoch=-1,
            )
            assert response.error_code == ErrorCode.none
            return int(response.producer_id)

    before = new_id()
    odradek_broker.restart()
    assert new_id() > before
