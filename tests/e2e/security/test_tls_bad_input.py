"""What a TLS listener refuses, each with a log line naming the cause, while other connections
go on being served: plaintext Kafka bytes on a TLS port, a TLS hello on a plaintext port, an
expired client certificate, one from a CA the broker does not trust, and none where one is
required. Also the principal mutual TLS gives (Kafka's DEFAULT mapping of the subject)."""

from __future__ import annotations

import socket
import ssl
import struct
import time

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.testing import IssuedCertificate
from tests.server.conftest import KafkaConnection, assert_broker_serves

from .conftest import SecureBroker

API_VERSIONS_V0 = struct.pack(">ihhih", 2 + 2 + 4 + 2 + 6, 18, 0, 7, 6) + b"tester"
WAIT_S = 10


def _address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


def _read_until_closed(sock: socket.socket | ssl.SSLSocket) -> bytes:
    """Everything the broker sends before it closes (raising if it keeps the socket open)."""
    sock.settimeout(WAIT_S)
    received = b""
    while True:
        try:
            chunk = sock.recv(4096)
        except (ConnectionResetError, ssl.SSLError):
            return received
        if not chunk:
            return received
        received += chunk


def _client_context(secure: SecureBroker, certificate: IssuedCertificate | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(secure.ca.ca_file))
    if certificate is not None:
        context.load_cert_chain(certificate.cert_file, certificate.key_file)
    return context


def _wait_for_log(caplog: pytest.LogCaptureFixture, text: str) -> None:
    # The broker logs from its own thread: give it until the deadline, without a fixed sleep.
    deadline = time.monotonic() + WAIT_S
    while text not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert text in caplog.text


def test_plaintext_request_on_a_tls_listener(
    secure: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    bystander = KafkaConnection(secure.bootstrap("PLAINTEXT"))
    with socket.create_connection(_address(secure.bootstrap("SSL"))) as sock:
        sock.sendall(API_VERSIONS_V0)
        received = _read_until_closed(sock)
    # At most a TLS alert record (content type 21), never a Kafka response.
    assert received == b"" or received[0] == 21
    _wait_for_log(caplog, "TLS handshake failed")
    assert "a plaintext client on a TLS listener?" in caplog.text
    with bystander:
        assert_broker_serves(secure.broker, bystander)


def test_tls_hello_on_a_plaintext_listener(
    secure: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    context = _client_context(secure, None)
    with (
        socket.create_connection(_address(secure.bootstrap("PLAINTEXT"))) as raw,
        pytest.raises((ssl.SSLError, ConnectionResetError, OSError)),
    ):
        raw.settimeout(WAIT_S)
        context.wrap_socket(raw, server_hostname="localhost")
    _wait_for_log(caplog, "a TLS handshake on a plaintext listener?")


@pytest.mark.parametrize(
    ("certificate", "reason"),
    [
        ("expired", "certificate has expired"),
        ("stranger", "CERTIFICATE_VERIFY_FAILED: self-signed certificate in certificate chain"),
        (None, "PEER_DID_NOT_RETURN_A_CERTIFICATE"),
    ],
)
def test_refused_client_certificates(
    secure: SecureBroker, caplog: pytest.LogCaptureFixture, certificate: str | None, reason: str
) -> None:
    bystander = KafkaConnection(secure.bootstrap("PLAINTEXT"))
    issued = getattr(secure, certificate) if certificate else None
    context = _client_context(secure, issued)
    with socket.create_connection(_address(secure.bootstrap("MTLS"))) as raw:
        raw.settimeout(WAIT_S)
        try:
            # With TLS 1.3 the client's handshake ends before the broker has checked its
            # certificate: the refusal then arrives on the first read.
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(API_VERSIONS_V0)
                assert _read_until_closed(tls) == b""
        except (ssl.SSLError, ConnectionResetError):
            pass
    _wait_for_log(caplog, reason)
    assert "TLS handshake failed" in caplog.text
    with bystander:
        assert_broker_serves(secure.broker, bystander)


def test_mutual_tls_principal_is_the_subject(secure: SecureBroker) -> None:
    context = _client_context(secure, secure.client)
    with (
        socket.create_connection(_address(secure.bootstrap("MTLS"))) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.settimeout(WAIT_S)
        tls.sendall(API_VERSIONS_V0)
        (size,) = struct.unpack(">i", tls.recv(4))
        body = b""
        while len(body) < size:
            body += tls.recv(size - len(body))
        correlation_id, error_code = struct.unpack_from(">ih", body)
        assert (correlation_id, error_code) == (7, ErrorCode.none)
        assert secure.broker.broker is not None
        principals = {s.principal for s in secure.broker.broker.sessions() if s.listener == "MTLS"}
    assert principals == {"User:CN=alice,OU=eng,O=odradek"}


def test_tls_without_a_client_certificate_is_anonymous(secure: SecureBroker) -> None:
    context = _client_context(secure, None)
    with (
        socket.create_connection(_address(secure.bootstrap("SSL"))) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.settimeout(WAIT_S)
        tls.sendall(API_VERSIONS_V0)
        assert len(tls.recv(4)) == 4
        assert secure.broker.broker is not None
        principals = {s.principal for s in secure.broker.broker.sessions() if s.listener == "SSL"}
    assert principals == {"User:ANONYMOUS"}
