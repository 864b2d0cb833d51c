"""``kafka-topics --describe`` on a topic of 2,500 partitions, which Kafka's admin client asks
for with DescribeTopicPartitions in pages of at most 2,000 partitions (the broker's
``max.request.partition.size.limit``), following the cursor."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator

import pytest

from odradek.testing import RunningBroker
from tests.e2e.recording_proxy import RecordingProxy, proxied_broker

from .support import TOPICS_TOOL, classpath, create_topic, run_java

DESCRIBE_TOPIC_PARTITIONS = 75
PARTITIONS = 2500


@pytest.fixture(scope="module")
def proxied(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RecordingProxy, RunningBroker]]:
    classpath()
    with proxied_broker(tmp_path_factory.mktemp("describe")) as both:
        yield both


def test_kafka_topics_describes_2500_partitions_through_pages(proxied):
    proxy, _ = proxied
    topic = "wide"
    create_topic(proxy.address, topic, PARTITIONS)
    proxy.clear()
    out = run_java(
        TOPICS_TOOL, "--bootstrap-server", proxy.address, "--describe", "--topic", topic,
        timeout=120,
    )  # fmt: skip
    header, *lines = out.strip().splitlines()
    assert re.search(rf"Topic: {topic}\s.*PartitionCount: {PARTITIONS}\s", header), header
    described = [int(re.search(r"Partition: (\d+)\s+Leader: \d+", line).group(1)) for line in lines]
    assert described == list(range(PARTITIONS))
    pages = [f for f in proxy.frames if struct.unpack_from(">h", f)[0] == DESCRIBE_TOPIC_PARTITIONS]
    assert len(pages) == 2  # 2,000 partitions, then the cursor's 500
