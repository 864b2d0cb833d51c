"""The registry in a three-broker cluster (real ZooKeeper, real broker processes): every broker
answers the same ids, registrations at once on every broker get distinct ids, and a
registration succeeds while the broker that led ``_schemas`` is down."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import requests

from odradek.testing import RunningCluster, wait_until
from tests.e2e.cluster.support import leader_of

TIMEOUT_S = 90


def registry_urls(cluster: RunningCluster) -> dict[int, str]:
    urls = {}
    for broker_id in cluster.brokers:
        if cluster.is_running(broker_id):
            found = wait_until(
                lambda b=broker_id: re.search(
                    r"schema registry on (http://[^/\s]+)/", cluster.output(b)
                ),
                what=f"broker {broker_id}'s registry",
            )
            urls[broker_id] = found.group(1)
    return urls


def register(url: str, subject: str, schema: str) -> int:
    answer = requests.post(
        f"{url}/subjects/{subject}/versions", json={"schema": schema}, timeout=TIMEOUT_S
    )
    assert answer.status_code == 200, answer.text
    schema_id = answer.json()["id"]
    assert isinstance(schema_id, int)
    return schema_id


def schema_of(url: str, schema_id: int) -> Any:
    return requests.get(f"{url}/schemas/ids/{schema_id}", timeout=TIMEOUT_S).json()


def test_every_broker_answers_the_same_ids(tmp_path: Path) -> None:
    settings = {"schema.registry.listener": "127.0.0.1:0"}
    with RunningCluster(tmp_path, settings=settings) as cluster:
        urls = registry_urls(cluster)
        first = register(urls[1], "a", '"int"')
        for url in urls.values():
            assert schema_of(url, first) == {"schema": '"int"'}

        # One registration on each broker at once: distinct ids, the same everywhere.
        ids: dict[int, int] = {}

        def on(broker_id: int) -> None:
            primitive = ("long", "string", "bytes")[broker_id - 1]
            ids[broker_id] = register(urls[broker_id], f"s{broker_id}", f'"{primitive}"')

        threads = [threading.Thread(target=on, args=(b,)) for b in urls]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT_S)
        assert len(set(ids.values())) == 3 and first not in ids.values()
        answers = {b: [schema_of(url, i) for i in sorted(ids.values())] for b, url in urls.items()}
        assert answers[1] == answers[2] == answers[3]

        # The leader of _schemas goes down: another broker still registers.
        leader = leader_of(cluster.bootstrap, "_schemas")
        assert leader in urls
        cluster.kill(leader)
        other = next(b for b in urls if b != leader)
        moved = register(urls[other], "after", '"double"')
        assert moved > max(ids.values())
        for broker_id, url in urls.items():
            if broker_id != leader:
                assert schema_of(url, moved) == {"schema": '"double"'}


def test_a_leader_validates_an_id_registered_through_another_broker(tmp_path: Path) -> None:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    settings = {"schema.registry.listener": "127.0.0.1:0"}
    with RunningCluster(tmp_path, settings=settings) as cluster:
        urls = registry_urls(cluster)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topic = NewTopic("readings", 1, 3, config={"confluent.value.schema.validation": "true"})
        admin.create_topics([topic])["readings"].result(TIMEOUT_S)
        leader = wait_until(lambda: leader_of(cluster.bootstrap, "readings") in urls)
        leader = leader_of(cluster.bootstrap, "readings")
        # Registered elsewhere: the leader's replay has not read it when the record comes.
        elsewhere = next(b for b in urls if b != leader)
        schema_id = register(urls[elsewhere], "readings-value", '"double"')
        errors: list[int] = []
        stored: list[int] = []

        def delivered(error: KafkaError | None, message: Any) -> None:
            if error is None:
                stored.append(message.offset())
            else:
                errors.append(error.code())

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
        for value in (b"\x00" + schema_id.to_bytes(4, "big") + bytes(8), b"raw"):
            producer.produce("readings", value=value, on_delivery=delivered)
            assert producer.flush(TIMEOUT_S) == 0
        assert (stored, errors) == ([0], [KafkaError.INVALID_RECORD])
