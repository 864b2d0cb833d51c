"""Coverage-guided fuzzing (atheris) of the request decoders and record-set parsers in
tests/protocol/fuzz_targets.py. tests/protocol/test_fuzz_decoders.py runs it for a few seconds;
for longer, from the repository root, over a corpus of the captured frames::

    python -c "from pathlib import Path; from tests.protocol.fuzz_targets import write_corpus; \\
        write_corpus(Path('corpus'))"
    python -m tests.protocol.atheris_decoders -max_total_time=3600 -rss_limit_mb=2048 corpus

A crasher is written as ``crash-<sha1>`` (an input that raised anything but a refusal, or killed
the process); make it a regression test.
"""

from __future__ import annotations

import sys

import atheris

# Only odradek's code is instrumented for coverage (all of it would take minutes to start).
with atheris.instrument_imports(include=["odradek"]):
    from tests.protocol import fuzz_targets


def main() -> None:
    atheris.Setup(sys.argv, fuzz_targets.one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
