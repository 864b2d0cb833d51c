"""The crash-safe replacement of segments by cleaned ones: log compaction's commit protocol.

A cleaning pass turns runs of old segments into new, cleaned ones, each new segment taking the
base offset of the first old segment of its run.  Files, in the partition directory (formats in
:mod:`odradek.storage.formats`):

``<base>.log.cleaned`` (and ``.index.cleaned``, ``.timeindex.cleaned``)
    a new segment, written and fsynced by the cleaner thread;
``<first base>.swap.tmp`` then ``<first base>.swap``
    the swap manifest of the pass: for each new segment, the old segments it replaces.

The steps, in order:

1. cleaner thread (:func:`prepare`): the new segments are complete and fsynced; the manifest is
   written as ``.swap.tmp`` and fsynced, and so is the directory.
2. event loop (:func:`commit`): ``.swap.tmp`` is renamed to ``.swap``.  This rename is the
   commit point of the whole pass.
3. every old segment's files are removed (the log file of each first);
4. every new segment's files lose their ``.cleaned`` suffix (the log file of each first);
5. the manifest is removed.

Crash: :func:`recover` runs before a log's segments are opened.  With no manifest, the pass did
not commit: ``.cleaned`` and ``.swap.tmp`` files are deleted and the old segments, untouched,
remain.  With a manifest, the pass committed and recovery finishes it: for a new segment whose
``.log.cleaned`` still exists, step 4 has not reached it, and since step 3 precedes step 4 any
old segment file of the manifest is old and is removed before the new files are renamed; for a
new segment already renamed, only its index files may be left to rename.  Recovery is itself
idempotent (the manifest goes last), so a crash during it is recovered the same way.  After any
kill -9 the log therefore holds either every old segment of a pass or every new one.

Steps 2 to 5 are renames and unlinks, cheap enough for the event loop; they rely on the file
system keeping the order of metadata operations in one directory, as journaling file systems
do, for the same guarantee after an OS crash.

Test hooks: :func:`crash_point` is called between steps; the environment variable
``ODRADEK_CLEANER_CRASH_AT=<step>`` makes the process ``os._exit`` there (as kill -9 would stop
it), and :data:`crash_hook` lets in-process tests interrupt a swap at any step.

Callers: the log cleaner (:func:`prepare`, in its thread) and
:class:`~odradek.storage.log.PartitionLog` (:func:`commit` on the event loop, :func:`recover` when
it opens).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from odradek.storage.fileio import fsync_directory, pwrite_all
from odradek.storage.formats import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    TEMP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    format_swap_manifest,
    parse_swap_manifest,
    segment_file_name,
)
from odradek.storage.segment import LogSegment

log = logging.getLogger(__name__)

CRASH_ENV = "ODRADEK_CLEANER_CRASH_AT"
CRASH_EXIT_CODE = 86

# Set by tests to interrupt a swap: called with each step's name, it may raise.
crash_hook: Callable[[str], None] | None = None


def crash_point(step: str) -> None:
    """A place where a crash is simulated on request (see the module doc)."""
    if os.environ.get(CRASH_ENV) == step:
        print(f"odradek: simulated crash at cleaner step {step}", file=sys.stderr, flush=True)
        os._exit(CRASH_EXIT_CODE)
    if crash_hook is not None:
        crash_hook(step)


def prepare(directory: Path, replacements: Mapping[int, Sequence[int]]) -> Path:
    """Write the manifest of a pass as ``<first base>.swap.tmp`` and make it and the directory
    durable (the new segments must be flushed already).  Returns the path to :func:`commit`."""
    first = min(replacements)
    path = directory / (segment_file_name(first, SWAP_SUFFIX) + TEMP_SUFFIX)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, format_swap_manifest({k: list(v) for k, v in replacements.items()}), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_directory(directory)
    return path


def commit(prepared: Path, replacements: Sequence[tuple[LogSegment, Sequence[LogSegment]]]) -> None:
    """Steps 2 to 5: replace each run of old segments by its new segment, on disk."""
    manifest = prepared.with_name(prepared.name[: -len(TEMP_SUFFIX)])
    os.rename(prepared, manifest)
    crash_point("committed")
    for new, old in replacements:
        for segment in old:
            segment.unlink()
        crash_point(f"removed-old-{new.base_offset}")
    for new, _ in replacements:
        new.rename()
        crash_point(f"renamed-new-{new.base_offset}")
    manifest.unlink()
    crash_point("swapped")


def discard(prepared: Path | None, new_segments: Sequence[LogSegment]) -> None:
    """Drop an uncommitted pass: close and remove the new segments and the manifest."""
    for segment in new_segments:
        segment.close()
        segment.unlink()
    if prepared is not None:
        prepared.unlink(missing_ok=True)


def _file(directory: Path, base: int, suffix: str, extra: str = "") -> Path:
    return directory / (segment_file_name(base, suffix) + extra)


def recover(directory: Path, names: list[str] | None = None) -> bool:
    """Finish a committed swap, discard an uncommitted one (see the module doc).  ``names``:
    the directory's listing if the caller has it.  Returns whether any file changed."""
    names = sorted(os.listdir(directory) if names is None else names)
    manifests = [n for n in names if n.endswith(SWAP_SUFFIX)]
    for name in manifests:
        path = directory / name
        try:
            entries = parse_swap_manifest(path.read_bytes())
        except (ValueError, UnicodeDecodeError) as e:
            # Written whole and renamed into place, a manifest cannot be torn by a crash.
            raise RuntimeError(f"cannot finish the segment swap recorded in {path}: {e}") from e
        log.warning("finishing the interrupted segment swap recorded in %s", path)
        for new, old in entries.items():
            cleaned_log = _file(directory, new, LOG_SUFFIX, CLEANED_SUFFIX)
            if cleaned_log.exists():
                for base in old:
                    for suffix in SEGMENT_SUFFIXES:
                        _file(directory, base, suffix).unlink(missing_ok=True)
                os.replace(cleaned_log, _file(directory, new, LOG_SUFFIX))
            else:
                for base in old:
                    if base != new:
                        for suffix in SEGMENT_SUFFIXES:
                            _file(directory, base, suffix).unlink(missing_ok=True)
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                cleaned = _file(directory, new, suffix, CLEANED_SUFFIX)
                if cleaned.exists():
                    os.replace(cleaned, _file(directory, new, suffix))
        fsync_directory(directory)
        path.unlink()
    changed = bool(manifests)
    for name in os.listdir(directory) if manifests else names:
        if name.endswith(CLEANED_SUFFIX) or name.endswith(SWAP_SUFFIX + TEMP_SUFFIX):
            log.warning("removing %s, left by an unfinished cleaning pass", directory / name)
            (directory / name).unlink()
            changed = True
    return changed
