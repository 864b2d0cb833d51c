"""A broker's log dir on a filesystem of its own, small and bounded, that the nemesis can fill.

Each broker's data directory is the mount point of a ``tmpfs`` of ``size`` bytes (``mount -t tmpfs
-o size=...``, as root): writes past it fail with ENOSPC as on a full disk, and nothing outside
it is touched. The mount is made in the campaign's own mount namespace before the broker starts;
``ip netns exec`` gives the broker a copy of that namespace, and both see the one filesystem.

:meth:`BoundedDisk.fill` takes every free byte with a ballast file beside the broker's files
(``torture-ballast``: a plain file, which a log dir's loading skips as it skips anything that is
not a partition directory), reserved with ``posix_fallocate`` and then written to until ENOSPC
(the broker may free or take space meanwhile); :meth:`BoundedDisk.free` removes it;
:meth:`BoundedDisk.unmount` removes the filesystem and everything on it (lazily when a process
still holds a file there: the memory goes once it lets go). A campaign killed before it could
unmount leaves its filesystems (and their memory) behind: :func:`remove_stale`, which the next
campaign runs first, unmounts those whose campaign's process is gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import threading
from pathlib import Path

BALLAST = "torture-ballast"
_CHUNK = 1 << 16
# A campaign's filesystems are named for its process, so that one killed before it could remove
# them (kill -9: its memory stays taken) is told apart from one still running.
SOURCE_PREFIX = "odradek-torture-"


class DiskError(RuntimeError):
    pass


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=30)


class BoundedDisk:
    """A ``size``-byte tmpfs at ``path``; see the module doc. Not thread-safe: the runner's
    thread only."""

    def __init__(self, path: Path, size: int, owner: int | None = None) -> None:
        self.path = path
        self.size = size
        self.owner = os.getpid() if owner is None else owner  # the campaign's process
        self.ballast = path / BALLAST
        self.mounted = False

    def mount(self) -> BoundedDisk:
        self.path.mkdir(parents=True, exist_ok=True)
        source = f"{SOURCE_PREFIX}{self.owner}"
        options = f"size={self.size},mode=0755"
        result = _run("mount", "-t", "tmpfs", "-o", options, source, str(self.path))
        if result.returncode != 0:
            raise DiskError(f"mount a tmpfs at {self.path}: {result.stderr.strip()}")
        self.mounted = True
        return self

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def used_bytes(self) -> int:
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def fill(self) -> int:
        """Take every free byte with the ballast; how many it holds."""
        if not self.mounted:
            raise DiskError(f"{self.path} is not a bounded disk")
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            with contextlib.suppress(OSError):
                os.posix_fallocate(fd, os.fstat(fd).st_size, max(1, self.free_bytes()))
            os.lseek(fd, 0, os.SEEK_END)
            chunk = b"\0" * _CHUNK
            size = len(chunk)
            while size:
                try:
                    os.write(fd, chunk[:size])
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    size //= 2  # a last block partly free: fill it with less
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def free(self) -> None:
        """Remove the ballast (nothing when there is none)."""
        with contextlib.suppress(FileNotFoundError):
            self.ballast.unlink()

    def unmount(self) -> None:
        if not self.mounted:
            return
        result = _run("umount", str(self.path))
        if result.returncode != 0:
            lazy = _run("umount", "--lazy", str(self.path))
            if lazy.returncode != 0:
                raise DiskError(f"umount {self.path}: {result.stderr.strip()}")
        self.mounted = False

    def is_mounted(self) -> bool:
        """Whether a filesystem is mounted at the path now (asks the kernel)."""
        return os.path.ismount(self.path)


# The system calls by which a broker writes and flushes its files (segments by pwrite, checkpoints
# and snapshots by write then fsync, indexes, truncation): a failing disk answers them EIO.  Not
# write: the broker logs with it, and sockets take send.
FAILING_CALLS = ("pwrite64", "pwritev", "pwritev2", "fsync", "fdatasync", "ftruncate", "fallocate")


class DiskErrors:
    """A disk that answers EIO to a process's writes and flushes, for as long as it is on:
    ``strace`` attached to every thread of the process injects the error into those system
    calls (which are then not made at all), as a disk failing under a filesystem would return
    it; stopping detaches strace and the calls succeed again.  (The campaign's filesystems are
    tmpfs, which cannot fail on demand, and a read-only remount is refused while the broker has
    files open for writing.)  Needs ``strace`` and the right to trace the process (root)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._strace: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 10) -> None:
        """Return once strace has attached to the process (it says so on stderr)."""
        calls = ",".join(FAILING_CALLS)
        self._strace = strace = subprocess.Popen(
            [
                "strace",
                "-f",
                "-o",
                "/dev/null",
                "-e",
                f"trace={calls}",
                "-e",
                f"inject={calls}:error=EIO",
                "-p",
                str(self.pid),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert strace.stderr is not None
        timer = threading.Timer(timeout_s, strace.kill)
        timer.start()
        try:
            line = strace.stderr.readline()  # "strace: Process N attached ..." or an error
        finally:
            timer.cancel()
        if b"attached" not in line:
            self.stop()
            raise DiskError(f"strace -p {self.pid}: {line.decode(errors='replace').strip()}")

    def stop(self) -> str:
        """Detach; what strace said if it ended before (it could not attach), else empty."""
        strace, self._strace = self._strace, None
        if strace is None:
            return ""
        ended = strace.poll() is not None
        if not ended:
            strace.terminate()  # strace detaches on SIGTERM, leaving the process running
        try:
            _, stderr = strace.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            strace.kill()
            _, stderr = strace.communicate()
        said = [
            line for line in stderr.decode(errors="replace").splitlines() if "attach" not in line
        ]
        return "\n".join(said).strip() if ended else ""


def remove_stale() -> list[Path]:
    """Unmount every campaign filesystem whose campaign's process is gone (it was killed before
    it could); the mount points unmounted."""
    removed = []
    with open("/proc/self/mounts") as mounts:
        entries = [line.split() for line in mounts]
    for source, target, kind, *_ in entries:
        owner = source.removeprefix(SOURCE_PREFIX)
        if kind != "tmpfs" or owner == source or not owner.isdigit():
            continue
        if _alive(int(owner)):
            continue
        # /proc/mounts writes a space in a path as \040.
        path = Path(target.replace("\\040", " "))
        if _run("umount", "--lazy", str(path)).returncode == 0:
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
