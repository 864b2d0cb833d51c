"""What the bounds check (odradek.protocol.bounds) costs a request's decoding: microseconds per
request decoded as the broker decodes it, with the check (``after``) and without it (``before``:
``decode_request`` with the check replaced by nothing), kio's read alone and the check alone.
Frames as a consumer sends them: Fetch v15 of 1 and of 50 partitions, Metadata v12 for one topic
and for all; Produce v9 with one 16 KB batch is read by hand (its records stay views of the
frame) and checks its counts as it reads them, so it has no before. Each figure is the best of
``--rounds`` timings of ``--number`` calls, before and after alternating: the least disturbed by
other processes (on a shared machine a median measures the neighbours).

    python benchmarks/decode_bounds.py --rounds 15 --number 5000
"""

from __future__ import annotations

import argparse
import timeit
import uuid
from collections.abc import Callable
from typing import Any

from kio.serial import entity_reader

from odradek.protocol import messages, produce_request
from odradek.protocol.bounds import message_check
from odradek.protocol.messages import (
    RequestHeader,
    build,
    decode_request,
    encode_request,
    request_schema,
)
from odradek.protocol.records import NewRecord, encode_batch


def frame(api_key: int, version: int, **fields: Any) -> bytes:
    request = build(request_schema(api_key, version), fields)
    return encode_request(RequestHeader(api_key, version, 1, "rdkafka"), request)[4:]


def fetch_frame(partitions: int) -> bytes:
    return frame(
        1,
        15,
        max_wait=500,
        min_bytes=1,
        max_bytes=52428800,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic_id": uuid.uuid4(),
                "partitions": [
                    {"partition": p, "fetch_offset": 1000 + p, "partition_max_bytes": 1048576}
                    for p in range(partitions)
                ],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def produce_frame() -> bytes:
    batch = encode_batch([NewRecord(None, b"x" * 100) for _ in range(160)], now_ms=1)
    return frame(
        0,
        9,
        acks=-1,
        timeout=30000,
        topic_data=[{"name": "events", "partition_data": [{"index": 0, "records": batch}]}],
    )


def kio_alone(data: bytes) -> Callable[[], object]:
    api_key, version = int.from_bytes(data[:2]), int.from_bytes(data[2:4])
    schema = request_schema(api_key, version)
    header_reader = entity_reader(schema.__header_schema__)
    body_reader = entity_reader(schema)

    def decode() -> object:
        _, size = header_reader(data, 0)
        return body_reader(data, size)

    return decode


def best_us(fn: Callable[[], object], rounds: int, number: int) -> float:
    return min(timeit.repeat(fn, repeat=rounds, number=number)) / number * 1e6


def _no_check(schema: type) -> Callable[[object], int]:
    return lambda frame: 0


def before_and_after(data: bytes, rounds: int, number: int) -> tuple[float, float]:
    before, after = [], []
    real = messages.message_check
    for _ in range(rounds):
        messages.message_check = _no_check  # type: ignore[assignment]
        try:
            before.append(timeit.timeit(lambda: decode_request(data), number=number))
        finally:
            messages.message_check = real
        after.append(timeit.timeit(lambda: decode_request(data), number=number))
    return min(before) / number * 1e6, min(after) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()

    cases = {
        "Metadata v12, 1 topic": frame(3, 12, topics=[{"name": "events"}]),
        "Metadata v12, all": frame(3, 12, topics=None),
        "Fetch v15, 1 partition": fetch_frame(1),
        "Fetch v15, 50 partitions": fetch_frame(50),
    }
    print(
        f"{'request':26} {'bytes':>6} {'before µs':>10} {'after µs':>9} {'kio µs':>7} "
        f"{'check µs':>9}"
    )
    for name, data in cases.items():
        schema = request_schema(int.from_bytes(data[:2]), int.from_bytes(data[2:4]))
        check = message_check(schema)
        kio = best_us(kio_alone(data), args.rounds, args.number)
        before, after = before_and_after(data, args.rounds, args.number)
        alone = best_us(lambda data=data, check=check: check(data), args.rounds, args.number)
        print(f"{name:26} {len(data):6} {before:10.2f} {after:9.2f} {kio:7.2f} {alone:9.2f}")
    # Produce is read by hand (records stay views of the frame): its counts are checked inline
    produce = memoryview(bytearray(produce_frame()))
    after = best_us(
        lambda: produce_request.decode_produce_request(produce), args.rounds, args.number
    )
    print(f"{'Produce v9, 16 KB batch':26} {len(produce):6} {'-':>10} {after:9.2f} {'-':>7} inline")


if __name__ == "__main__":
    main()
