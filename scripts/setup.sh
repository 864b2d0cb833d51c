#!/usr/bin/env bash
# Make .venv with odradek installed (editable). With --test, also the test tools and the system
# packages the tests drive (Debian's kcat; a headless JDK 17 for PySpark and the Java tests; Maven;
# Debian's zookeeper; Debian's chromium and npm for the web console's browser tests; Debian's
# burrow, LinkedIn's lag monitor; iptables and libnetfilter-queue-dev for odradek torture's
# network faults, strace for its failing disks), installed with apt-get where missing (before
# the Python packages, one of which builds against libnetfilter_queue), playwright-core from npm, Kafka's jars for the Java tests and Apache Iceberg's REST catalog server for the Iceberg tests
# (fetched once per machine into ~/.cache/odradek/java, see tests/java/jars.py) and the Go client
# programs (sarama and kafka-go pinned in tests/go/go.mod, built once per machine with the
# machine's Go into ~/.cache/odradek/go, see tests/go/programs.py).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null

if [ "${1:-}" = "--test" ]; then
  missing=()
  command -v kcat >/dev/null 2>&1 || missing+=(kcat)
  # PySpark (the Spark data source's tests) runs a JVM: Java 17 or newer. The Java tests compile
  # their programs (javac) and fetch Kafka's jars with Maven.
  command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
  # The cluster tests start a real ZooKeeper (Debian's, run from its jars with that Java).
  [ -x /usr/share/zookeeper/bin/zkServer.sh ] || missing+=(zookeeper)
  # The web console's browser tests drive Debian's chromium with playwright-core (npm).
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  # Burrow 1.2 (tests/e2e/test_burrow.py), which asks the broker for ListOffsets v0.
  command -v Burrow >/dev/null 2>&1 || missing+=(burrow)
  # odradek torture (tests/torture/) cuts and thins links between network namespaces with
  # iptables-legacy's DROP and `statistic` match (the kernel has no tc netem).
  command -v iptables-legacy >/dev/null 2>&1 || missing+=(iptables)
  # Its slow links hold packets queued by iptables' NFQUEUE with the NetfilterQueue binding (the
  # test extra), built from source against libnetfilter_queue: before pip, below.
  [ -f /usr/include/libnetfilter_queue/libnetfilter_queue.h ] || missing+=(libnetfilter-queue-dev)
  # Its failing-disk fault answers a broker's writes and flushes EIO with strace's injection.
  command -v strace >/dev/null 2>&1 || missing+=(strace)
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test,iceberg]"
  .venv/bin/python tests/java/jars.py >/dev/null
  # playwright-core at the version pinned in tests/console/package-lock.json, into
  # tests/console/node_modules (no browser download: the tests use /usr/bin/chromium).
  (cd tests/console && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent)
  PATH="$PATH:/usr/local/go/bin" .venv/bin/python tests/go/programs.py >/dev/null
else
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[iceberg]"
fi
# A wheel puts odradek-pyspark.pth in site-packages (setup.py); an editable install leaves it out.
cp src/odradek-pyspark.pth "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/"
