"""The REST client of ``odradek schemas`` and the console (odradek.registry.client) against a
broker's registry: answers, Confluent's errors with their codes, and a registry not there."""

from __future__ import annotations

import socket

import pytest

from odradek.registry.client import RegistryCallError, RegistryClient, quote
from odradek.testing import RunningBroker

from .conftest import registry_url


def test_answers_and_confluents_errors(registry_broker: RunningBroker) -> None:
    client = RegistryClient(registry_url(registry_broker), timeout_s=30)
    subject = "a subject/with a slash"
    registered = client.call("POST", f"/subjects/{quote(subject)}/versions", {"schema": '"int"'})
    assert client.call("GET", "/subjects") == [subject]
    found = client.call("GET", f"/subjects/{quote(subject)}/versions/latest")
    assert (found["id"], found["version"], found["schema"]) == (registered["id"], 1, '"int"')
    with pytest.raises(RegistryCallError) as missing:
        client.call("GET", f"/subjects/{quote(subject)}/versions/7")
    assert (missing.value.status, missing.value.code) == (404, 40402)
    assert str(missing.value).endswith("(error 40402)")


def test_a_registry_that_is_not_there() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(RegistryCallError) as refused:
        RegistryClient(f"http://127.0.0.1:{port}", timeout_s=5).call("GET", "/subjects")
    assert (refused.value.status, refused.value.code) == (None, None)
    assert "cannot reach" in str(refused.value)


def test_only_http_urls() -> None:
    with pytest.raises(ValueError, match="is not an http"):
        RegistryClient("registry:8081")
