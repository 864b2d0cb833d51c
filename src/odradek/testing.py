"""Run a real odradek broker inside a test, the way users test Kafka applications without Docker.

``running_broker()`` starts a broker on a free port of 127.0.0.1 with a temporary data directory,
in a background thread with its own event loop, so synchronous clients (confluent-kafka,
kafka-python) and asyncio clients alike can use it from the test. The pytest fixture
``odradek_broker`` yields one per test; ``odradek_bootstrap`` is just its address.

``BrokerProcess`` runs ``odradek serve`` as a child process instead, for tests that kill it.

``ZooKeeperServer`` runs a real ZooKeeper (Debian's ``zookeeper`` package) as a child process for
the cluster tests; the fixture ``zookeeper`` shares one per test session and ``zookeeper_connect``
gives each test a ``zookeeper.connect`` string with a chroot of its own.

A test written ``async def`` runs to completion on an event loop of its own (``asyncio.run``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import inspect
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest

from odradek.client.blocking import BlockingConnection
from odradek.client.core import ClientError
from odradek.clock import Clock
from odradek.config import BrokerConfig
from odradek.server.broker import Broker

T = TypeVar("T")

_START_TIMEOUT_S = 30


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an ``async def`` test on a fresh event loop (the store's and the broker's APIs are
    coroutines); other tests are left to pytest."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True


class RunningBroker:
    """A broker serving on its own thread; ``bootstrap`` is its ``host:port``."""

    def __init__(
        self, data_dir: Path, overrides: dict[str, str] | None = None, clock: Clock | None = None
    ) -> None:
        self.data_dir = data_dir
        self.overrides = dict(overrides or {})
        self.clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.broker: Broker | None = None
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> RunningBroker:
        props = {"log.dirs": str(self.data_dir), "listeners": f"PLAINTEXT://127.0.0.1:{self.port}"}
        props.update(self.overrides)
        started: Future[None] = Future()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self.broker = Broker(BrokerConfig(props), self.clock)
                loop.run_until_complete(self.broker.start())
            except BaseException as e:
                started.set_exception(e)
                return
            self.port = self.broker.bound[1]
            started.set_result(None)
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="odradek-broker", daemon=True)
        self._thread.start()
        started.result(timeout=_START_TIMEOUT_S)
        return self

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run ``coro`` on the broker's loop and return its result (for looking inside)."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self) -> None:
        """A clean shutdown, as SIGTERM gives."""
        if self._loop is None or self.broker is None:
            return
        self.call(self.broker.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(timeout=10)
        self._loop.close()
        self._loop = None
        self.broker = None

    def listener_bootstrap(self, name: str) -> str:
        """``host:port`` of the listener ``name`` (its bound port: ``listeners`` may ask for 0)."""
        assert self.broker is not None
        host, port = self.broker.bound_listeners[name]
        return f"{host}:{port}"

    def restart(self) -> RunningBroker:
        """Stop cleanly and start again on the same port and data."""
        self.stop()
        return self.start()


@contextlib.contextmanager
def running_broker(
    data_dir: str | Path | None = None, clock: Clock | None = None, **overrides: str
) -> Iterator[RunningBroker]:
    """A broker for the duration of the block. Overrides use Kafka's names with ``_`` for ``.``:
    ``running_broker(num_partitions="3")`` sets ``num.partitions=3``."""
    own_dir = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="odradek-")) if own_dir else Path(data_dir or "")
    props = {key.replace("_", "."): value for key, value in overrides.items()}
    broker = RunningBroker(directory, props, clock).start()
    try:
        yield broker
    finally:
        broker.stop()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


class BrokerProcess:
    """``odradek serve`` as a child process on a free port, for crash and CLI tests (with no
    schema registry unless ``-o schema.registry.listener=...`` asks for one)."""

    def __init__(
        self,
        data_dir: Path,
        *extra_args: str,
        port: int = 0,
        nofile: int | None = None,
        host: str = "127.0.0.1",
        wrapper: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        # Added to the environment (PYTHONPATH: another checkout's code, for a benchmark's
        # baseline).
        self.env = dict(env or {})
        self.extra_args = extra_args
        self.port = port
        # RLIMIT_NOFILE of the broker process (soft and hard), for tests of many partitions.
        self.nofile = nofile
        self.start_timeout_s: float = _START_TIMEOUT_S
        # ``wrapper`` runs the broker through another command (``ip netns exec <ns>``: a broker
        # in a network namespace of its own, listening on that namespace's ``host``).
        self.host = host
        self.wrapper = tuple(wrapper)
        self.process: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> BrokerProcess:
        # A lone ``odradek serve`` serves the schema registry on port 8081 unless told
        # otherwise: not here, unless asked (-o schema.registry.listener=HOST:PORT). A fixed
        # port is no place for a test's broker, and the registry's web server is a part of
        # every start.
        asked = any(arg.startswith("schema.registry.listener=") for arg in self.extra_args)
        command = [
            *self.wrapper,
            sys.executable,
            "-m",
            "odradek",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            f"{self.host}:{self.port}",
            *(() if asked else ("-o", "schema.registry.listener=")),
            *self.extra_args,
        ]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
            preexec_fn=None if self.nofile is None else self._limit_files,
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("broker exited before listening:\n" + "".join(self.output))
            self.output.append(line)
            found = re.search(r"listening on [^ ]+:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                threading.Thread(target=self._drain, daemon=True).start()
                return self
        # Where it is stuck (every thread's stack, on SIGUSR1), then not left running: a broker
        # still starting keeps its port and, once registered, its id, and the next start would
        # fail on either.
        drain = threading.Thread(target=self._drain, daemon=True)
        drain.start()
        self.process.send_signal(signal.SIGUSR1)
        time.sleep(1)
        self.process.kill()
        self.process.wait()
        drain.join(5)
        raise RuntimeError("broker did not start listening:\n" + "".join(self.output))

    def _limit_files(self) -> None:
        assert self.nofile is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def _drain(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def kill(self) -> None:
        """kill -9: no shutdown work at all."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def terminate(self, timeout: float = 20) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


@pytest.fixture
def odradek_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """A fresh broker for one test, with ``auto.create.topics.enable`` on as Kafka's default."""
    with running_broker(tmp_path_factory.mktemp("odradek")) as broker:
        yield broker


@pytest.fixture
def odradek_bootstrap(odradek_broker: RunningBroker) -> str:
    return odradek_broker.bootstrap


ZOOKEEPER_SERVER_SH = Path("/usr/share/zookeeper/bin/zkServer.sh")
ZOOKEEPER_START_TIMEOUT_S = 60


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def zookeeper_four_letter_word(host: str, port: int, word: str, timeout: float = 2) -> str:
    """Send one of ZooKeeper's four-letter commands (``ruok``, ``stat``, ...) and return the
    answer ('' when nothing answers)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """A standalone ZooKeeper on a free port of 127.0.0.1 with its own data directory.

    Started with ``zkServer.sh start-foreground`` (which execs Java, so the child process is the
    server itself) from a generated ``zoo.cfg``. :meth:`kill` and :meth:`restart` keep the port
    and the data directory, so a restarted server has the znodes (and the sessions) it had.
    """

    def __init__(
        self, directory: Path | None = None, tick_time_ms: int = 500, host: str = "127.0.0.1"
    ) -> None:
        self._own_dir = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix="odradek-zk-"))
        self.tick_time_ms = tick_time_ms
        self.host = host
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        """``zookeeper.connect`` for this server, under ``chroot`` (e.g. ``/test-1``) if given."""
        return self.connect + chroot

    def start(self) -> ZooKeeperServer:
        if not ZOOKEEPER_SERVER_SH.exists():
            raise RuntimeError(
                f"ZooKeeper is not installed ({ZOOKEEPER_SERVER_SH} is missing): the cluster "
                "tests need Debian's zookeeper package; scripts/setup.sh installs it"
            )
        if self.port == 0:
            self.port = free_port(self.host)
        conf_dir = self.directory / "conf"
        data_dir = self.directory / "data"
        conf_dir.mkdir(parents=True, exist_ok=True)
        data_dir.mkdir(parents=True, exist_ok=True)
        config = conf_dir / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={data_dir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            # Sessions as short as two ticks, so that tests can let one expire quickly.
            f"minSessionTimeout={2 * self.tick_time_ms}\n"
        )
        log_path = self.directory / "zookeeper.out"
        with open(log_path, "ab") as out:
            self.process = subprocess.Popen(
                [str(ZOOKEEPER_SERVER_SH), "start-foreground", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={
                    **os.environ,
                    "ZOOCFGDIR": str(conf_dir),
                    "ZOO_LOG_DIR": str(self.directory),
                    "JMXDISABLE": "true",
                },
            )
        deadline = time.monotonic() + ZOOKEEPER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.process.returncode} before answering:\n"
                    + log_path.read_text(errors="replace")[-4000:]
                )
            # ruok answers imok before the server serves; srvr tells when it does.
            if zookeeper_four_letter_word(
                self.host, self.port, "ruok"
            ) == "imok" and "Mode:" in zookeeper_four_letter_word(self.host, self.port, "srvr"):
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(
            f"ZooKeeper did not answer ruok within {ZOOKEEPER_START_TIMEOUT_S} s:\n"
            + log_path.read_text(errors="replace")[-4000:]
        )

    def kill(self) -> None:
        """kill -9: the server goes away at once; its data directory stays."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()
        self.process = None

    def restart(self) -> ZooKeeperServer:
        """Kill and start again on the same port and data."""
        self.kill()
        return self.start()

    def stop(self) -> None:
        """Kill the server and remove its data directory (if this object made it)."""
        self.kill()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperServer]:
    """One ZooKeeper for the whole test session; use ``zookeeper_connect`` for a test's own
    chroot. Tests that kill or restart ZooKeeper start a :class:`ZooKeeperServer` of their own."""
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture
def zookeeper_connect(zookeeper: ZooKeeperServer) -> str:
    """``zookeeper.connect`` with a chroot no other test uses."""
    return zookeeper.connect_string(f"/odradek-test-{uuid.uuid4().hex[:12]}")


class RunningCluster:
    """A cluster on one machine: a ZooKeeper of its own (or a chroot of a given one) and
    ``size`` brokers as ``odradek serve`` processes (ids 1..size), each on a free port of
    127.0.0.1 with its own data directory under ``directory``.

    Brokers keep their port and data across :meth:`kill` / :meth:`restart`, as a restarted
    machine would. ``settings`` are broker configs given to every broker (``-o key=value``);
    the defaults shorten ZooKeeper's session timeout so that a killed broker is noticed in
    seconds, and give ``__consumer_offsets`` few partitions.
    """

    DEFAULTS = {
        "zookeeper.session.timeout.ms": "6000",
        "offsets.topic.num.partitions": "3",
        "group.initial.rebalance.delay.ms": "0",
    }

    def __init__(
        self,
        directory: Path,
        size: int = 3,
        *,
        zookeeper: ZooKeeperServer | None = None,
        settings: dict[str, str] | None = None,
        racks: dict[int, str] | None = None,
        hosts: Mapping[int, str] | None = None,
        wrappers: Mapping[int, Sequence[str]] | None = None,
    ) -> None:
        self.directory = directory
        self.racks = racks or {}
        # Where each broker runs when not on 127.0.0.1 of this namespace (see BrokerProcess).
        self.hosts = dict(hosts or {})
        self.wrappers = dict(wrappers or {})
        self.size = size
        self._own_zookeeper = zookeeper is None
        self.zookeeper = zookeeper or ZooKeeperServer(directory / "zookeeper")
        self.chroot = f"/odradek-{uuid.uuid4().hex[:8]}"
        self.settings = {**self.DEFAULTS, **(settings or {})}
        self.brokers: dict[int, BrokerProcess] = {}

    @property
    def zookeeper_connect(self) -> str:
        return self.zookeeper.connect_string(self.chroot)

    @property
    def bootstrap(self) -> str:
        """Every broker's address, comma-separated (clients need only one live)."""
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self) -> RunningCluster:
        """Start ZooKeeper (if this cluster owns it) and every broker; a start that fails stops
        what it started (``with`` runs no ``__exit__`` when ``__enter__`` raises)."""
        try:
            if self._own_zookeeper:
                self.zookeeper.start()
            for broker_id in range(1, self.size + 1):
                self.start_broker(broker_id)
            # Started when every broker knows every other: a broker learns of the others from
            # ZooKeeper's watches, a moment after they listen (a topic created before that
            # would be refused a replication factor of the whole cluster).
            wait_until(
                lambda: all(self._sees_everyone(b) for b in self.brokers),
                _START_TIMEOUT_S,
                0.05,
                "every broker seeing every other",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _sees_everyone(self, broker_id: int) -> bool:
        try:
            connection = BlockingConnection.open(self.brokers[broker_id].bootstrap, timeout_s=5)
        except (ClientError, OSError):
            return False
        try:
            answer = connection.request(3, {"topics": [], "allow_auto_topic_creation": False})
        except (ClientError, OSError):
            return False
        finally:
            connection.close()
        return len(answer.brokers) == len(self.brokers)

    def start_broker(self, broker_id: int, **settings: str) -> BrokerProcess:
        """Start broker ``broker_id`` (again, on its port and data, if it ran before)."""
        overrides = {
            **self.settings,
            "zookeeper.connect": self.zookeeper_connect,  # a broker's own path to it may differ
            **settings,
            "broker.id": str(broker_id),
        }
        if broker_id in self.racks:
            overrides["broker.rack"] = self.racks[broker_id]
        args = [arg for key, value in overrides.items() for arg in ("-o", f"{key}={value}")]
        previous = self.brokers.get(broker_id)
        broker = BrokerProcess(
            self.directory / f"broker-{broker_id}",
            *args,
            port=previous.port if previous is not None else 0,
            host=self.hosts.get(broker_id, "127.0.0.1"),
            wrapper=self.wrappers.get(broker_id, ()),
        )
        self.brokers[broker_id] = broker.start()
        return broker

    def kill(self, broker_id: int) -> None:
        """kill -9 of one broker."""
        self.brokers[broker_id].kill()

    def terminate(self, broker_id: int, timeout: float = 60) -> int:
        """SIGTERM (a controlled shutdown) of one broker; its exit code."""
        return self.brokers[broker_id].terminate(timeout)

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the process stays, answers nothing, and its ZooKeeper session lapses."""
        process = self.brokers[broker_id].process
        assert process is not None
        process.send_signal(signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        process = self.brokers[broker_id].process
        assert process is not None
        process.send_signal(signal.SIGCONT)

    def is_running(self, broker_id: int) -> bool:
        process = self.brokers[broker_id].process
        return process is not None and process.poll() is None

    def stop(self) -> None:
        """SIGTERM every broker still running (SIGKILL one that does not stop), then ZooKeeper."""
        for broker_id in self.brokers:
            if self.is_running(broker_id):
                self.resume(broker_id)
                try:
                    self.terminate(broker_id, timeout=30)
                except subprocess.TimeoutExpired:
                    self.kill(broker_id)
        if self._own_zookeeper:
            self.zookeeper.stop()

    def output(self, broker_id: int) -> str:
        """What broker ``broker_id`` logged (across its restarts: the latest run only)."""
        return "".join(self.brokers[broker_id].output)

    def __enter__(self) -> RunningCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_until(
    condition: Any, timeout_s: float = 30, interval_s: float = 0.1, what: str = "condition"
) -> Any:
    """Poll ``condition()`` until it returns something true (returned) or ``timeout_s`` passes
    (AssertionError): for states other processes reach, never to let time pass."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"{what} not reached within {timeout_s} s (last: {last!r})")


@pytest.fixture
def odradek_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    """Three brokers on a ZooKeeper of their own, stopped after the test."""
    with RunningCluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


class TestCertificateAuthority:
    """A certificate authority made for one test run (with the ``cryptography`` package): its
    certificate in ``ca_file`` (a PEM trust store for brokers and clients), and :meth:`issue` for
    server and client certificates signed by it. Keys are fresh and never leave ``directory``."""

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, directory: Path, name: str = "odradek test CA") -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.ca_file = directory / "ca.pem"
        self.ca_file.write_bytes(_pem_certificate(self.certificate))

    def issue(
        self,
        file_stem: str,
        subject: dict[str, str],
        *,
        server: bool = False,
        expired: bool = False,
        key_password: str | None = None,
    ) -> IssuedCertificate:
        """A certificate for ``subject`` (attribute name → value, most general first:
        ``{"O": "odradek", "OU": "eng", "CN": "alice"}``), valid for localhost and 127.0.0.1 if
        ``server``; ``expired`` makes one whose validity ended yesterday."""
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        oids = {
            "CN": NameOID.COMMON_NAME,
            "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "O": NameOID.ORGANIZATION_NAME,
            "L": NameOID.LOCALITY_NAME,
            "ST": NameOID.STATE_OR_PROVINCE_NAME,
            "C": NameOID.COUNTRY_NAME,
        }
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (
            (now - datetime.timedelta(days=10), now - datetime.timedelta(days=1))
            if expired
            else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30))
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(oids[k], v) for k, v in subject.items()]))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
        certificate = builder.sign(self._key, hashes.SHA256())
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(key_password.encode())
            if key_password
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        cert_pem = _pem_certificate(certificate) + _pem_certificate(self.certificate)
        issued = IssuedCertificate(
            self.directory / f"{file_stem}.crt",
            self.directory / f"{file_stem}.key",
            self.directory / f"{file_stem}.keystore.pem",
        )
        issued.cert_file.write_bytes(cert_pem)
        issued.key_file.write_bytes(key_pem)
        issued.key_file.chmod(0o600)
        # Kafka's PEM key store: the private key and the certificate chain in one file.
        issued.keystore_file.write_bytes(key_pem + cert_pem)
        issued.keystore_file.chmod(0o600)
        return issued


@dataclasses.dataclass(frozen=True)
class IssuedCertificate:
    """Files of one issued certificate: the chain (leaf first), the key, and both in one PEM
    key store (``ssl.keystore.location``)."""

    cert_file: Path
    key_file: Path
    keystore_file: Path


def _pem_certificate(certificate: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    pem: bytes = certificate.public_bytes(serialization.Encoding.PEM)
    return pem


def tls_broker_settings(
    ca: TestCertificateAuthority, server: IssuedCertificate, listener: str | None = None
) -> dict[str, str]:
    """Broker properties for a TLS listener with the test CA (``listener`` prefixes them as
    ``listener.name.<listener>.``)."""
    prefix = f"listener.name.{listener.lower()}." if listener else ""
    return {
        f"{prefix}ssl.keystore.type": "PEM",
        f"{prefix}ssl.keystore.location": str(server.keystore_file),
        f"{prefix}ssl.truststore.location": str(ca.ca_file),
    }
