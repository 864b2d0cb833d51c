"""What the fuzzers feed: request frames decoded as a connection decodes them, and record sets
parsed as the produce path and the readers parse them; seeded with the real clients' captured
frames (tests/protocol/captured). A target returns, or raises one of the errors that stand for
"not a valid message" (the connection closes, or the producer gets Kafka's error); anything
else, or a process that dies, is a crasher.

Used by tests/protocol/test_fuzz_decoders.py (Hypothesis) and tests/protocol/atheris_decoders.py
(atheris, in a child process).
"""

from __future__ import annotations

import contextlib
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crc32c
from kio.serial.errors import DecodeError

from odradek.protocol import legacy, record_batch, records
from odradek.protocol.compression import CompressionError
from odradek.protocol.messages import MalformedRequest, UnsupportedRequest, decode_request
from odradek.server.registry import load_handlers

CAPTURED_DIR = Path(__file__).parent / "captured"
HANDLERS = load_handlers()
# kio's own refusals (bad UTF-8, a boolean that is neither 0 nor 1, an unknown error code, a null
# where none is allowed) are ValueErrors or its DecodeErrors; both close the connection.
REFUSED = (MalformedRequest, UnsupportedRequest, DecodeError, ValueError)
BATCH_REFUSED = (
    record_batch.InvalidBatch,
    records.RecordDecodeError,
    legacy.LegacyFormatError,
    CompressionError,
)
MAX_BATCH = 1 << 20


def captured_frames() -> list[bytes]:
    """Every captured request frame (setup frames included), without its length prefix."""
    frames = []
    for path in sorted(CAPTURED_DIR.glob("*.json")):
        for entry in json.loads(path.read_text()).values():
            frames.append(bytes.fromhex(entry["frame"]))
            frames.extend(bytes.fromhex(setup) for setup in entry.get("setup", []))
    return frames


def decode(frame: bytes) -> tuple[Any, Any]:
    """The request in ``frame`` as the connection reads it (registry, version range, decoder)."""
    if len(frame) < 8:
        raise MalformedRequest("too short for a request header")
    api_key, version = struct.unpack_from(">hh", frame)
    handler = HANDLERS.get(api_key)
    if handler is None or not handler.min_version <= version <= handler.max_version:
        raise UnsupportedRequest(f"API key {api_key} version {version}")
    view = memoryview(bytearray(frame))
    if handler.decode is not None:
        return handler.decode(view)
    return decode_request(view.toreadonly())


def record_sets(request: object) -> Iterator[memoryview | bytes]:
    """The records fields of a decoded Produce request."""
    for topic in getattr(request, "topic_data", ()) or ():
        for partition in topic.partition_data or ():
            if partition.records is not None:
                yield partition.records


def with_crcs_fixed(data: bytes) -> bytes:
    """``data`` with the CRC of every batch header in it rewritten, so that a mutation reaches
    the records instead of stopping at the CRC check."""
    out = bytearray(data)
    for header in record_batch.iter_headers(out):
        start = header.position + record_batch.CRC_START
        crc = crc32c.crc32c(memoryview(out)[start : header.position + header.size])
        struct.pack_into(">I", out, header.position + 17, crc)
    return bytes(out)


def parse_record_set(data: bytes | memoryview) -> None:
    """What the broker and its readers do with a produced record set: v0/v1 message sets are
    converted, v2 batches validated, then every record decoded."""
    if legacy.magic_of(data) in (legacy.MAGIC_V0, legacy.MAGIC_V1):
        data = legacy.to_record_batch(data)
    record_batch.validate_batches(data, MAX_BATCH)
    for header, _ in records.iter_records(data):
        section = records.records_section(data, header)
        records.scan_records(section, header.record_count)


def fuzz_frame(frame: bytes) -> None:
    """One fuzz input: a request frame; its record sets (if it is a Produce) parsed too."""
    try:
        _, request = decode(frame)
    except REFUSED:
        return
    for data in record_sets(request):
        fuzz_record_set(bytes(data))


def fuzz_record_set(data: bytes) -> None:
    for candidate in (data, with_crcs_fixed(data)):
        with contextlib.suppress(BATCH_REFUSED):
            parse_record_set(candidate)


def one_input(data: bytes) -> None:
    """atheris' input: the first byte picks the target, so that the record parsers get inputs of
    their own (``R``) besides whole frames."""
    if data[:1] == b"R":
        fuzz_record_set(data[1:])
    else:
        fuzz_frame(data[1:])


def write_corpus(directory: Path) -> None:
    """The captured frames as an atheris corpus (and each Produce's record sets on their own)."""
    directory.mkdir(parents=True, exist_ok=True)
    for i, frame in enumerate(captured_frames()):
        (directory / f"frame-{i}").write_bytes(b"F" + frame)
        try:
            _, request = decode(frame)
        except REFUSED:
            continue
        for j, data in enumerate(record_sets(request)):
            (directory / f"records-{i}-{j}").write_bytes(b"R" + bytes(data))
