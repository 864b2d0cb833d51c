"""kcat (Debian's, on its own librdkafka) over SSL with a client certificate and over SASL_SSL
with SCRAM-SHA-512."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from .conftest import SecureBroker

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed")


def kcat(secure: SecureBroker, listener: str, *args: str, stdin: bytes | None = None) -> str:
    assert KCAT is not None
    security = ["-X", f"ssl.ca.location={secure.ca.ca_file}"]
    if listener == "MTLS":
        security += [
            "-X",
            "security.protocol=SSL",
            "-X",
            f"ssl.certificate.location={secure.client.cert_file}",
            "-X",
            f"ssl.key.location={secure.client.key_file}",
        ]
    else:
        security += [
            "-X",
            "security.protocol=SASL_SSL",
            "-X",
            "sasl.mechanisms=SCRAM-SHA-512",
            "-X",
            "sasl.username=carol",
            "-X",
            "sasl.password=carol-secret",
        ]
    done = subprocess.run(
        [KCAT, "-b", secure.bootstrap(listener), *security, *args],
        input=stdin,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


@pytest.mark.parametrize("listener", ["MTLS", "SASL_SSL"])
def test_kcat_produce_and_consume(secure: SecureBroker, listener: str) -> None:
    topic = f"kcat-{listener.lower()}-{uuid.uuid4().hex[:8]}"
    lines = [f"line-{i}" for i in range(10)]
    kcat(secure, listener, "-P", "-t", topic, stdin="".join(f"{x}\n" for x in lines).encode())
    out = kcat(secure, listener, "-C", "-t", topic, "-o", "beginning", "-e")
    assert out.split() == lines
