"""How a failed scenario's error is shown in the bench report."""

from __future__ import annotations

import traceback

from odradek.bench.report import error_head


def test_the_exception_is_shown_not_the_quoted_output_after_it() -> None:
    try:
        raise RuntimeError("no ack; the last output:\nlog line 1\nlog line 2")
    except RuntimeError:
        text = traceback.format_exc()
    head = error_head(text, most=2)
    assert head == ["RuntimeError: no ack; the last output:", "log line 1"]
    assert error_head("plain text") == ["plain text"]
