"""The Java side of the tests: Kafka's jars (the Java client, ``kafka-tools``, ``kafka_2.13``,
Kafka Streams) fetched once per machine, and the programs of ``src/`` compiled against them;
and, apart, a Kafka Connect worker with the file connectors (``connect-pom.xml``), Spark's
built-in Kafka connector for PySpark (``spark-kafka-pom.xml``), Apache Iceberg's REST catalog
server for the Iceberg tests (``iceberg-rest-pom.xml``) and the Java clients older than Kafka 4
(``kafka-clients-<version>-pom.xml``, each with the program of ``legacy-src/`` compiled against
it).

Both live in a cache outside the repository (``$ODRADEK_JAVA_CACHE``, else
``$XDG_CACHE_HOME/odradek/java``, else ``~/.cache/odradek/java``), in directories named by a hash
of what made them (``pom.xml``; ``pom.xml`` and the sources), so a changed pin or source gets a
fresh directory and an unchanged one is reused. Each is made in a temporary directory and
renamed into place, so an interrupted fetch or compile leaves nothing that looks finished.

``scripts/setup.sh --test`` runs this file (``python3 tests/java/jars.py``) to fetch them all;
it uses only the standard library so that it runs before anything is installed. It prints the
classpath of the jars, for running Kafka's tools by hand:
``java -cp "$(python3 tests/java/jars.py)" org.apache.kafka.tools.TopicCommand ...``, and with
``--spark-kafka`` the Spark connector's jars: ``pyspark --jars "$(python3 tests/java/jars.py
--spark-kafka)"``; with ``--iceberg-rest`` the REST catalog server's:
``CATALOG_WAREHOUSE=file:///tmp/wh java -cp "$(python3 tests/java/jars.py --iceberg-rest)"
org.apache.iceberg.rest.RESTCatalogServer``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
SPARK_KAFKA_POM = HERE / "spark-kafka-pom.xml"
CONNECT_POM = HERE / "connect-pom.xml"
ICEBERG_REST_POM = HERE / "iceberg-rest-pom.xml"
SOURCES = HERE / "src"
# The programs compiled against each old client: only what every kafka-clients since 2.x has.
LEGACY_SOURCES = HERE / "legacy-src"
# kafka-clients releases older than Kafka 4 by version: how clients that know transactions
# version 1 only behave.
LEGACY_CLIENT_POMS = {
    "2.8": HERE / "kafka-clients-2.8-pom.xml",
    "3.9": HERE / "kafka-clients-3.9-pom.xml",
}


def cache_root() -> Path:
    configured = os.environ.get("ODRADEK_JAVA_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "odradek" / "java"


def _digest(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def jar_dir(pom: Path = POM) -> Path:
    """Where the jars of ``pom`` are (or will be)."""
    return cache_root() / f"lib-{_digest(pom)}"


def _publish(build: Path, target: Path) -> None:
    try:
        build.rename(target)
    except OSError:  # another process published the same content first
        if not target.is_dir():
            raise
        shutil.rmtree(build, ignore_errors=True)


def fetch_jars(pom: Path = POM) -> Path:
    """The jar directory of ``pom``, fetched with Maven (``dependency:copy-dependencies``) if
    absent."""
    target = jar_dir(pom)
    if target.is_dir():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("mvn is not installed (scripts/setup.sh --test installs it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix="lib-", dir=target.parent))
    done = subprocess.run(
        [
            mvn,
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={build}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:  # Maven prints its errors on stdout
        shutil.rmtree(build, ignore_errors=True)
        raise RuntimeError(f"mvn could not fetch the jars of {pom}:\n{done.stdout}{done.stderr}")
    _publish(build, target)
    return target


def classes_dir(pom: Path = POM, source_dir: Path = SOURCES) -> Path:
    """The classes of ``source_dir/*.java``, compiled with ``javac`` against the jars of ``pom``
    if absent."""
    sources = sorted(source_dir.glob("*.java"))
    target = cache_root() / f"classes-{_digest(pom, *sources)}"
    if target.is_dir():
        return target
    jars = fetch_jars(pom)
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac is not installed (scripts/setup.sh --test installs a JDK)")
    build = Path(tempfile.mkdtemp(prefix="classes-", dir=target.parent))
    subprocess.run(
        [javac, "-nowarn", "-d", str(build), "-cp", str(jars / "*"), *map(str, sources)],
        check=True,
    )
    _publish(build, target)
    return target


def spark_kafka_jars() -> str:
    """Spark's Kafka connector and its dependencies, comma-separated as ``spark.jars`` and
    ``pyspark --jars`` take them; fetched if absent."""
    return ",".join(str(jar) for jar in sorted(fetch_jars(SPARK_KAFKA_POM).glob("*.jar")))


def legacy_client_classpath(version: str) -> str:
    """The programs of ``legacy-src/`` and kafka-clients ``version`` (a key of
    ``LEGACY_CLIENT_POMS``) with its dependencies, as ``java -cp`` takes them; fetched and
    compiled if absent."""
    pom = LEGACY_CLIENT_POMS[version]
    return os.pathsep.join([str(classes_dir(pom, LEGACY_SOURCES)), str(fetch_jars(pom) / "*")])


def iceberg_rest_classpath() -> str:
    """Apache Iceberg's REST catalog server (main class
    ``org.apache.iceberg.rest.RESTCatalogServer``) and its dependencies, as ``java -cp`` takes
    them; fetched if absent."""
    return str(fetch_jars(ICEBERG_REST_POM) / "*")


if __name__ == "__main__":
    import sys

    for other_pom in (CONNECT_POM, *LEGACY_CLIENT_POMS.values()):
        fetch_jars(other_pom)
    connector = spark_kafka_jars()
    rest_catalog = iceberg_rest_classpath()
    if sys.argv[1:] == ["--spark-kafka"]:
        print(connector)
    elif sys.argv[1:] == ["--iceberg-rest"]:
        print(rest_catalog)
    else:
        print(fetch_jars() / "*")
