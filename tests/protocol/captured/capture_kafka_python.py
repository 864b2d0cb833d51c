"""Record the request frames kafka-python sends when pinned to old ``api_version`` settings.

Run by hand (``python tests/protocol/captured/capture_kafka_python.py``, with odradek importable);
it starts a broker, runs a producer (uncompressed and gzip) and a group consumer per setting,
and merges the first frame of every (API key, version) it saw into ``kafka_python.json``
beside this file, as hex (frames already there are kept: remove the file to capture afresh).
The broker need not serve a version for its request to be recorded: what matters is the bytes
the old client writes.
"""

from __future__ import annotations

import json
import logging
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.net import transport

from odradek.testing import running_broker

API_VERSIONS = [
    (0, 8, 1),
    (0, 8, 2),
    (0, 9),
    (0, 10, 0),
    (0, 10, 1),
    (0, 11),
    (1, 0),
    (1, 1),
    (2, 0),
    (2, 1),
    (2, 3),
    (2, 5),
    (2, 8),
]
OUT = Path(__file__).with_name("kafka_python.json")

_sent: list[bytes] = []


def _record(original: Any) -> Any:
    def write(self: Any, data: Any) -> Any:
        _sent.append(bytes(data))
        return original(self, data)

    return write


def _record_lines(original: Any) -> Any:
    def writelines(self: Any, chunks: Any) -> Any:
        chunks = [bytes(c) for c in chunks]
        _sent.append(b"".join(chunks))
        return original(self, chunks)

    return writelines


def frames(chunks: list[bytes]) -> list[bytes]:
    """Whole request frames (length prefix dropped) out of what one client wrote, in order."""
    data = b"".join(chunks)
    out = []
    position = 0
    while position + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, position)
        out.append(data[position + 4 : position + 4 + size])
        position += 4 + size
    return out


def exercise(bootstrap: str, api_version: tuple[int, ...]) -> None:
    topic = "captured-" + "-".join(map(str, api_version))
    for codec in (None, "gzip"):
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            api_version=api_version,
            compression_type=codec,
            enable_idempotence=False,
            max_block_ms=5000,
            request_timeout_ms=5000,
        )
        for i in range(3):
            producer.send(
                topic, key=b"k%d" % i, value=b"value %d" % i, timestamp_ms=1_700_000_000_000 + i
            )
        producer.flush(5)
        producer.close(5)
    # before 0.9 there are no broker-side groups: partitions are assigned, offsets committed
    group_managed = api_version >= (0, 9)
    consumer = KafkaConsumer(
        *([topic] if group_managed else []),
        bootstrap_servers=bootstrap,
        api_version=api_version,
        group_id="captured-group",
        auto_offset_reset="earliest",
        request_timeout_ms=6000,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        fetch_max_wait_ms=100,
    )
    if not group_managed:
        consumer.assign([TopicPartition(topic, 0)])
    deadline = time.monotonic() + 8
    got = 0
    while got < 6 and time.monotonic() < deadline:
        got += sum(len(r) for r in consumer.poll(200).values())
    try:
        consumer.commit()
    except Exception as e:  # an old version the broker does not serve yet
        logging.warning("commit with %s failed: %s", api_version, e)
    consumer.close()


def main() -> None:
    transport.KafkaTCPTransport.write = _record(transport.KafkaTCPTransport.write)  # type: ignore[method-assign]
    transport.KafkaTCPTransport.writelines = _record_lines(transport.KafkaTCPTransport.writelines)  # type: ignore[method-assign]
    captured: dict[str, dict[str, Any]] = json.loads(OUT.read_text()) if OUT.exists() else {}
    with running_broker(Path(tempfile.mkdtemp())) as broker:
        for api_version in API_VERSIONS:
            _sent.clear()
            try:
                exercise(broker.bootstrap, api_version)
            except Exception as e:
                logging.warning("%s: %s", api_version, e)
            for frame in frames(_sent):
                key, version = struct.unpack_from(">hh", frame)
                name = f"{key}/v{version}"
                captured.setdefault(
                    name,
                    {
                        "api_key": key,
                        "api_version": version,
                        "client": f"kafka-python {kafka.__version__} api_version={api_version}",
                        "frame": frame.hex(),
                    },
                )
    OUT.write_text(
        json.dumps(
            dict(sorted(captured.items(), key=lambda kv: (kv[1]["api_key"], kv[1]["api_version"]))),
            indent=1,
        )
        + "\n"
    )
    print(f"{len(captured)} frames written to {OUT}")


if __name__ == "__main__":
    main()
