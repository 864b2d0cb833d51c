"""Options of the transactional parts: the source's isolation level, the sink's exactly-once."""

from __future__ import annotations

import pytest

from odradek.client.data import READ_COMMITTED, READ_UNCOMMITTED
from odradek.spark.options import OptionError, ReadOptions, WriteOptions

READ = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
WRITE = {"kafka.bootstrap.servers": "h:1", "topic": "t"}


def test_isolation_level_is_read_uncommitted_unless_asked() -> None:
    assert ReadOptions.parse(READ, streaming=True).isolation_level == READ_UNCOMMITTED
    committed = {**READ, "kafka.isolation.level": "READ_COMMITTED"}
    assert ReadOptions.parse(committed, streaming=False).isolation_level == READ_COMMITTED
    with pytest.raises(OptionError, match=r"kafka\.isolation\.level"):
        ReadOptions.parse({**READ, "kafka.isolation.level": "serializable"}, streaming=True)


def test_exactly_once_options() -> None:
    plain = WriteOptions.parse(WRITE)
    assert not plain.exactly_once
    options = WriteOptions.parse(
        {
            **WRITE,
            "exactlyOnce": "true",
            "transactionalIdPrefix": "etl",
            "kafka.transaction.timeout.ms": "20000",
        }
    )
    assert (options.exactly_once, options.transactional_id_prefix) == (True, "etl")
    assert options.transaction_timeout_ms == 20_000
    assert WriteOptions.parse({**WRITE, "exactlyOnce": "true"}).transaction_timeout_ms == 60_000
    with pytest.raises(OptionError, match=r"kafka\.acks=all"):
        WriteOptions.parse({**WRITE, "exactlyOnce": "true", "kafka.acks": "1"})
    with pytest.raises(OptionError, match="exactlyOnce"):
        WriteOptions.parse({**WRITE, "exactlyOnce": "yes"})
    with pytest.raises(OptionError, match="transactionalIdPrefix"):
        WriteOptions.parse({**WRITE, "exactlyOnce": "true", "transactionalIdPrefix": " "})
