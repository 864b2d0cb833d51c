"""What TLS costs, and how long a SCRAM login takes, on a fresh broker process (``odradek serve``)
with a PLAINTEXT, an SSL and a SASL_SSL listener (certificates from a throwaway test CA).

For each ``--sizes`` record size: a confluent-kafka (librdkafka) producer, ``produce()`` of
``--records`` records to a one-partition topic, linger.ms=5, acks=1, counted by delivery reports;
then a consumer reading them back from offset 0 with assign(). Once over PLAINTEXT and once over
SSL, alternating for ``--rounds`` rounds (the machine's load drifts); the medians are printed with
SSL as a share of PLAINTEXT. Then ``--logins`` SCRAM-SHA-512 logins over SASL_SSL on fresh
connections with the project's SCRAM client (SaslHandshake + two SaslAuthenticate rounds, timed
after the TLS handshake), and their median and p99.

    python benchmarks/security.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from odradek.client.security import ScramClient
from odradek.security.scram import SCRAM_SHA_512
from odradek.testing import TestCertificateAuthority, free_port, tls_broker_settings


def start_broker(work: Path) -> tuple[subprocess.Popen[str], dict[str, int], Path]:
    ca = TestCertificateAuthority(work / "certs")
    server = ca.issue("broker", {"CN": "localhost"}, server=True)
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_SSL")}
    props = {
        "log.dirs": str(work / "data"),
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": SCRAM_SHA_512,
        **tls_broker_settings(ca, server),
    }
    config = work / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    process = subprocess.Popen(
        [sys.executable, "-m", "odradek", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    for line in process.stdout:
        if "listening on" in line:
            break
    else:
        raise RuntimeError("broker did not start")
    return process, ports, ca.ca_file


def client_config(listener: str, ports: dict[str, int], ca_file: Path) -> dict[str, object]:
    config: dict[str, object] = {"bootstrap.servers": f"127.0.0.1:{ports[listener]}"}
    if listener == "SSL":
        config |= {"security.protocol": "SSL", "ssl.ca.location": str(ca_file)}
    return config


def produce(config: dict[str, object], topic: str, count: int, size: int) -> float:
    """Records per second acknowledged."""
    producer = Producer(
        {**config, "linger.ms": 5, "acks": 1, "queue.buffering.max.messages": 1_000_000}
    )
    value = b"x" * size
    delivered = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1

    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    assert delivered == count, (delivered, count)
    return count / elapsed


def consume(config: dict[str, object], topic: str, count: int) -> float:
    consumer = Consumer({**config, "group.id": f"bench-{uuid.uuid4().hex}"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = 0
    started = time.perf_counter()
    while seen < count:
        seen += sum(1 for m in consumer.consume(10_000, 5) if m.error() is None)
    elapsed = time.perf_counter() - started
    consumer.close()
    return count / elapsed


def _request(sock: ssl.SSLSocket, api_key: int, version: int, body: bytes, cid: int) -> bytes:
    client_id = b"bench"
    header = struct.pack(">hhih", api_key, version, cid, len(client_id)) + client_id
    if version >= 2:  # SaslAuthenticate v2 is a flexible version: an empty tagged-field section
        header += b"\0"
    frame = header + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    (size,) = struct.unpack(">i", _read(sock, 4))
    return _read(sock, size)


def _read(sock: ssl.SSLSocket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def scram_login_ms(port: int, ca_file: Path) -> float:
    """One SCRAM-SHA-512 login (SaslHandshake v1, SaslAuthenticate v1 twice) after TLS."""
    context = ssl.create_default_context(cafile=str(ca_file))
    with (
        socket.create_connection(("127.0.0.1", port)) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as sock,
    ):
        started = time.perf_counter()
        mechanism = SCRAM_SHA_512.encode()
        answer = _request(sock, 17, 1, struct.pack(">h", len(mechanism)) + mechanism, 1)
        assert struct.unpack_from(">h", answer, 4)[0] == 0, answer
        client = ScramClient(SCRAM_SHA_512, "bench", "bench-secret")
        token = client.first()
        for cid in (2, 3):
            answer = _request(sock, 36, 1, struct.pack(">i", len(token)) + token, cid)
            (error,) = struct.unpack_from(">h", answer, 4)
            assert error == 0, answer
            (message_len,) = struct.unpack_from(">h", answer, 6)
            offset = 8 + max(message_len, 0)
            (auth_len,) = struct.unpack_from(">i", answer, offset)
            auth = answer[offset + 4 : offset + 4 + auth_len]
            if cid == 2:
                token = client.step(auth)
            else:
                assert client.step(auth) is None
        return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--records", type=int, default=300_000, help="for 100 B; fewer for 1 KB")
    parser.add_argument("--logins", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-bench-security-") as tmp:
        process, ports, ca_file = start_broker(Path(tmp))
        try:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "odradek",
                    "users",
                    "add",
                    "--user",
                    "bench",
                    "--password",
                    "bench-secret",
                    "--bootstrap-server",
                    f"127.0.0.1:{ports['PLAINTEXT']}",
                ],
                check=True,
                capture_output=True,
            )
            for size in (int(s) for s in args.sizes.split(",")):
                count = args.records if size <= 100 else max(args.records * 100 // size, 10_000)
                results: dict[tuple[str, str], list[float]] = {}
                for round_ in range(args.rounds):
                    order = ("PLAINTEXT", "SSL") if round_ % 2 == 0 else ("SSL", "PLAINTEXT")
                    for listener in order:
                        config = client_config(listener, ports, ca_file)
                        topic = f"bench-{listener.lower()}-{uuid.uuid4().hex[:8]}"
                        rates = (produce(config, topic, count, size), consume(config, topic, count))
                        for kind, rate in zip(("produce", "consume"), rates, strict=True):
                            results.setdefault((kind, listener), []).append(rate)
                        print(
                            f"{size} B {listener:9s} round {round_}: produce {rates[0]:,.0f} "
                            f"rec/s, consume {rates[1]:,.0f} rec/s",
                            flush=True,
                        )
                for kind in ("produce", "consume"):
                    plain = statistics.median(results[(kind, "PLAINTEXT")])
                    tls = statistics.median(results[(kind, "SSL")])
                    print(
                        f"== {size} B {kind}: PLAINTEXT {plain:,.0f} rec/s "
                        f"({plain * size / 1e6:.1f} MB/s), SSL {tls:,.0f} rec/s "
                        f"({tls * size / 1e6:.1f} MB/s): SSL = {tls / plain:.0%} of PLAINTEXT"
                    )
            logins = sorted(scram_login_ms(ports["SASL_SSL"], ca_file) for _ in range(args.logins))
            p99 = logins[min(len(logins) - 1, int(len(logins) * 0.99))]
            print(
                f"== SCRAM-SHA-512 login over SASL_SSL ({args.logins} logins): median "
                f"{statistics.median(logins):.1f} ms, p99 {p99:.1f} ms"
            )
        finally:
            process.terminate()
            process.wait(30)


if __name__ == "__main__":
    main()
