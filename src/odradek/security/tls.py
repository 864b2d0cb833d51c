"""TLS for SSL and SASL_SSL listeners, with Python's ``ssl``, under Kafka's config names.

The key store is PEM only (``ssl.keystore.type=PEM``): ``ssl.keystore.location`` names a file
holding the private key and the certificate chain (the key may be encrypted with
``ssl.key.password``), or ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain`` give them
inline. ``ssl.truststore.location`` (or inline ``ssl.truststore.certificates``) holds the CAs that
client certificates are checked against when ``ssl.client.auth`` is ``requested`` or
``required``. Every setting may be given for one listener as ``listener.name.<name>.<setting>``.

A client certificate's principal is Kafka's DEFAULT ``ssl.principal.mapping.rules``: ``User:``
and the subject's distinguished name as Java's ``X500Principal.getName()`` writes it (RFC 2253:
the most specific name first, ``CN=alice,OU=eng,O=example``).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from odradek.config import BrokerConfig, ConfigError

ANONYMOUS = "User:ANONYMOUS"

_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of ``listener``; raises :class:`ConfigError` for missing or bad files."""

    def setting(name: str) -> str | None:
        return config.listener_setting(listener, name)

    for name in ("ssl.keystore.type", "ssl.truststore.type"):
        if (setting(name) or "PEM").upper() != "PEM":
            raise ConfigError(f"{name} of listener {listener}: only PEM is supported")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    password = setting("ssl.key.password")
    location = setting("ssl.keystore.location")
    chain, key = setting("ssl.keystore.certificate.chain"), setting("ssl.keystore.key")
    try:
        if location:
            context.load_cert_chain(location, password=password)
        elif chain and key:
            _load_inline_cert_chain(context, chain, key, password)
        else:
            raise ConfigError(
                f"listener {listener} uses TLS but sets neither ssl.keystore.location nor "
                "ssl.keystore.certificate.chain with ssl.keystore.key"
            )
        client_auth = (setting("ssl.client.auth") or "none").lower()
        if client_auth not in _CLIENT_AUTH:
            raise ConfigError(f"ssl.client.auth of listener {listener}: {client_auth!r}")
        context.verify_mode = _CLIENT_AUTH[client_auth]
        truststore = setting("ssl.truststore.location")
        inline_trust = setting("ssl.truststore.certificates")
        if truststore:
            context.load_verify_locations(cafile=truststore)
        elif inline_trust:
            context.load_verify_locations(cadata=inline_trust)
        elif client_auth != "none":
            raise ConfigError(
                f"listener {listener} has ssl.client.auth={client_auth} but no "
                "ssl.truststore.location"
            )
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"TLS settings of listener {listener}: {e}") from e
    return context


def _load_inline_cert_chain(
    context: ssl.SSLContext, chain: str, key: str, password: str | None
) -> None:
    # ssl reads a key only from a file: one readable by this user alone, removed at once.
    fd, name = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as file:
            file.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(name, password=password)
    finally:
        Path(name).unlink(missing_ok=True)


def certificate_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str:
    """The principal of a TLS peer: ``User:<subject DN>`` (RFC 2253's order and short names,
    as Kafka's DEFAULT mapping prints ``X500Principal.getName()``), or ANONYMOUS without a
    certificate. The certificate was verified against the trust store, so ``ssl`` has parsed
    it."""
    if ssl_object is None:
        return ANONYMOUS
    peer = ssl_object.getpeercert()
    if not peer:
        return ANONYMOUS
    subject = peer.get("subject", ())
    parts = []
    for rdn in reversed(subject):  # most specific first, as RFC 2253 writes a DN
        parts.append(
            "+".join(f"{_SHORT_NAMES.get(name, name)}={_escape(value)}" for name, value in rdn)
        )
    return "User:" + ",".join(parts) if parts else ANONYMOUS


# The attribute types RFC 2253 (and Java's X500Principal) write by their short names.
_SHORT_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    """RFC 2253's escapes: ``,+"\\<>;`` always, ``#`` and a space at the start, a space at
    the end."""
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
