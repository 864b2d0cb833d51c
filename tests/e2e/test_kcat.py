"""kcat (Debian's, built on its own librdkafka) against a real odradek broker, as a subprocess.

kcat consumes without ``-G``: it assigns partitions itself and uses no group.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from .conftest import COMPRESSIBLE, assert_per_key_order, keyed_messages, stored_codecs

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed")

TIMEOUT_S = 30


def kcat(bootstrap: str, *args: str, stdin: bytes | None = None) -> str:
    """Run kcat and return its stdout; it must exit 0."""
    assert KCAT is not None
    done = subprocess.run(
        [KCAT, "-b", bootstrap, "-m", "10", *args],
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"kcat {' '.join(args)} failed:\n{done.stderr.decode()}"
    return done.stdout.decode()


def produce_lines(bootstrap: str, topic: str, lines: list[str], *args: str) -> None:
    kcat(bootstrap, "-P", "-t", topic, *args, stdin="".join(f"{line}\n" for line in lines).encode())


def consume_json(bootstrap: str, topic: str, *args: str) -> list[dict[str, Any]]:
    """The records from ``-o beginning`` (or where ``args`` say) to the end, as -J prints them."""
    out = kcat(bootstrap, "-C", "-t", topic, "-e", "-J", *(args or ("-o", "beginning")))
    return [json.loads(line) for line in out.splitlines() if line]


def test_keyed_messages_keep_their_order_within_a_key(bootstrap, make_topic, topic_name):
    topic = make_topic(topic_name, partitions=3)
    sent = keyed_messages()
    produce_lines(bootstrap, topic, [f"{k.decode()}:{v.decode()}" for k, v in sent], "-K", ":")

    records = consume_json(bootstrap, topic)
    assert len(records) == len(sent)
    assert_per_key_order(
        [(r["partition"], r["key"].encode(), r["payload"].encode()) for r in records], sent
    )
    for partition in range(3):
        offsets = [r["offset"] for r in records if r["partition"] == partition]
        assert offsets == list(range(len(offsets)))


# kcat's librdkafka (2.0.2) compresses with gzip, snappy or lz4 only for brokers that advertise
# Produce v0 (and FindCoordinator v0 for lz4); it then negotiates Produce v3+ and Fetch v4+ and
# sends RecordBatch v2, which the broker stores as it came, in the codec it came in.
@pytest.mark.parametrize(
    "codec",
    ["gzip", "snappy", "lz4", "zstd"],
)
def test_compressed_batches_round_trip(broker, bootstrap, make_topic, topic_name, codec):
    topic = make_topic(topic_name)
    values = [f"{COMPRESSIBLE.decode()}{i}" for i in range(40)]
    produce_lines(bootstrap, topic, values, "-z", codec, "-X", "linger.ms=50")

    out = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%o %s\n")
    assert out.splitlines() == [f"{i} {v}" for i, v in enumerate(values)]
    assert stored_codecs(broker, topic) == {codec}


def test_headers_null_keys_and_tombstones(bootstrap, make_topic, topic_name):
    topic = make_topic(topic_name)
    # With -Z an empty key or value is sent as null (a null value is a tombstone).
    produce_lines(bootstrap, topic, ["k:v", ":no key", "gone:"], "-K", ":", "-Z", "-H", "trace=abc")
    produce_lines(bootstrap, topic, ["empty:"], "-K", ":", "-H", "a=1", "-H", "a=2", "-H", "e=")

    records = consume_json(bootstrap, topic)
    assert [(r["key"], r["payload"]) for r in records] == [
        ("k", "v"),
        (None, "no key"),
        ("gone", None),
        ("empty", ""),  # without -Z, empty stays empty, not null
    ]
    assert [r["headers"] for r in records] == [["trace", "abc"]] * 3 + [
        ["a", "1", "a", "2", "e", ""]
    ]

    # %K and %S say -1 for null and 0 for empty (kcat's -Z prints both as NULL).
    out = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k|%K|%s|%S|%h\n")
    assert out.splitlines() == [
        "k|1|v|1|trace=abc",
        "|-1|no key|6|trace=abc",
        "gone|4||-1|trace=abc",
        "empty|5||0|a=1,a=2,e=",
    ]


def test_offsets_by_timestamp_and_watermarks(bootstrap, make_topic, topic_name):
    topic = make_topic(topic_name, partitions=2)
    # Two kcat runs: the second one's records carry later create times than the first's.
    produce_lines(bootstrap, topic, ["a0", "a1", "a2"], "-p", "0")
    produce_lines(bootstrap, topic, ["b0", "b1"], "-p", "0")
    records = consume_json(bootstrap, topic, "-p", "0", "-o", "beginning")
    assert [(r["offset"], r["payload"], r["tstype"]) for r in records] == [
        (0, "a0", "create"),
        (1, "a1", "create"),
        (2, "a2", "create"),
        (3, "b0", "create"),
        (4, "b1", "create"),
    ]
    first_b = records[3]["ts"]
    assert first_b > max(r["ts"] for r in records[:3])
    last = max(r["ts"] for r in records)

    # -Q: ListOffsets by timestamp; -1 and -2 ask for the high and low watermarks.
    out = kcat(
        bootstrap,
        "-Q",
        "-t",
        f"{topic}:0:{first_b}",
        "-t",
        f"{topic}:1:{first_b}",
    )
    assert sorted(out.splitlines()) == [f"{topic} [0] offset 3", f"{topic} [1] offset -1"]
    out = kcat(bootstrap, "-Q", "-t", f"{topic}:0:-1")
    assert out.splitlines() == [f"{topic} [0] offset 5"]
    out = kcat(bootstrap, "-Q", "-t", f"{topic}:0:-2", "-t", f"{topic}:1:-1")
    assert sorted(out.splitlines()) == [f"{topic} [0] offset 0", f"{topic} [1] offset 0"]
    out = kcat(bootstrap, "-Q", "-t", f"{topic}:0:{last + 1}")
    assert out.splitlines() == [f"{topic} [0] offset -1"]

    # -o s@ts starts at the first record at or after ts.
    later = consume_json(bootstrap, topic, "-p", "0", "-o", f"s@{first_b}")
    assert [r["payload"] for r in later] == ["b0", "b1"]
    # absolute and relative start offsets
    out = kcat(bootstrap, "-C", "-t", topic, "-p", "0", "-o", "2", "-e", "-f", "%o:%s\n")
    assert out.splitlines() == ["2:a2", "3:b0", "4:b1"]
    out = kcat(bootstrap, "-C", "-t", topic, "-p", "0", "-o", "-2", "-e", "-f", "%o:%s\n")
    assert out.splitlines() == ["3:b0", "4:b1"]


def test_metadata_listing(bootstrap, broker, make_topic, topic_name):
    topic = make_topic(topic_name, partitions=3)
    listing = json.loads(kcat(bootstrap, "-L", "-J", "-t", topic))
    assert listing["brokers"] == [{"id": 1, "name": bootstrap}]
    assert listing["controllerid"] == 1
    (described,) = listing["topics"]
    assert described["topic"] == topic
    assert described["partitions"] == [
        {"partition": p, "leader": 1, "replicas": [{"id": 1}], "isrs": [{"id": 1}]}
        for p in range(3)
    ]
    everything = json.loads(kcat(bootstrap, "-L", "-J"))
    assert topic in {t["topic"] for t in everything["topics"]}


def test_producing_to_an_unknown_topic_creates_it(bootstrap, topic_name):
    produce_lines(bootstrap, topic_name, ["first"])
    listing = json.loads(kcat(bootstrap, "-L", "-J", "-t", topic_name))
    (described,) = listing["topics"]
    assert "error" not in described
    assert [p["partition"] for p in described["partitions"]] == [0]  # num.partitions=1
    assert [r["payload"] for r in consume_json(bootstrap, topic_name)] == ["first"]


# librdkafka without ApiVersions (api.version.request=false) speaks what its
# broker.version.fallback had: 0.8.2 → Produce v0 / Fetch v0, 0.9.0 → Produce v1 / Fetch v1,
# both with message format v0 (LZ4 with Kafka's broken frame checksum). From 0.10 on it asks
# ApiVersions regardless and uses RecordBatch v2.
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("fallback", ["0.8.2", "0.9.0"])
def test_old_protocol_round_trip(broker, bootstrap, make_topic, topic_name, fallback, codec):
    topic = make_topic(topic_name)
    old = ("-X", "api.version.request=false", "-X", f"broker.version.fallback={fallback}")
    values = [f"{COMPRESSIBLE.decode()}{i}" for i in range(40)]
    produce_lines(bootstrap, topic, values, "-z", codec, "-X", "linger.ms=50", "-K", ":", *old)

    out = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%o %s\n", *old)
    assert out.splitlines() == [f"{i} {v}" for i, v in enumerate(values)]
    assert stored_codecs(broker, topic) == {codec}
    # a current reader gets the same records from the RecordBatch v2 stored
    out = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%o %s\n")
    assert out.splitlines() == [f"{i} {v}" for i, v in enumerate(values)]
