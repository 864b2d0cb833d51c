"""The journal's framing: records read back whole, a torn or damaged tail ends it."""

from __future__ import annotations

from pathlib import Path

from odradek.cluster.metadata.journal import (
    RECORD_HEADER,
    JournalFile,
    frame,
    parse_records,
    read_records,
)


def test_records_read_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / "j"
    assert read_records(path).payloads == []
    journal = JournalFile(path)
    sizes = [journal.append(payload) for payload in (b"{}", b"", b"x" * 70_000)]
    journal.close()
    contents = read_records(path)
    assert contents.payloads == [b"{}", b"", b"x" * 70_000]
    assert not contents.torn and contents.good_end == sizes[-1] == path.stat().st_size


def test_every_prefix_of_a_record_is_a_torn_tail() -> None:
    first, second = frame(b'{"seq":1}'), frame(b'{"seq":2,"topics":{}}')
    for cut in range(len(second)):
        contents = parse_records(first + second[:cut])
        assert contents.payloads == [b'{"seq":1}']
        assert contents.good_end == len(first)
        assert contents.torn == (cut > 0)


def test_a_length_past_the_end_or_a_wrong_crc_ends_the_records() -> None:
    good = frame(b"good")
    lying = RECORD_HEADER.pack(1 << 31, 0) + b"short"
    assert parse_records(good + lying).payloads == [b"good"]
    damaged = bytearray(frame(b"payload"))
    damaged[-1] ^= 1
    assert parse_records(good + bytes(damaged) + good).payloads == [b"good"]


def test_truncate_cuts_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "j"
    journal = JournalFile(path)
    end = journal.append(b"a")
    with path.open("ab") as other:
        other.write(b"\x00\x00")
    assert read_records(path).torn
    journal.truncate(end)
    assert not read_records(path).torn and read_records(path).payloads == [b"a"]
    assert journal.append(b"b") > end
    assert read_records(path).payloads == [b"a", b"b"]
    journal.close()
