"""Produce (0): validate record batches by their headers and CRCs, append them, acknowledge."""

from __future__ import annotations

import logging
from typing import Any

from odradek.protocol import produce_request, produce_response
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import (
    BatchHeader,
    InvalidBatch,
    iter_headers,
    validate_batches,
    with_compression,
)
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

log = logging.getLogger(__name__)

_BATCH_ERRORS = {
    "corrupt_message": ErrorCode.corrupt_message,
    "invalid_record": ErrorCode.invalid_record,
    "message_too_large": ErrorCode.message_too_large,
}


# compression.type values that make the broker rewrite batches; "producer" keeps them as sent.
_TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _recompress(
    buffer: bytearray | memoryview, headers: list[BatchHeader], codec: int
) -> tuple[bytearray, list[BatchHeader]]:
    """Rewrite every batch in the topic's codec: the one case where the broker opens batches."""
    out = bytearray()
    for header in headers:
        out += with_compression(buffer, header, codec)
    return out, list(iter_headers(out))


def _refuse_keyless(
    buffer: bytearray | memoryview, headers: list[BatchHeader], topic: str, index: int
) -> dict[str, Any] | None:
    """On a compacted topic every record needs a key (the cleaner keeps records by key), so
    only there are records decoded on the produce path."""
    from odradek.protocol.records import RecordDecodeError, records_section, scan_records

    for header in headers:
        try:
            spans = scan_records(records_section(buffer, header), header.record_count)
        except RecordDecodeError as e:
            return _failed(index, ErrorCode.corrupt_message, str(e))
        for i, span in enumerate(spans):
            if span[2] is None:
                failed = _failed(
                    index,
                    ErrorCode.invalid_record,
                    f"Compacted topic cannot accept message without key in topic partition "
                    f"{topic}-{index}.",
                )
                failed["record_errors"] = [
                    {"batch_index": i, "batch_index_error_message": failed["error_message"]}
                ]
                return failed
    return None


def _failed(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


def produce_to_partition(
    ctx: RequestContext, topic: str, index: int, records: bytes | memoryview | None, acks: int
) -> dict[str, Any]:
    broker = ctx.broker
    partition = broker.topics.partition(topic, index)
    if partition is None:
        return _failed(index, ErrorCode.unknown_topic_or_partition)
    if acks not in (-1, 0, 1):
        return _failed(index, ErrorCode.invalid_required_acks, f"acks={acks} is not -1, 0 or 1")
    config = broker.topics.topic_config(topic)
    min_insync = config.get_int("min.insync.replicas")
    if acks == -1 and min_insync > 1:
        # One replica is in sync; Kafka refuses acks=all below min.insync.replicas.
        return _failed(
            index,
            ErrorCode.not_enough_replicas,
            f"1 in-sync replica is below min.insync.replicas={min_insync}",
        )
    if not records:
        return _failed(index, ErrorCode.invalid_record, "no record batches")
    # Offsets are assigned by rewriting the batches in place: a writable view (the request's own
    # bytes in the connection's receive buffer) is used as it is, anything else is copied.
    buffer: bytearray | memoryview = (
        records if isinstance(records, memoryview) and not records.readonly else bytearray(records)
    )
    try:
        headers = validate_batches(buffer, config.get_int("max.message.bytes"))
    except InvalidBatch as e:
        log.info("refused produce to %s-%d from %s: %s", topic, index, ctx.peer, e)
        return _failed(index, _BATCH_ERRORS[e.error], str(e))
    if "compact" in config.values["cleanup.policy"]:
        refused = _refuse_keyless(buffer, headers, topic, index)
        if refused is not None:
            return refused
    target_codec = _TOPIC_CODECS.get(str(config.values["compression.type"]))
    if target_codec is not None and any(h.compression != target_codec for h in headers):
        buffer, headers = _recompress(buffer, headers, target_codec)
    now = broker.clock.time_ms()
    log_append_time = now if config.values["message.timestamp.type"] == "LogAppendTime" else None
    if log_append_time is None:
        too_new = config.get_int("message.timestamp.after.max.ms")
        too_old = config.get_int("message.timestamp.before.max.ms")
        for header in headers:
            if header.max_timestamp - now > too_new or now - header.max_timestamp > too_old:
                return _failed(
                    index,
                    ErrorCode.invalid_timestamp,
                    f"timestamp {header.max_timestamp} is out of range of the broker's time {now}",
                )
    try:
        info = partition.append(buffer, headers, log_append_time)
    except KafkaError as e:
        return _failed(index, e.code, e.message)
    return {
        "index": index,
        "error_code": ErrorCode.none,
        "base_offset": info.first_offset,
        "log_append_time": info.log_append_time if info.log_append_time is not None else -1,
        "log_start_offset": info.log_start_offset,
        "record_errors": [],
        "error_message": None,
    }


@handles(
    api_key=produce_request.API_KEY,
    min_version=produce_request.MIN_VERSION,
    max_version=produce_request.MAX_VERSION,
    # by hand, so that record batches stay writable views of the receive buffer
    decode=produce_request.decode_produce_request,
)
async def handle_produce(ctx: RequestContext, request: Any) -> Response | None:
    acks = int(request.acks)
    topics = [
        (
            topic.name,
            [
                produce_to_partition(ctx, topic.name, int(p.index), p.records, acks)
                for p in topic.partition_data
            ],
        )
        for topic in request.topic_data
    ]
    if acks == 0:
        return None
    return produce_response.encode(ctx.version, ctx.header.correlation_id, topics)
