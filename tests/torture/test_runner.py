"""What the runner makes of a broker's log after a fault (the campaign itself is tested in
test_campaign.py)."""

from __future__ import annotations

from odradek.torture.runner import errors_logged

LINES = [
    "2026-11-28 11:25:58,047 ERROR odradek.server.connection: closing connection from "
    "10.248.149.1:47728 after an unexpected error\n",
    "Traceback (most recent call last):\n",
    "OSError: [Errno 28] No space left on device\n",
    "2026-11-28 11:25:58,274 ERROR odradek.server.connection: closing connection from "
    "10.248.149.1:47746 after an unexpected error\n",
    "OSError: [Errno 5] Input/output error\n",
    "2026-11-28 11:25:58,321 INFO odradek.cluster.fetcher: broker 3 cannot fetch from leader 1 "
    "at 10.248.149.11:41419: [Errno 28] No space left on device\n",
]


def test_errors_are_counted_by_kind_with_addresses_elided() -> None:
    assert errors_logged(LINES) == (
        "3 lines naming ENOSPC or EIO, 2x ERROR odradek.server.connection: closing connection from "
        "<address> after an unexpected error"
    )


def test_a_quiet_log_has_no_error() -> None:
    assert errors_logged(["2026-11-28 11:25:58,321 INFO odradek.broker: started\n"]) == (
        "0 lines naming ENOSPC or EIO, no error"
    )
