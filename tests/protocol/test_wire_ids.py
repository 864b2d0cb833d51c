"""The schema ids of keys and values (odradek.protocol.wire_ids) as compiled by mypyc and as
Python, against what the decoder reads of the same records."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import records
from odradek.protocol.record_batch import read_header
from odradek.protocol.records import (
    NewRecord,
    RecordDecodeError,
    decode_batch,
    encode_batch,
    records_section,
    wire_schema_ids,
)


def source_module() -> ModuleType:
    path = Path(records.__file__).with_name("wire_ids.py")
    spec = importlib.util.spec_from_file_location("wire_ids_as_source", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = source_module()
LOADED = records._wire_ids_module  # compiled where setup.py could build it


def expected(payloads: list[bytes | None]) -> tuple[set[int], bool]:
    ids = {
        int.from_bytes(p[1:5], "big", signed=True)
        for p in payloads
        if p is not None and len(p) >= 5 and p[0] == 0
    }
    missing = any(p is not None and (len(p) < 5 or p[0] != 0) for p in payloads)
    return ids, missing


payloads = st.none() | st.binary(max_size=300) | st.binary(max_size=300).map(lambda b: b"\0" + b)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.builds(NewRecord, payloads, payloads, timestamp=st.integers(0, 10**12)),
        min_size=1,
        max_size=120,
    ),
    st.booleans(),
    st.booleans(),
)
def test_compiled_source_and_decoder_agree(
    items: list[NewRecord], keys: bool, values: bool
) -> None:
    batch = encode_batch(items, now_ms=0)
    section = records_section(batch, read_header(batch))
    decoded = decode_batch(batch)
    want = expected([r.key for r in decoded if keys] + [r.value for r in decoded if values])
    assert LOADED.schema_ids(section, len(items), keys, values) == want
    assert SOURCE.schema_ids(section, len(items), keys, values) == want


def test_ids_are_signed_int32s_as_confluents_serializers_read_them() -> None:
    batch = encode_batch([NewRecord(None, b"\0\xff\xff\xff\xfe")], now_ms=0)
    section = records_section(batch, read_header(batch))
    assert wire_schema_ids(section, 1, False, True) == ({-2}, False)


def test_records_cut_short_are_a_decode_error() -> None:
    batch = encode_batch([NewRecord(b"key", b"\0\0\0\0\1 value")], now_ms=0)
    section = records_section(batch, read_header(batch))
    with pytest.raises(RecordDecodeError):
        wire_schema_ids(section[:4], 1, True, True)
