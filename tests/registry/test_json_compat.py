"""JSON Schema reader/writer verdicts (data valid under the writer, valid under the reader?)."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.registry.json_compat import reader_errors


def obj(closed: bool = False, required: tuple[str, ...] = (), **props: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return schema


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}


@pytest.mark.parametrize(
    ("reader", "writer", "compatible"),
    [
        (obj(a=STR), obj(a=STR), True),
        (NUM, INT, True),  # integers are numbers
        (INT, NUM, False),
        ({"type": ["string", "null"]}, STR, True),
        (STR, {"type": ["string", "null"]}, False),
        # A closed writer: the reader may add an optional property.
        (obj(closed=True, a=STR, b=INT), obj(closed=True, a=STR), True),
        # An open writer's data may hold "b" already, as anything.
        (obj(a=STR, b=INT), obj(a=STR), False),
        (obj(a=STR, b={}), obj(a=STR), True),
        # Removing a property: fine for an open reader, not a closed one.
        (obj(a=STR), obj(a=STR, b=INT), True),
        (obj(closed=True, a=STR), obj(closed=True, a=STR, b=INT), False),
        # Requiring what the writer did not.
        (
            obj(closed=True, required=("a", "b"), a=STR, b=INT),
            obj(closed=True, a=STR, b=INT),
            False,
        ),
        (obj(closed=True, required=("a",), a=STR), obj(closed=True, required=("a",), a=STR), True),
        ({"enum": ["x", "y", "z"]}, {"enum": ["x", "y"]}, True),
        ({"enum": ["x"]}, {"enum": ["x", "y"]}, False),
        ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, False),
        ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, True),
        ({"type": "array", "items": NUM}, {"type": "array", "items": INT}, True),
        ({"type": "array", "items": INT}, {"type": "array", "items": NUM}, False),
        (obj(a=obj(x=NUM)), obj(a=obj(x=INT)), True),
        (obj(a=obj(x=INT)), obj(a=obj(x=NUM)), False),
        (True, STR, True),
        (False, STR, False),
    ],
)
def test_verdicts(reader: object, writer: object, compatible: bool) -> None:
    errors = reader_errors(reader, writer)
    assert (errors == []) is compatible, errors
