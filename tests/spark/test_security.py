"""The project's own client, and the Spark source and sink on it, against a secured broker: over
SSL (the broker's certificate checked against the test CA, host name included), over SASL_SSL
with SCRAM-SHA-512 and with PLAIN, the settings given with Kafka's names (``kafka.*`` options in
Spark) — and a wrong password refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.client.core import ClientError
from odradek.client.data import DataClient, TopicPartition
from odradek.protocol.records import encode_batch, iter_records
from odradek.security.client_settings import ClientSecurity
from odradek.testing import RunningBroker, TestCertificateAuthority
from tests.e2e.security.conftest import SCRAM_USERS, add_scram_users, secure_settings

SCRAM_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="carol" '
    f'password="{SCRAM_USERS["carol"]}";'
)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningBroker, Path]]:
    ca = TestCertificateAuthority(tmp_path_factory.mktemp("certs"))
    server = ca.issue("broker", {"O": "odradek", "CN": "localhost"}, server=True)
    broker = RunningBroker(tmp_path_factory.mktemp("secured"), secure_settings(ca, server)).start()
    try:
        add_scram_users(broker)
        yield broker, ca.ca_file
    finally:
        broker.stop()


def settings(ca_file: Path, listener: str, **more: str) -> dict[str, str]:
    return {"security.protocol": listener, "ssl.truststore.location": str(ca_file), **more}


@pytest.mark.parametrize(
    ("listener", "extra"),
    [
        ("SSL", {}),
        ("SASL_SSL", {"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM_JAAS}),
        (
            "SASL_SSL",
            {"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"},
        ),
    ],
)
def test_the_data_client_writes_and_reads_over(
    secured: tuple[RunningBroker, Path], listener: str, extra: dict[str, str]
) -> None:
    broker, ca_file = secured
    security = ClientSecurity.from_config(settings(ca_file, listener, **extra))
    with DataClient(broker.listener_bootstrap(listener), security=security) as client:
        client.describe(["secured-data"], auto_create=True)
        tp = TopicPartition("secured-data", 0)
        base = client.produce(
            {tp: encode_batch([(None, b"over " + listener.encode(), (), None)], now_ms=1)}
        )[tp]
        fetched = client.fetch(tp, base)
        values = [r.value for _, records in iter_records(fetched.records) for r in records]
        assert values[0] == b"over " + listener.encode()


def test_a_wrong_password_is_refused(secured: tuple[RunningBroker, Path]) -> None:
    broker, ca_file = secured
    wrong = ClientSecurity.from_config(
        settings(
            ca_file,
            "SASL_SSL",
            **{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol", "sasl.password": "x"},
        )
    )
    with pytest.raises(ClientError, match="authentication failed"):
        DataClient(broker.listener_bootstrap("SASL_SSL"), security=wrong).describe(["any"])


def test_spark_reads_and_writes_over_sasl_ssl(
    spark: Any, secured: tuple[RunningBroker, Path]
) -> None:
    broker, ca_file = secured
    options = {
        "kafka.bootstrap.servers": broker.listener_bootstrap("SASL_SSL"),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.location": str(ca_file),
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": SCRAM_JAAS,
    }
    rows = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(20)], ["key", "value"])
    rows.write.format("odradek").mode("append").options(**options).option(
        "topic", "secured-spark"
    ).save()
    read = (
        spark.read.format("odradek")
        .options(**options)
        .option("subscribe", "secured-spark")
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
        .collect()
    )
    assert sorted((r.key, r.value) for r in read) == sorted((f"k{i}", f"v{i}") for i in range(20))
