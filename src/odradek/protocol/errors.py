"""Kafka error codes (kio's ``ErrorCode``) and the exception that carries one to a handler."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError"]


class KafkaError(Exception):
    """A failure a client should see as ``code``, with a message for humans."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message or code.name


class RecordsRejected(KafkaError):
    """A produced record set the log refuses; ``record_errors`` name records by their index
    within the batch, as Produce v8+ reports them."""

    def __init__(
        self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]] | None = None
    ) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors or []
