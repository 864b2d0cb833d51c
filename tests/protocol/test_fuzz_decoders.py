"""Fuzzing the request decoders and the record-set parsers (tests/protocol/fuzz_targets.py),
from the real clients' captured frames: Hypothesis mutations in this process, and atheris
(coverage-guided) in a child process, so that a crash of native code fails a test instead of
the run. Short by default; ``ODRADEK_FUZZ_EXAMPLES`` (Hypothesis examples per test, 300) and
``ODRADEK_FUZZ_SECONDS`` (atheris' run, 10) make them longer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.protocol.fuzz_targets import (
    captured_frames,
    decode,
    fuzz_frame,
    fuzz_record_set,
    record_sets,
    write_corpus,
)

EXAMPLES = int(os.environ.get("ODRADEK_FUZZ_EXAMPLES", "300"))
ATHERIS_SECONDS = int(os.environ.get("ODRADEK_FUZZ_SECONDS", "10"))
FRAMES = captured_frames()
RECORD_SETS = [bytes(data) for frame in FRAMES for data in record_sets(decode(frame)[1])]
# Values a lying length or count is made of
LIES = [b"\xff\xff\xff\xff", b"\x7f\xff\xff\xfe", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff\x0f"]
LIES += [b"\x00", b"\xff", b"\x00\x00", b"\xff\xff"]

mutation = st.one_of(
    # overwrite bytes at a position with a lie
    st.tuples(st.just("put"), st.integers(0, 1 << 16), st.sampled_from(LIES)),
    # flip one byte
    st.tuples(st.just("flip"), st.integers(0, 1 << 16), st.integers(1, 255)),
    # cut the frame short
    st.tuples(st.just("cut"), st.integers(0, 1 << 16), st.just(b"")),
    # insert random bytes
    st.tuples(st.just("insert"), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=8)),
)


def mutate(data: bytes, mutations: list[tuple[str, int, object]]) -> bytes:
    out = bytearray(data)
    for kind, at, value in mutations:
        if not out:
            break
        at %= len(out)
        if kind == "put":
            assert isinstance(value, bytes)
            out[at : at + len(value)] = value
        elif kind == "flip":
            assert isinstance(value, int)
            out[at] ^= value
        elif kind == "cut":
            del out[at:]
        else:
            assert isinstance(value, bytes)
            out[at:at] = value
    return bytes(out)


def test_the_seeds_are_the_captured_frames() -> None:
    assert len(FRAMES) > 100
    assert RECORD_SETS  # Produce requests of every message format
    for frame in FRAMES:
        fuzz_frame(frame)


@settings(max_examples=EXAMPLES, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(FRAMES), st.lists(mutation, min_size=1, max_size=4))
def test_mutated_frames_are_decoded_or_refused(
    frame: bytes, mutations: list[tuple[str, int, object]]
) -> None:
    fuzz_frame(mutate(frame, mutations))


@settings(max_examples=EXAMPLES, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(RECORD_SETS), st.lists(mutation, min_size=1, max_size=4))
def test_mutated_record_sets_are_parsed_or_refused(
    data: bytes, mutations: list[tuple[str, int, object]]
) -> None:
    fuzz_record_set(mutate(data, mutations))


def test_atheris_finds_no_crasher(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    write_corpus(corpus)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.protocol.atheris_decoders",
            f"-max_total_time={ATHERIS_SECONDS}",
            f"-artifact_prefix={tmp_path}/",
            "-rss_limit_mb=2048",
            "-max_len=65536",
            str(corpus),
        ],
        capture_output=True,
        text=True,
        timeout=ATHERIS_SECONDS + 300,
        cwd=Path(__file__).parents[2],
    )
    crashers = sorted(tmp_path.glob("crash-*")) + sorted(tmp_path.glob("oom-*"))
    assert result.returncode == 0 and not crashers, (
        [c.read_bytes().hex() for c in crashers],
        result.stderr[-4000:],
    )
