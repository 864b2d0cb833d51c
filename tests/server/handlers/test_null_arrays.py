"""A null where Kafka's schema allows one, for every nullable array of every request version
served through kio, gets Kafka's answer from the handler (a null where the schema allows none
never reaches a handler: tests/protocol/test_bounds.py)."""

from __future__ import annotations

import pytest

from odradek.protocol.messages import request_schema
from tests.protocol.null_arrays import NullArray, null_arrays, request_with_null

from .conftest import HandlerCaller

NULLABLE = [case for case in null_arrays() if case.nullable]


@pytest.mark.parametrize("case", NULLABLE, ids=lambda c: c.id)
def test_nullable_array_set_to_null_is_answered(handlers: HandlerCaller, case: NullArray) -> None:
    request = request_with_null(request_schema(case.api_key, case.version), case.path)
    response = handlers.call_request(case.api_key, case.version, request)
    assert response is not None
