"""SCRAM (RFC 5802/7677): RFC 7677's worked example byte for byte, both mechanisms end to end,
Kafka's credential text, and refusals of wrong proofs and malformed messages."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from odradek.client.security import ScramClient
from odradek.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    ScramError,
    ScramServer,
    make_credential,
)

# RFC 7677, section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def test_rfc_7677_example() -> None:
    credential = make_credential(SCRAM_SHA_256, "pencil", 4096, RFC_SALT)
    server = ScramServer(SCRAM_SHA_256, lambda user, _m: credential, RFC_SERVER_NONCE)
    server_first = server.step(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
    assert server_first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    server_final = server.step(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_client_and_server_agree(mechanism: str) -> None:
    stored = {"a,b=c": make_credential(mechanism, "secret")}
    server = ScramServer(mechanism, lambda user, _m: stored.get(user))
    client = ScramClient(mechanism, "a,b=c", "secret")
    final = client.step(server.step(client.first()))
    assert client.step(server.step(final)) is None
    assert server.username == "a,b=c"


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_wrong_password_is_refused(mechanism: str) -> None:
    credential = make_credential(mechanism, "secret")
    server = ScramServer(mechanism, lambda user, _m: credential)
    client = ScramClient(mechanism, "carol", "guess")
    final = client.step(server.step(client.first()))
    with pytest.raises(ScramError, match="invalid credentials"):
        server.step(final)
    assert not server.complete


def test_unknown_user_and_malformed_messages_are_refused() -> None:
    with pytest.raises(ScramError, match="no SCRAM-SHA-512 credential"):
        ScramServer(SCRAM_SHA_512, lambda user, _m: None).step(b"n,,n=ghost,r=abc")
    credential = make_credential(SCRAM_SHA_512, "x")
    for message in (b"p=tls-unique,,n=u,r=a", b"n,,r=abc", b"garbage", b"\xff"):
        with pytest.raises(ScramError):
            ScramServer(SCRAM_SHA_512, lambda user, _m: credential).step(message)
    server = ScramServer(SCRAM_SHA_512, lambda user, _m: credential)
    server.step(b"n,,n=u,r=abc")
    with pytest.raises(ScramError, match="nonce"):
        server.step(b"c=biws,r=other,p=AAAA")


def test_credential_text_is_kafkas_and_holds_no_password() -> None:
    credential = make_credential(SCRAM_SHA_512, "hunter2", 8192)
    text = credential.to_kafka()
    assert [part.split("=", 1)[0] for part in text.split(",")] == [
        "salt",
        "stored_key",
        "server_key",
        "iterations",
    ]
    assert text.endswith(",iterations=8192")
    assert "hunter2" not in text
    assert ScramCredential.from_kafka(text) == credential
    # Same password, new salt: a different credential.
    assert make_credential(SCRAM_SHA_512, "hunter2", 8192).to_kafka() != text


def _final_with_nonce(server_first: str, nonce: str, password: str) -> bytes:
    """A client-final message carrying ``nonce``, its proof computed the way librdkafka does
    (over the client-first-bare, the server-first as received, and this message)."""
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha512", password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    stored_key = hashlib.sha512(client_key).digest()
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"n=u,r=cn,{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, "sha512").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_librdkafka_doubled_nonce_is_accepted_other_prefixes_are_not() -> None:
    """librdkafka before 2.2 (Debian's kcat) sends r=<client nonce><combined nonce>."""
    credential = make_credential(SCRAM_SHA_512, "pw")
    for prefix, accepted in (("", True), ("cn", True), ("xx", False)):
        server = ScramServer(SCRAM_SHA_512, lambda user, _m: credential)
        server_first = server.step(b"n,,n=u,r=cn").decode()
        combined = server_first.split(",")[0][2:]
        final = _final_with_nonce(server_first, prefix + combined, "pw")
        if accepted:
            server.step(final)
            assert server.complete
        else:
            with pytest.raises(ScramError, match="nonce"):
                server.step(final)
