"""The records framing check (odradek.protocol.record_scan) as compiled by mypyc and as Python
source: the same answers, and the same refusals, for any bytes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import records
from odradek.protocol.records import Header, NewRecord, encode_batch

HEADER_SIZE = 61


def source_module() -> ModuleType:
    path = Path(records.__file__).with_name("record_scan.py")
    spec = importlib.util.spec_from_file_location("record_scan_as_source", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = source_module()
LOADED = records._scan_module  # compiled where setup.py could build it


def outcome(module: ModuleType, buf: bytes, count: int) -> object:
    try:
        return module.scan(buf, HEADER_SIZE, len(buf), count)
    except module.FramingError as e:
        return ("refused", str(e))


section_records = st.lists(
    st.builds(
        NewRecord,
        st.none() | st.binary(max_size=70),
        st.none() | st.binary(max_size=200),
        st.lists(
            st.builds(Header, st.text(max_size=4), st.none() | st.binary(max_size=4)), max_size=2
        ),
        st.integers(0, 10**6),
    ),
    min_size=1,
    max_size=90,
)


def mangled(items: list[NewRecord], data: st.DataObject) -> tuple[bytes, int]:
    """``items`` as a batch with up to three bytes of its records changed, up to two cut off, and
    a record count one off or right."""
    buf = bytearray(encode_batch(items, now_ms=0))
    for _ in range(data.draw(st.integers(0, 3))):
        buf[data.draw(st.integers(HEADER_SIZE, len(buf) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, 2))
    count = len(items) + data.draw(st.integers(-1, 1))
    return bytes(buf[: len(buf) - cut]), count


@settings(max_examples=150)
@given(section_records, st.data())
def test_compiled_and_source_agree(items: list[NewRecord], data: st.DataObject) -> None:
    sample, count = mangled(items, data)
    assert outcome(LOADED, sample, count) == outcome(SOURCE, sample, count)


def test_what_a_client_writes_is_read_whole() -> None:
    items = [NewRecord(b"k%d" % i, b"v" * i, [Header("h", None)], 5 * i) for i in range(300)]
    buf = encode_batch(items, now_ms=0)
    assert outcome(LOADED, buf, 300) == (0, 1495, 0, True)
    assert outcome(SOURCE, buf, 300) == (0, 1495, 0, True)


def outcome_in_parts(module: ModuleType, buf: bytes, count: int, records: int) -> object:
    """The scan made ``records`` records at a time, as a long one is."""
    try:
        state = module.ScanState(HEADER_SIZE, len(buf), count)
        parts = 0
        while not module.scan_some(buf, state, records):
            parts += 1
            assert parts <= count, "a scan in parts that does not move"
        return state.result()
    except module.FramingError as e:
        return ("refused", str(e))


@settings(max_examples=150)
@given(section_records, st.data())
def test_a_scan_in_parts_of_any_size_says_what_one_whole_scan_says(
    items: list[NewRecord], data: st.DataObject
) -> None:
    sample, count = mangled(items, data)
    records = data.draw(st.integers(1, len(items) + 1))
    for module in (LOADED, SOURCE):
        assert outcome_in_parts(module, sample, count, records) == outcome(module, sample, count)


def test_a_part_of_no_records_moves_nothing() -> None:
    buf = encode_batch([NewRecord(None, b"v")] * 3, now_ms=0)
    for module in (LOADED, SOURCE):
        state = module.ScanState(HEADER_SIZE, len(buf), 3)
        assert not module.scan_some(buf, state, 0)
        assert module.scan_some(buf, state, 3)
        assert state.result() == outcome(module, buf, 3)
