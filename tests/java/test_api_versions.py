"""Kafka 4.4's Java client opens every connection with ApiVersions v5 (KIP-1242): the first,
to a bootstrap server, names nothing; the next ones name the cluster and node the metadata said
they lead to, and are served, with no retry at an older version. Seen through a recording proxy
in front of the broker."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from odradek.protocol.api_versions_request import NO_NODE, decode_api_versions_request
from odradek.testing import RunningBroker
from tests.e2e.recording_proxy import RecordingProxy, proxied_broker

from .support import classpath, create_topic, produce

API_VERSIONS = 18


@pytest.fixture(scope="module")
def proxied(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RecordingProxy, RunningBroker]]:
    classpath()
    with proxied_broker(tmp_path_factory.mktemp("api-versions")) as both:
        yield both


def test_the_java_client_names_the_cluster_and_node_it_expects(proxied):
    proxy, broker = proxied
    create_topic(proxy.address, "av-topic", 1)
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    proxy.clear()
    produce(proxy.address, "av-topic", 5, "av")
    frames = [f for f in proxy.frames if struct.unpack_from(">h", f)[0] == API_VERSIONS]
    requests = [decode_api_versions_request(f) for f in frames]
    assert [header.api_version for header, _ in requests] == [5] * len(requests)
    expectations = [(r.cluster_id, r.node_id) for _, r in requests]
    assert (None, NO_NODE) in expectations  # the bootstrap connection
    (node_id,) = metadata.brokers
    assert (metadata.cluster_id, node_id) in expectations
