"""Network namespaces for a campaign: each broker in one of its own, all joined by a bridge.

Layout (``a.b`` from the process id, so two campaigns on one machine do not collide)::

    root namespace: bridge <prefix>br  10.a.b.1 (clients)  10.a.b.2 (ZooKeeper)
    namespace <prefix>n<id>: eth0 10.a.b.<10+id>, a veth pair whose other end
                             <prefix>v<id> is a port of the bridge

Faults are iptables rules (``iptables-legacy``: the ``statistic`` match works there) inside a
broker's namespace: dropping packets from and to a peer's address cuts that link both ways (the
root namespace's tables are never touched). A slow link queues the broker's packets on ``eth0``
to a delayer (:mod:`~odradek.torture.delay`) run in the namespace, which lets each go after the
delay; its rules carry ``--queue-bypass``, so packets pass freely whenever no delayer listens.
:meth:`heal` flushes the rules and ends the delayers; removing a namespace removes its rules and
its veth pair, and :meth:`remove` ends the delayers and removes every namespace and the bridge.
A delayer also ends by itself when the process that started it goes away (its standard input
closes) and after its longest life. Creating and removing need root (``CAP_NET_ADMIN``); every
step runs ``ip`` or ``iptables-legacy`` and raises :class:`NetworkError` with its output when
one fails.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence

IPTABLES = "iptables-legacy"
DELAYER_START_TIMEOUT_S = 30
DELAYER_STOP_TIMEOUT_S = 10


class NetworkError(RuntimeError):
    pass


def missing_tools() -> list[str]:
    """What this machine lacks to make the network (empty when it can)."""
    missing = [tool for tool in ("ip", IPTABLES) if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (network namespaces need CAP_NET_ADMIN)")
    if importlib.util.find_spec("netfilterqueue") is None:
        missing.append(
            "NetfilterQueue (slow links: pip install 'odradek[test]' with libnetfilter-queue-dev)"
        )
    return missing


def _run(command: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(command), capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise NetworkError(f"{' '.join(command)}: {result.stderr.strip() or result.stdout.strip()}")
    return result


class Network:
    """The bridge and one namespace per broker; see the module doc."""

    def __init__(self, brokers: Iterable[int], tag: int | None = None) -> None:
        tag = os.getpid() if tag is None else tag
        self.prefix = f"odt{tag % 10000}"
        self.subnet = f"10.{200 + tag % 50}.{(tag // 50) % 250}"
        self.brokers = sorted(brokers)
        self.bridge = f"{self.prefix}br"
        self.client_ip = f"{self.subnet}.1"
        self.zookeeper_ip = f"{self.subnet}.2"
        self._made = False
        self.delayers: dict[int, subprocess.Popen[str]] = {}  # broker → its slow link's delayer
        self.delayer_reports: list[str] = []  # what each ended delayer said

    def namespace(self, broker: int) -> str:
        return f"{self.prefix}n{broker}"

    def ip(self, broker: int) -> str:
        return f"{self.subnet}.{10 + broker}"

    def wrapper(self, broker: int) -> tuple[str, ...]:
        """The command prefix that runs a program in the broker's namespace."""
        return ("ip", "netns", "exec", self.namespace(broker))

    def create(self) -> Network:
        self.remove()  # what a killed earlier campaign with the same tag left
        self._made = True
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        _run(["ip", "addr", "add", f"{self.client_ip}/24", "dev", self.bridge])
        _run(["ip", "addr", "add", f"{self.zookeeper_ip}/24", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        for broker in self.brokers:
            ns, veth = self.namespace(broker), f"{self.prefix}v{broker}"
            _run(["ip", "netns", "add", ns])
            _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
            _run(["ip", "link", "set", veth, "master", self.bridge, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{self.ip(broker)}/24", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        return self

    def _iptables(self, broker: int, *rule: str) -> None:
        _run(["ip", "netns", "exec", self.namespace(broker), IPTABLES, *rule])

    def cut(self, broker: int, peer_ip: str) -> None:
        """Drop every packet between ``broker`` and ``peer_ip`` (both ways, in its namespace)."""
        self._iptables(broker, "-A", "INPUT", "-s", peer_ip, "-j", "DROP")
        self._iptables(broker, "-A", "OUTPUT", "-d", peer_ip, "-j", "DROP")

    def cut_between(self, side: Iterable[int], other: Iterable[int]) -> None:
        others = list(other)
        for broker in side:
            for peer in others:
                self.cut(broker, self.ip(peer))
                self.cut(peer, self.ip(broker))

    def lose(self, broker: int, probability: float) -> None:
        """Drop ``probability`` of the broker's packets in each direction, at random."""
        for chain in ("INPUT", "OUTPUT"):
            self._iptables(
                broker,
                "-A",
                chain,
                "-m",
                "statistic",
                "--mode",
                "random",
                "--probability",
                f"{probability:.3f}",
                "-j",
                "DROP",
            )

    def slow(self, broker: int, delay_ms: float, max_s: float) -> None:
        """Hold each of the broker's packets on ``eth0`` (in and out) ``delay_ms`` before it
        goes on, for ``max_s`` seconds at most (or until :meth:`heal`)."""
        if broker in self.delayers:
            raise NetworkError(f"broker {broker}'s link is already slow")
        queue = str(broker)
        process = subprocess.Popen(
            [
                *self.wrapper(broker),
                sys.executable,
                "-m",
                "odradek.torture.delay",
                "--queue",
                queue,
                "--delay-ms",
                f"{delay_ms:g}",
                "--max-s",
                f"{max_s:g}",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.delayers[broker] = process
        assert process.stdout is not None
        # Rules only once it listens: until then they would let packets by unheld anyway.
        first = _readline(process, DELAYER_START_TIMEOUT_S)
        if first.strip() != "bound":
            self._stop_delayer(broker)
            raise NetworkError(f"the delayer in {self.namespace(broker)} did not start: {first}")
        for chain, direction in (("INPUT", "-i"), ("OUTPUT", "-o")):
            self._iptables(
                broker,
                "-A",
                chain,
                direction,
                "eth0",
                "-j",
                "NFQUEUE",
                "--queue-num",
                queue,
                "--queue-bypass",
            )

    def _stop_delayer(self, broker: int) -> str:
        """End a delayer (it lets what it holds go first); what it printed."""
        process = self.delayers.pop(broker)
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(DELAYER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        output = ""
        for stream in (process.stdin, process.stdout):
            if stream is None:
                continue
            with contextlib.suppress(OSError, ValueError):  # a closed stdin: nothing to do
                if stream is process.stdout:
                    output = stream.read()
                stream.close()
        said = " ".join(output.split()) or "nothing"
        self.delayer_reports.append(
            f"the delayer of broker {broker} ended ({process.returncode}): {said}"
        )
        return output

    def rules(self, broker: int) -> str:
        return _run(["ip", "netns", "exec", self.namespace(broker), IPTABLES, "-S"]).stdout

    def heal(self) -> None:
        """Remove every rule and end every delayer: all links whole and fast again."""
        for broker in self.brokers:
            self._iptables(broker, "-F", "INPUT")
            self._iptables(broker, "-F", "OUTPUT")
        for broker in list(self.delayers):
            self._stop_delayer(broker)

    def remove(self) -> None:
        """End the delayers, remove the namespaces (their rules and veth pairs go with them)
        and the bridge; what is not there is skipped. Other processes still in a namespace
        must be ended first."""
        for broker in list(self.delayers):
            self._stop_delayer(broker)
        present = _run(["ip", "netns", "list"], check=False).stdout.split()
        for broker in self.brokers:
            if self.namespace(broker) in present:
                _run(["ip", "netns", "del", self.namespace(broker)], check=False)
            _run(["ip", "link", "del", f"{self.prefix}v{broker}"], check=False)
        _run(["ip", "link", "del", self.bridge], check=False)
        self._made = False

    def leftovers(self) -> list[str]:
        """Namespaces, links and delayer processes of this network that still exist (empty
        after :meth:`remove`)."""
        found = [
            f"delayer pid {p.pid} in {self.namespace(b)}"
            for b, p in self.delayers.items()
            if p.poll() is None
        ]
        names = _run(["ip", "netns", "list"], check=False).stdout.split()
        links = _run(["ip", "-o", "link"], check=False).stdout
        found += [n for n in names if n.startswith(self.prefix)]
        found += [
            line.split(":")[1].strip().split("@")[0]
            for line in links.splitlines()
            if line.count(":") >= 2 and line.split(":")[1].strip().startswith(self.prefix)
        ]
        return found


def _readline(process: subprocess.Popen[str], timeout_s: float) -> str:
    """The child's first line of output, or what it said before it ended or ``timeout_s``
    passed (then it is killed)."""
    assert process.stdout is not None
    line: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        line.append(process.stdout.readline())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)
    if line:
        return line[0]
    with contextlib.suppress(OSError):
        process.kill()
    return f"no answer within {timeout_s:.0f} s"
