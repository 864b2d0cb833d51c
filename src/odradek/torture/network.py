"""Network namespaces for a campaign: each broker in one of its own, all joined by a bridge.

Layout (``a.b`` from the process id, so two campaigns on one machine do not collide)::

    root namespace: bridge <prefix>br  10.a.b.1 (clients)  10.a.b.2 (ZooKeeper)
    namespace <prefix>n<id>: eth0 10.a.b.<10+id>, a veth pair whose other end
                             <prefix>v<id> is a port of the bridge

Faults are iptables rules (``iptables-legacy``: the ``statistic`` match works there) inside a
broker's namespace: dropping packets from and to a peer's address cuts that link both ways (the
root namespace's tables are never touched). :meth:`heal` flushes them; removing a namespace
removes its rules and its veth pair, and :meth:`remove` removes every namespace and the bridge.
Creating and removing need root (``CAP_NET_ADMIN``); every step runs ``ip`` or ``iptables-legacy``
and raises :class:`NetworkError` with its output when one fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence

IPTABLES = "iptables-legacy"


class NetworkError(RuntimeError):
    pass


def missing_tools() -> list[str]:
    """What this machine lacks to make the network (empty when it can)."""
    missing = [tool for tool in ("ip", IPTABLES) if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (network namespaces need CAP_NET_ADMIN)")
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

    def rules(self, broker: int) -> str:
        return _run(["ip", "netns", "exec", self.namespace(broker), IPTABLES, "-S"]).stdout

    def heal(self) -> None:
        """Remove every rule: all links whole again."""
        for broker in self.brokers:
            self._iptables(broker, "-F", "INPUT")
            self._iptables(broker, "-F", "OUTPUT")

    def remove(self) -> None:
        """Remove the namespaces (their rules and veth pairs go with them) and the bridge;
        what is not there is skipped. Processes still in a namespace must be ended first."""
        present = _run(["ip", "netns", "list"], check=False).stdout.split()
        for broker in self.brokers:
            if self.namespace(broker) in present:
                _run(["ip", "netns", "del", self.namespace(broker)], check=False)
            _run(["ip", "link", "del", f"{self.prefix}v{broker}"], check=False)
        _run(["ip", "link", "del", self.bridge], check=False)
        self._made = False

    def leftovers(self) -> list[str]:
        """Namespaces and links of this network that still exist (empty after :meth:`remove`)."""
        names = _run(["ip", "netns", "list"], check=False).stdout.split()
        links = _run(["ip", "-o", "link"], check=False).stdout
        found = [n for n in names if n.startswith(self.prefix)]
        found += [
            line.split(":")[1].strip().split("@")[0]
            for line in links.splitlines()
            if line.count(":") >= 2 and line.split(":")[1].strip().startswith(self.prefix)
        ]
        return found
