"""The requests librdkafka 2.0 (Debian's kcat) sends, recorded by a proxy every connection passes
through, at each protocol generation it can speak: without ApiVersions as a 0.8.2 or 0.9.0
client would (``broker.version.fallback``), and with ApiVersions as it does by default. Each
generation produces in every codec, reads the records back and, with a group (``-G``), commits
them; with ``ODRADEK_CAPTURE=1`` the frames are written to tests/protocol/captured (its README).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from odradek.testing import RunningBroker

from .conftest import stored_codecs
from .recording_proxy import RecordingProxy, proxied_broker, record_captures
from .test_kcat import kcat as run_kcat

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed")

CLIENT_ID = "odradek-kcat-test"  # the proxy tells kcat's requests from the test's own by it
PRODUCE, FETCH, API_VERSIONS, JOIN_GROUP, OFFSET_COMMIT = 0, 1, 18, 11, 8
CODECS = ["none", "gzip", "snappy", "lz4"]
# broker.version.fallback → (Produce, Fetch) versions without ApiVersions; None: negotiated
GENERATIONS = {"0.8.2": (0, 0), "0.9.0": (1, 1), None: None}


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RecordingProxy, Any]]:
    with proxied_broker(tmp_path_factory.mktemp("kcat")) as both:
        yield both


@pytest.fixture(scope="module")
def broker(proxied: tuple[RecordingProxy, RunningBroker]) -> RunningBroker:
    """The broker behind the proxy (``make_topic`` uses it too)."""
    return proxied[1]


def value(codec: str, i: int) -> str:
    # librdkafka sends a batch uncompressed when the codec would not make it smaller
    return f"{codec} value {i} " + "odradek " * 8


def kcat(proxy: RecordingProxy, *args: str, stdin: bytes | None = None) -> str:
    return run_kcat(proxy.address, "-X", f"client.id={CLIENT_ID}", *args, stdin=stdin)


@pytest.mark.parametrize("fallback", list(GENERATIONS), ids=lambda f: f or "negotiated")
def test_kcat_generation_round_trip(proxied, make_topic, topic_name, fallback):
    old = (
        ()
        if fallback is None
        else ("-X", "api.version.request=false", "-X", f"broker.version.fallback={fallback}")
    )
    topic = make_topic(topic_name, partitions=len(CODECS))
    proxy, broker = proxied
    proxy.clear()
    produced: dict[str, list[bytes]] = {}
    for partition, codec in enumerate(CODECS):
        lines = "".join(f"k{i}:{value(codec, i)}\n" for i in range(10)).encode()
        before = len(proxy.sent_by(CLIENT_ID))
        kcat(
            proxy,
            "-P",
            "-t",
            topic,
            "-p",
            str(partition),
            "-K",
            ":",
            "-z",
            codec,
            "-X",
            "linger.ms=50",
            *old,
            stdin=lines,
        )
        produced[codec] = [
            f for f in proxy.sent_by(CLIENT_ID)[before:] if f[:2] == PRODUCE.to_bytes(2, "big")
        ]
        assert stored_codecs(broker, topic, partition) == {codec}

    out = kcat(
        proxy, "-C", "-t", topic, "-p", "3", "-o", "beginning", "-e", "-f", "%o %k %s\n", *old
    )
    assert out.splitlines() == [f"{i} k{i} {value('lz4', i)}" for i in range(10)]
    if fallback is None:  # librdkafka's groups need ApiVersions
        group = f"{topic_name}-group"
        out = kcat(
            proxy,
            "-C",
            "-G",
            group,
            "-e",
            "-X",
            "auto.offset.reset=earliest",
            "-f",
            "%p %o %s\n",
            topic,
        )
        assert sorted(out.splitlines()) == sorted(
            f"{p} {i} {value(codec, i)}" for p, codec in enumerate(CODECS) for i in range(10)
        )
        consumer = KafkaConsumer(bootstrap_servers=proxy.address, group_id=group)
        try:
            assert [consumer.committed(TopicPartition(topic, p)) for p in range(4)] == [10] * 4
        finally:
            consumer.close()

    requests = set(proxy.requests(CLIENT_ID))
    if GENERATIONS[fallback] is None:
        assert API_VERSIONS in {key for key, _ in requests}
        assert {JOIN_GROUP, OFFSET_COMMIT} <= {key for key, _ in requests}
    else:
        produce_version, fetch_version = GENERATIONS[fallback]
        assert {(PRODUCE, produce_version), (FETCH, fetch_version)} <= requests
        assert API_VERSIONS not in {key for key, _ in requests}
    setting = f"broker.version.fallback={fallback}" if fallback else "with ApiVersions"
    client = f"librdkafka 2.0.2 (kcat) {setting}"
    topics = {topic: len(CODECS)}
    everything = proxy.sent_by(CLIENT_ID)
    plain = [f for f in everything if f[:2] != PRODUCE.to_bytes(2, "big")] + produced["none"]
    setup = {FETCH: [f for frames in produced.values() for f in frames]}
    record_captures("librdkafka", client, plain, topics, setup=setup)
    for codec in CODECS[1:]:
        record_captures("librdkafka", client, produced[codec], topics, codec)
