"""What old message formats cost: Produce v2 (message set v1, converted to RecordBatch v2 by the
broker) against Produce v7 (RecordBatch v2, stored as it came), and Fetch v3 (down-converted)
against Fetch v12 (sendfile), on one in-process broker over a raw socket.

The requests are built once (kafka-python's protocol classes and record builders) and sent
``--requests`` times, pipelined ``--window`` deep, so the client costs next to nothing and the
figures are the broker's. The pure conversion functions are timed alone too, and, with kcat
installed, a real client's view: kcat (librdkafka) producing ``--kcat-records`` lines with
``broker.version.fallback=0.9.0`` (Produce v1, message format v0) against its default (Produce v7+,
RecordBatch v2), same codec.

    python benchmarks/old_formats.py [--records 100] [--size 100] [--requests 2000] [--codec none]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import struct
import subprocess
import time
import uuid
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from odradek.protocol import legacy
from odradek.testing import running_broker

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}


def message_set_v1(records: int, size: int, codec: int) -> bytes:
    builder = LegacyRecordBatchBuilder(1, codec, 1 << 24)
    for i in range(records):
        builder.append(i, 1_700_000_000_000 + i, b"key-%d" % i, b"x" * size)
    return bytes(builder.build())


def record_batch_v2(records: int, size: int, codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 24)
    for i in range(records):
        builder.append(i, 1_700_000_000_000 + i, b"key-%d" % i, b"x" * size, [])
    return bytes(builder.build())


def produce_frame(version: int, topic: str, records: bytes, correlation_id: int) -> bytes:
    topic_data = ProduceRequest[version].TopicProduceData
    fields: dict[str, Any] = {
        "acks": 1,
        "timeout_ms": 5000,
        "topic_data": [
            topic_data(
                name=topic,
                partition_data=[topic_data.PartitionProduceData(index=0, records=records)],
            )
        ],
    }
    if version >= 3:
        fields["transactional_id"] = None
    request = ProduceRequest[version](**fields)
    request.with_header(correlation_id=correlation_id, client_id="bench")
    return bytes(request.encode(header=True, framed=True))


def fetch_frame(version: int, topic: str, offset: int, max_bytes: int) -> bytes:
    topic_data = FetchRequest[version].FetchTopic
    fields: dict[str, Any] = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": max_bytes,
        "topics": [
            topic_data(
                topic=topic,
                partitions=[
                    topic_data.FetchPartition(
                        partition=0,
                        fetch_offset=offset,
                        partition_max_bytes=max_bytes,
                        current_leader_epoch=-1,
                        log_start_offset=-1,
                        last_fetched_epoch=-1,
                    )
                ],
            )
        ],
    }
    if version >= 4:
        fields.update(isolation_level=0, session_id=0, session_epoch=-1, rack_id="")
    request = FetchRequest[version](**fields)
    request.with_header(correlation_id=1, client_id="bench")
    return bytes(request.encode(header=True, framed=True))


def read_frame(sock: socket.socket) -> bytes:
    head = _read_exactly(sock, 4)
    (size,) = struct.unpack(">i", head)
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        out += chunk
    return bytes(out)


def pipelined(sock: socket.socket, frame: bytes, count: int, window: int) -> float:
    """Seconds to send ``frame`` ``count`` times and read every response."""
    started = time.perf_counter()
    sent = received = 0
    while received < count:
        burst = min(window - (sent - received), count - sent)
        if burst > 0:
            sock.sendall(frame * burst)
            sent += burst
        read_frame(sock)
        received += 1
    return time.perf_counter() - started


def create_topic(bootstrap: str) -> str:
    name = f"bench-old-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(timeout=30)
    return name


def kcat_produce(bootstrap: str, lines: bytes, codec: str, old: bool) -> float:
    """Seconds kcat takes to produce ``lines`` (acks=1) to a fresh topic."""
    kcat = shutil.which("kcat")
    assert kcat is not None
    topic = create_topic(bootstrap)
    legacy_args = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"]
    started = time.perf_counter()
    subprocess.run(
        [kcat, "-b", bootstrap, "-P", "-t", topic, "-z", codec, "-X", "linger.ms=5"]
        + ["-X", "request.required.acks=1"]
        + (legacy_args if old else []),
        input=lines,
        check=True,
        timeout=300,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100, help="records per request")
    parser.add_argument("--size", type=int, default=100, help="bytes per value")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--codec", choices=list(CODECS), default="none")
    parser.add_argument("--kcat-records", type=int, default=300_000)
    args = parser.parse_args()
    codec = CODECS[args.codec]
    old = message_set_v1(args.records, args.size, codec)
    new = record_batch_v2(args.records, args.size, codec)

    loops = 200
    started = time.perf_counter()
    for _ in range(loops):
        converted = legacy.to_record_batch(old)
    up = loops * args.records / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(loops):
        legacy.down_convert(converted, 1, 0)
    down = loops * args.records / (time.perf_counter() - started)
    print(f"conversion alone: up {up:,.0f} records/s, down {down:,.0f} records/s")

    with running_broker() as broker:
        host, port = broker.bootstrap.rsplit(":", 1)
        results: dict[str, float] = {}
        for name, version, records in (
            ("v2 batch, Produce v7", 7, new),
            ("v1 set, Produce v2", 2, old),
        ):
            topic = create_topic(broker.bootstrap)
            with socket.create_connection((host, int(port))) as sock:
                frame = produce_frame(version, topic, records, 1)
                pipelined(sock, frame, 50, args.window)  # warm up
                seconds = pipelined(sock, frame, args.requests, args.window)
                rate = args.requests * args.records / seconds
                results[name] = rate
                per_second = args.requests / seconds
                print(f"produce {name}: {rate:,.0f} records/s ({per_second:,.0f} requests/s)")
                for fetch_version in (12, 3):
                    fetch = fetch_frame(fetch_version, topic, 0, 1 << 20)
                    pipelined(sock, fetch, 5, 1)
                    count = 200
                    seconds = pipelined(sock, fetch, count, 1)
                    fetch_rate = count / seconds
                    print(f"  fetch v{fetch_version} of 1 MB from it: {fetch_rate:,.1f} fetches/s")
        ratio = results["v1 set, Produce v2"] / results["v2 batch, Produce v7"]
        print(f"old-format produce at {ratio:.2f} of the v2 path (target: at least 0.25)")
        if shutil.which("kcat"):
            lines = b"".join(b"%d %s\n" % (i, b"x" * args.size) for i in range(args.kcat_records))
            rates = {}
            for old_format in (False, True):
                seconds = kcat_produce(broker.bootstrap, lines, args.codec, old_format)
                rates[old_format] = args.kcat_records / seconds
                label = "Produce v1, message format v0" if old_format else "RecordBatch v2"
                print(f"kcat, {label}: {rates[old_format]:,.0f} records/s")
            print(f"kcat's old-format produce at {rates[True] / rates[False]:.2f} of its v2 rate")


if __name__ == "__main__":
    main()
