"""A real Iceberg REST catalog for the tests: Apache Iceberg's own REST catalog server
(``org.apache.iceberg.rest.RESTCatalogServer``, what the apache/iceberg-rest-fixture image runs),
started as a Java process on jars :mod:`tests.java.jars` fetches (``iceberg-rest-pom.xml``).

Behind its REST API is Iceberg's JDBC catalog in a SQLite file, and its tables' files are in a
local ``file://`` warehouse, both under the server's directory; the server writes the tables'
metadata files, the client (pyiceberg, in the broker's translation worker or in the test) the
data and manifest files, in the same warehouse. :meth:`RestCatalogServer.restart` keeps both,
as a restarted catalog service would.

Without a JDK or Maven the tests that need it are skipped, except under CI (``CI`` set).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from odradek.testing import free_port, wait_until
from tests.java import jars

MAIN_CLASS = "org.apache.iceberg.rest.RESTCatalogServer"
START_TIMEOUT_S = 60
# A JVM that starts fast: a test's catalog serves hundreds of requests, not millions.
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m")


def rest_catalog_classpath() -> str:
    """The server's classpath; skips (fails under CI) without Java or Maven."""
    try:
        if shutil.which("java") is None:
            raise RuntimeError("java is not installed")
        return jars.iceberg_rest_classpath()
    except (RuntimeError, subprocess.CalledProcessError) as error:
        if os.environ.get("CI"):
            pytest.fail(f"the Iceberg REST catalog cannot run: {error}")
        pytest.skip(f"the Iceberg REST catalog needs a JDK and Maven: {error}")


class RestCatalogServer:
    """The REST catalog as a child process on a free port of 127.0.0.1, its SQLite catalog
    and warehouse under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> str:
        return (self.directory / "warehouse").as_uri()

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def start(self) -> RestCatalogServer:
        classpath = rest_catalog_classpath()
        if self.port == 0:
            self.port = free_port()
        (self.directory / "warehouse").mkdir(parents=True, exist_ok=True)
        # The server takes its settings from CATALOG_* variables: the name after the prefix,
        # lower-cased, "__" for "-" and "_" for ".", as catalog properties.
        settings = {
            # The server's connections to the file wait for each other's locks rather than
            # fail at once (SQLITE_BUSY, a 500), and readers do not block the writer (WAL):
            # a broker commits while readers poll the table.
            "CATALOG_URI": f"jdbc:sqlite:{self.directory / 'catalog.db'}"
            "?journal_mode=WAL&busy_timeout=30000",
            "CATALOG_WAREHOUSE": self.warehouse,
            "CATALOG_REST_PORT": str(self.port),
        }
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(
                ["java", *JVM_FLAGS, "-cp", classpath, MAIN_CLASS],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **settings},
            )
        try:
            wait_until(self._serving, timeout_s=START_TIMEOUT_S, what="the REST catalog")
        except AssertionError:
            self.kill()
            raise
        return self

    def _serving(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(
                f"the REST catalog exited with {self.process.returncode}:\n"
                + self.log_path.read_text(errors="replace")[-4000:]
            )
        try:
            with urllib.request.urlopen(f"{self.uri}/v1/config", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def catalog(self) -> Any:
        """pyiceberg's REST catalog on this server, as any reader of the tables would open it."""
        from pyiceberg.catalog import load_catalog

        return load_catalog("reader", type="rest", uri=self.uri, warehouse=self.warehouse)

    def broker_settings(self) -> tuple[str, ...]:
        """A broker's settings for its tables to be in this catalog."""
        return (
            "iceberg.catalog.type=rest",
            f"iceberg.catalog.uri={self.uri}",
            f"iceberg.warehouse={self.warehouse}",
        )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()
        self.process = None

    def restart(self) -> RestCatalogServer:
        self.kill()
        return self.start()

    def __enter__(self) -> RestCatalogServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()
