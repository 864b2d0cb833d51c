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
