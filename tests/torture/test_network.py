"""The campaign's network faults on real namespaces: a slow link really holds packets at the
network layer, and its rules and delayer go away when healed, when the network is removed, and
when whoever started the delayer is gone. Needs root, ``ip``, ``iptables-legacy`` and
NetfilterQueue (``scripts/setup.sh --test``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from odradek.torture.network import Network, missing_tools

pytestmark = pytest.mark.slow

DELAY_MS = 100
ECHO_PORT = 9099
# An echo server: one line back for each line, on every connection in turn.
ECHO = (
    "import socket, sys\n"
    "server = socket.create_server((sys.argv[1], int(sys.argv[2])))\n"
    "print('up', flush=True)\n"
    "while True:\n"
    "    connection, _ = server.accept()\n"
    "    with connection, connection.makefile('rwb') as stream:\n"
    "        for line in stream:\n"
    "            stream.write(line)\n"
    "            stream.flush()\n"
)


@pytest.fixture
def network() -> Iterator[Network]:
    missing = missing_tools()
    assert not missing, f"network faults cannot be made here: {missing} (scripts/setup.sh --test)"
    net = Network([1], tag=os.getpid() + 5000).create()
    try:
        yield net
    finally:
        net.remove()
    assert net.leftovers() == []


@pytest.fixture
def echo(network: Network) -> Iterator[socket.socket]:
    """A connection from the root namespace to an echo server in broker 1's namespace."""
    server = subprocess.Popen(
        [*network.wrapper(1), sys.executable, "-c", ECHO, network.ip(1), str(ECHO_PORT)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "up"
        connection = socket.create_connection((network.ip(1), ECHO_PORT), timeout=10)
        with connection:
            yield connection
    finally:
        server.kill()
        server.wait()


def round_trip_s(connection: socket.socket) -> float:
    started = time.monotonic()
    connection.sendall(b"ping\n")
    assert connection.recv(16) == b"ping\n"
    return time.monotonic() - started


def test_a_slow_link_holds_every_packet_each_way(network: Network, echo: socket.socket) -> None:
    network.slow(1, DELAY_MS, max_s=60)
    rules = network.rules(1)
    assert "-A INPUT -i eth0 -j NFQUEUE --queue-num 1 --queue-bypass" in rules
    assert "-A OUTPUT -o eth0 -j NFQUEUE --queue-num 1 --queue-bypass" in rules
    # The line goes in (held) and comes back out (held again): never sooner than both delays.
    assert min(round_trip_s(echo) for _ in range(3)) >= 2 * DELAY_MS / 1000


def test_healing_removes_the_rules_and_ends_the_delayer(
    network: Network, echo: socket.socket
) -> None:
    network.slow(1, DELAY_MS, max_s=60)
    delayer = network.delayers[1]
    round_trip_s(echo)
    network.heal()
    assert "NFQUEUE" not in network.rules(1)
    assert delayer.poll() == 0
    assert network.delayers == {}
    (report,) = network.delayer_reports
    held = int(report.split("held ")[1].split()[0])
    assert held >= 2  # the line in and the line out, at least
    round_trip_s(echo)


def test_a_delayer_ends_when_its_starter_is_gone_and_the_link_then_passes_packets(
    network: Network, echo: socket.socket
) -> None:
    network.slow(1, DELAY_MS, max_s=60)
    delayer = network.delayers[1]
    assert delayer.stdin is not None
    delayer.stdin.close()  # what the runner's death does
    assert delayer.wait(10) == 0
    # The rules stay (only heal or the namespace's removal ends them), and let packets by.
    assert "NFQUEUE" in network.rules(1)
    round_trip_s(echo)


def test_a_delayer_ends_after_its_longest_life(network: Network) -> None:
    network.slow(1, DELAY_MS, max_s=0.5)
    assert network.delayers[1].wait(10) == 0


def test_removing_the_network_ends_its_delayers(network: Network) -> None:
    network.slow(1, DELAY_MS, max_s=60)
    delayer = network.delayers[1]
    network.remove()
    assert delayer.poll() is not None
    assert network.leftovers() == []


def test_a_link_cannot_be_slowed_twice(network: Network) -> None:
    network.slow(1, DELAY_MS, max_s=60)
    with pytest.raises(RuntimeError, match="already slow"):
        network.slow(1, DELAY_MS, max_s=60)
