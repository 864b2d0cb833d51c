"""The translation worker's state, called in this process: rows wait under their translator's
token until a commit; a translator that started again (or a worker that did) is told so."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.config import BrokerConfig
from odradek.iceberg.worker import StaleTranslation, Worker
from odradek.protocol.records import NewRecord, encode_batch
from odradek.security.client_settings import ClientSecurity
from tests.iceberg.support import SPEC


def _worker(path: Path) -> Worker:
    return Worker(
        BrokerConfig({"log.dirs": str(path)}).iceberg_catalog(), "127.0.0.1:1", ClientSecurity()
    )


def _batches(first: int, count: int) -> bytes:
    records = [NewRecord(b"k", str(i).encode()) for i in range(first, first + count)]
    return bytes(encode_batch(records, base_offset=first, now_ms=1_700_000_000_000))


def test_rows_wait_for_the_commit_under_their_token(tmp_path: Path) -> None:
    worker = _worker(tmp_path)
    assert worker.begin(SPEC, 0, "a") is None
    data = _batches(0, 10) + _batches(10, 5)
    # The bound cuts at a batch: records past it wait for the next read.
    translated = worker.translate(SPEC, 0, "a", data, 0, 10, ())
    assert (translated.next_offset, translated.rows) == (10, 10)
    translated = worker.translate(SPEC, 0, "a", _batches(10, 5), 10, 15, ())
    assert (translated.next_offset, translated.rows) == (15, 5)
    outcome = worker.commit(SPEC, 0, "a", None, 15)
    assert (outcome.done, outcome.rows) == (True, 15)
    assert worker.store.committed(SPEC, 0) == 15

    assert _worker(tmp_path).begin(SPEC, 0, "b") == 15  # a new leader, or a restart
    with pytest.raises(StaleTranslation):
        worker.translate(SPEC, 0, "stale", _batches(15, 1), 15, 16, ())


def test_a_refused_commit_leaves_no_rows_behind(tmp_path: Path) -> None:
    worker = _worker(tmp_path)
    worker.begin(SPEC, 0, "a")
    worker.translate(SPEC, 0, "a", _batches(0, 3), 0, 3, ())
    other = _worker(tmp_path)
    other.begin(SPEC, 0, "b")
    other.translate(SPEC, 0, "b", _batches(0, 3), 0, 3, ())
    assert other.commit(SPEC, 0, "b", None, 3).done
    assert not worker.commit(SPEC, 0, "a", None, 3).done
    with pytest.raises(StaleTranslation):  # it must read the table's offset again
        worker.translate(SPEC, 0, "a", _batches(3, 1), 3, 4, ())
    rows = worker.store.table(SPEC).scan().to_arrow()
    assert sorted(r["offset"] for r in rows.column("kafka").to_pylist()) == [0, 1, 2]
