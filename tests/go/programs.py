"""The Go side of the tests: small programs (``saramaclient/``, ``kafkagoclient/``) that drive the
Go clients Debian bookworm packages — sarama 1.22.1 and kafka-go 0.2.1, the same versions pinned
in ``go.mod`` and ``go.sum`` here — against a broker.

They are built with the machine's ``go`` into a cache outside the repository
(``$ODRADEK_GO_CACHE``, else ``$XDG_CACHE_HOME/odradek/go``, else ``~/.cache/odradek/go``), in a
directory named by a hash of ``go.mod``, ``go.sum`` and the sources, so a changed pin or program
gets a fresh build and an unchanged one is reused. A build goes to a temporary directory renamed
into place, so an interrupted one leaves nothing that looks finished.

``scripts/setup.sh --test`` runs this file (``python3 tests/go/programs.py``, standard library
only) to build them once per machine; it prints the directory of the binaries.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = ("saramaclient", "kafkagoclient")
PACKAGES = (*PROGRAMS, "report")  # what a build reads


def cache_root() -> Path:
    configured = os.environ.get("ODRADEK_GO_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "odradek" / "go"


def _inputs() -> list[Path]:
    sources = sorted(path for name in PACKAGES for path in (HERE / name).glob("*.go"))
    return [HERE / "go.mod", HERE / "go.sum", *sources]


def bin_dir() -> Path:
    """The directory of the built programs, built with ``go build`` if absent."""
    digest = hashlib.sha256()
    for path in _inputs():
        digest.update(str(path.relative_to(HERE)).encode() + b"\0" + path.read_bytes() + b"\0")
    target = cache_root() / f"bin-{digest.hexdigest()[:16]}"
    if target.is_dir():
        return target
    go = shutil.which("go") or (
        "/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None
    )
    if go is None:
        raise RuntimeError("go is not installed: the Go client tests need a Go toolchain")
    target.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix="bin-", dir=target.parent))
    done = subprocess.run(
        [go, "build", "-buildvcs=false", "-o", str(build) + os.sep, *(f"./{n}" for n in PROGRAMS)],
        cwd=HERE,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(build, ignore_errors=True)
        raise RuntimeError(f"go build failed in {HERE}:\n{done.stdout}{done.stderr}")
    try:
        build.rename(target)
    except OSError:  # another process published the same build first
        if not target.is_dir():
            raise
        shutil.rmtree(build, ignore_errors=True)
    return target


def program(name: str) -> Path:
    """The path of one built program (``saramaclient`` or ``kafkagoclient``)."""
    assert name in PROGRAMS, name
    return bin_dir() / name


if __name__ == "__main__":
    print(bin_dir())
