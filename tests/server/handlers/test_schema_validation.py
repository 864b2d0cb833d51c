"""Produce to topics that validate schema ids (confluent.key/value.schema.validation), called
directly: the refusal as Produce v8+ carries it, nothing appended, and an id the registry's
replay learns only when asked again."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, encode_batch
from odradek.server.services import BrokerServices
from tests.server.conftest import PRODUCE, now_ms

from .conftest import HandlerCaller

PRODUCE_V8 = 8


def wire(schema_id: int) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + b"avro bytes"


def batch(*values: bytes | None) -> bytes:
    return encode_batch([NewRecord(None, v) for v in values], now_ms=now_ms())


@dataclass(frozen=True)
class Use:
    """An id registered under the subject of the values of topic ``users``."""

    subjects: frozenset[str] = frozenset({"users-value"})
    record_names: tuple[str, ...] = ()


class Ids:
    """A registry's ids as the broker sees them: ``registered`` ids are known only after a
    replay (:meth:`refreshed`), as an id registered through another broker is."""

    def __init__(self, known: set[int], registered: set[int] | None = None) -> None:
        self.known = known
        self.registered = registered or set()
        self.replays = 0

    def get(self, schema_id: int, /) -> Use | None:
        return Use() if schema_id in self.known else None

    async def refreshed(self) -> None:
        self.replays += 1
        self.known |= self.registered


def produce(handlers: HandlerCaller, topic: str, records: bytes) -> Any:
    response = handlers.call(
        PRODUCE,
        PRODUCE_V8,
        acks=1,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    )
    ((partition,),) = [t.partition_responses for t in response.responses]
    return partition


def validated_topic(services: BrokerServices, name: str = "users") -> str:
    configs = {"confluent.value.schema.validation": "true"}
    asyncio.run(services.topics.create_topic(name, 1, configs=configs))
    return name


def log_end(services: BrokerServices, topic: str) -> int:
    partition = services.topics.partition(topic, 0)
    assert partition is not None
    return partition.log.log_end_offset


def test_a_batch_with_one_record_without_an_id_is_refused_whole(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    services.replicas.schema_ids = Ids({1})
    topic = validated_topic(services)
    refused = produce(handlers, topic, batch(wire(1), b"plain json", wire(1), wire(9)))
    assert refused.error_code == ErrorCode.invalid_record
    assert [e.batch_index for e in refused.record_errors] == [1, 3]
    assert "schema id 9" in refused.record_errors[1].batch_index_error_message
    assert "users-0" in refused.error_message
    assert log_end(services, topic) == 0

    kept = produce(handlers, topic, batch(wire(1), None))
    assert (kept.error_code, kept.base_offset) == (ErrorCode.none, 0)
    assert log_end(services, topic) == 2


def test_an_id_registered_elsewhere_is_learnt_by_a_replay(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    ids = Ids(set(), registered={5})
    services.replicas.schema_ids = ids
    topic = validated_topic(services)
    assert produce(handlers, topic, batch(wire(5))).error_code == ErrorCode.none
    assert ids.replays == 1
    # Known now: no replay. A missing prefix: a replay could not help.
    assert produce(handlers, topic, batch(wire(5))).error_code == ErrorCode.none
    assert produce(handlers, topic, batch(b"raw")).error_code == ErrorCode.invalid_record
    assert ids.replays == 1
    # Unknown after the replay too: refused.
    assert produce(handlers, topic, batch(wire(6))).error_code == ErrorCode.invalid_record
    assert ids.replays == 2
    assert log_end(services, topic) == 2


def test_without_a_registry_a_validated_topic_refuses_and_others_accept(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    assert services.replicas.schema_ids is None
    topic = validated_topic(services)
    refused = produce(handlers, topic, batch(wire(1)))
    assert refused.error_code == ErrorCode.invalid_record
    assert "serves no schema registry" in refused.error_message
    asyncio.run(services.topics.create_topic("plain", 1))
    assert produce(handlers, "plain", batch(b"anything")).error_code == ErrorCode.none


def test_refusals_are_told_by_topic(handlers: HandlerCaller, services: BrokerServices) -> None:
    refused: list[str] = []
    services.replicas.schema_refusal_listeners.append(refused.append)
    services.replicas.schema_ids = Ids({1})
    topic = validated_topic(services)
    produce(handlers, topic, batch(b"raw"))
    produce(handlers, topic, batch(wire(1)))
    assert refused == [topic]
