"""What the transaction handlers share: KIP-588's PRODUCER_FENCED, which older request versions
do not know (they get INVALID_PRODUCER_EPOCH, as Kafka answers them)."""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode


def for_version(code: ErrorCode, version: int, first_with_producer_fenced: int) -> ErrorCode:
    if code == ErrorCode.producer_fenced and version < first_with_producer_fenced:
        return ErrorCode.invalid_producer_epoch
    return code
