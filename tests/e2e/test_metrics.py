"""``/metrics`` of a real broker under load from confluent-kafka: the counters move by what the
clients sent and read, a scrape during the load answers, and a group's lag is the high
watermark minus its commit."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.protocol.errors import ErrorCode
from odradek.testing import (
    RunningBroker,
    TestCertificateAuthority,
    running_broker,
    tls_broker_settings,
    wait_until,
)
from tests.server.conftest import KafkaConnection, batch_of

from .conftest import create_topics
from .metrics_support import Scrape, scrape

RECORDS = 20_000
VALUE = b"v" * 100


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RunningBroker]:
    with running_broker(tmp_path, metrics_listener="127.0.0.1:0") as running:
        yield running


def _address(broker: RunningBroker) -> str:
    assert broker.broker is not None and broker.broker.metrics is not None
    host, port = broker.broker.metrics.bound
    return f"{host}:{port}"


def _scrape_until_stopped(address: str, stop: threading.Event, scrapes: list[Scrape]) -> None:
    while not stop.is_set():
        scrapes.append(scrape(address))
        stop.wait(0.05)


def test_counters_move_by_the_records_produced_and_fetched(broker: RunningBroker) -> None:
    address = _address(broker)
    create_topics(broker.bootstrap, {"load": 3})
    stop = threading.Event()
    during: list[Scrape] = []
    scraper = threading.Thread(target=_scrape_until_stopped, args=(address, stop, during))
    scraper.start()
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(RECORDS):
            producer.produce("load", VALUE, partition=i % 3)
            if i % 1000 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
    finally:
        stop.set()
        scraper.join(30)
    assert during  # scrapes answered while the load ran
    produced = scrape(address)
    assert (
        produced.value("kafka_server_brokertopicmetrics_messagesin_total", topic="load") == RECORDS
    )
    bytes_in = produced.value("kafka_server_brokertopicmetrics_bytesin_total", topic="load")
    assert RECORDS * len(VALUE) < bytes_in < RECORDS * (len(VALUE) + 30)
    # Batches are stored as they came: the logs hold exactly the bytes counted in.
    assert produced.total("kafka_log_log_size", topic="load") == bytes_in
    assert produced.total("kafka_log_log_logendoffset", topic="load") == RECORDS
    assert produced.total("kafka_log_log_numlogsegments", topic="load") == 3
    assert produced.value("kafka_network_requestmetrics_requests_total", request="Produce") > 0
    assert produced.value(
        "kafka_network_requestmetrics_totaltime_seconds_count", request="Produce"
    ) == produced.value("kafka_network_requestmetrics_requests_total", request="Produce")
    assert produced.value("kafka_server_brokertopicmetrics_bytesout_total", topic="load") == 0
    assert produced.value("kafka_server_replicamanager_leadercount") >= 3
    assert produced.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert (
        produced.value("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT")
        >= 1
    )
    # Every scrape during the load saw the counters where the next one found them or below.
    seen = [
        s.value("kafka_server_brokertopicmetrics_messagesin_total", topic="load") for s in during
    ]
    assert seen == sorted(seen) and seen[-1] <= RECORDS

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("load", p, 0) for p in range(3)])
    read = 0
    try:
        while read < RECORDS:
            for message in consumer.consume(1000, timeout=10):
                assert message.error() is None
                read += 1
    finally:
        consumer.close()
    fetched = scrape(address)
    # Each stored byte went out at least once (a batch may be sent again in a later fetch).
    assert fetched.value("kafka_server_brokertopicmetrics_bytesout_total", topic="load") >= bytes_in
    assert (
        fetched.value("kafka_server_brokertopicmetrics_totalfetchrequests_total", topic="load") > 0
    )
    assert (
        fetched.value("kafka_server_brokertopicmetrics_failedfetchrequests_total", topic="load")
        == 0
    )
    consumer_fetches = fetched.value("kafka_network_requestmetrics_requests_total", request="Fetch")
    assert consumer_fetches > 0
    # Kafka counts a consumer's fetch under "Fetch" and again under "FetchConsumer".
    assert (
        fetched.value("kafka_network_requestmetrics_requests_total", request="FetchConsumer")
        == consumer_fetches
    )
    assert (
        fetched.value("kafka_network_requestmetrics_requests_total", request="FetchFollower") == 0
    )


def test_errors_are_counted_by_code(broker: RunningBroker) -> None:
    address = _address(broker)
    create_topics(broker.bootstrap, {"small": 1})
    with KafkaConnection(broker.bootstrap) as connection:
        # A partition the topic does not have, and an offset past its end.
        assert connection.produce("small", 5, batch_of(b"x")).error_code == (
            ErrorCode.unknown_topic_or_partition
        )
        assert connection.produce("small", 0, batch_of(b"x")).error_code == ErrorCode.none
        assert connection.fetch("small", 0, 99).error_code == ErrorCode.offset_out_of_range
    answered = scrape(address)
    assert (
        answered.value(
            "kafka_network_requestmetrics_errors_total",
            request="Produce",
            error="UNKNOWN_TOPIC_OR_PARTITION",
        )
        == 1
    )
    assert (
        answered.value(
            "kafka_network_requestmetrics_errors_total",
            request="Fetch",
            error="OFFSET_OUT_OF_RANGE",
        )
        == 1
    )
    small = {"topic": "small"}
    produce_requests = "kafka_server_brokertopicmetrics_totalproducerequests_total"
    assert answered.value(produce_requests, **small) == 2
    assert (
        answered.value("kafka_server_brokertopicmetrics_failedproducerequests_total", **small) == 1
    )
    assert answered.value("kafka_server_brokertopicmetrics_failedfetchrequests_total", **small) == 1
    assert answered.value("kafka_server_brokertopicmetrics_messagesin_total", **small) == 1


def test_request_time_is_split_into_queue_local_remote_and_send(broker: RunningBroker) -> None:
    address = _address(broker)
    create_topics(broker.bootstrap, {"waited": 1})
    with KafkaConnection(broker.bootstrap) as connection:
        assert connection.produce("waited", 0, batch_of(b"x")).error_code == ErrorCode.none
        # At the log end with min_bytes: the Fetch waits out max_wait_ms in the purgatory.
        waited = connection.fetch("waited", 0, 1, max_wait_ms=100, min_bytes=1)
        assert waited.error_code == ErrorCode.none
    answered = scrape(address)
    prefix = "kafka_network_requestmetrics_"
    parts = ("requestqueuetime", "localtime", "remotetime", "responsesendtime")
    for request in ("Produce", "Fetch", "Metadata"):
        handled = answered.value(prefix + "requests_total", request=request)
        assert handled >= 1
        for part in (*parts, "totaltime"):
            # Every request is counted in every part (0 for a part it spent no time in).
            assert answered.value(prefix + part + "_seconds_count", request=request) == handled
        summed = sum(answered.value(prefix + p + "_seconds_sum", request=request) for p in parts)
        total = answered.value(prefix + "totaltime_seconds_sum", request=request)
        assert summed == pytest.approx(total, rel=1e-6, abs=1e-9)
    # Only the Fetch waited: its remote time is there, Metadata's is none.
    assert answered.value(prefix + "remotetime_seconds_sum", request="Fetch") > 0
    assert answered.value(prefix + "remotetime_seconds_sum", request="Metadata") == 0
    # The cleaner runs (log.cleaner.enable is on by default) and has looked for work.
    assert answered.value("kafka_log_logcleanermanager_time_since_last_run_ms") >= 0
    assert "kafka_log_logcleaner_cleaner_recopy_percent" in answered.text


def test_a_join_held_for_its_rebalance_is_remote_time(broker: RunningBroker) -> None:
    """A second member's JoinGroup waits until the first member rejoins: that wait is
    RemoteTime (Kafka parks joins in its purgatory), not LocalTime."""
    address = _address(broker)
    create_topics(broker.bootstrap, {"joined": 2})
    config = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": "joiners",
        "heartbeat.interval.ms": 200,
        "session.timeout.ms": 6000,
    }
    first, second = Consumer(config), Consumer(config)
    try:
        first.subscribe(["joined"])
        wait_until(lambda: first.poll(0.05) is None and first.assignment(), 30, what="first")
        second.subscribe(["joined"])

        def both_assigned() -> bool:
            first.poll(0.05)
            second.poll(0.05)
            return len(first.assignment()) == len(second.assignment()) == 1

        wait_until(both_assigned, 30, interval_s=0, what="both members assigned")
    finally:
        first.close()
        second.close()
    answered = scrape(address)
    prefix = "kafka_network_requestmetrics_"
    remote = answered.value(prefix + "remotetime_seconds_sum", request="JoinGroup")
    local = answered.value(prefix + "localtime_seconds_sum", request="JoinGroup")
    assert remote > local, (remote, local)


def test_group_lag_is_the_high_watermark_minus_the_committed_offset(
    broker: RunningBroker,
) -> None:
    address = _address(broker)
    create_topics(broker.bootstrap, {"lagged": 1})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(50):
        producer.produce("lagged", VALUE, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers"})
    try:
        consumer.commit(offsets=[TopicPartition("lagged", 0, 20)], asynchronous=False)
        labels = {"consumergroup": "readers", "topic": "lagged", "partition": "0"}
        first = scrape(address)
        assert first.value("kafka_consumergroup_current_offset", **labels) == 20
        assert first.value("kafka_consumergroup_lag", **labels) == 30
        assert first.value("kafka_consumergroup_state", consumergroup="readers", state="Empty") == 1
        assert first.value("kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1
        consumer.commit(offsets=[TopicPartition("lagged", 0, 45)], asynchronous=False)
        assert scrape(address).value("kafka_consumergroup_lag", **labels) == 5
    finally:
        consumer.close()


def test_without_metrics_listener_nothing_is_counted_or_served(tmp_path: Path) -> None:
    with running_broker(tmp_path) as plain:
        assert plain.broker is not None
        assert plain.broker.metrics is None
        assert plain.broker.services.counters is None


def test_metrics_and_the_console_over_tls(tmp_path: Path) -> None:
    ca = TestCertificateAuthority(tmp_path / "certs")
    server = ca.issue("broker", {"CN": "localhost"}, server=True)
    settings = {
        "metrics.listener": "https://127.0.0.1:0",
        **tls_broker_settings(ca, server, "metrics"),
    }
    broker = RunningBroker(tmp_path / "data", settings).start()
    try:
        address = _address(broker)
        metrics = requests.get(f"https://{address}/metrics", verify=ca.ca_file, timeout=30)
        assert metrics.status_code == 200
        assert "kafka_server_replicamanager_partitioncount" in metrics.text
        page = requests.get(f"https://{address}/", verify=ca.ca_file, timeout=30)
        assert page.status_code == 200
        assert "/static/app.js" in page.text
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://{address}/metrics", timeout=30)
    finally:
        broker.stop()
