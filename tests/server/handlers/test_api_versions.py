"""ApiVersions lists every registered handler's versions."""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode
from odradek.server.registry import HANDLERS
from tests.server.conftest import API_VERSIONS

from .conftest import HandlerCaller


def test_every_registered_api_is_advertised(handlers: HandlerCaller) -> None:
    response = handlers.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    assert response.error_code == ErrorCode.none
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {h.api_key: (h.min_version, h.max_version) for h in HANDLERS.values()}
    assert advertised[0][0] == 0  # Produce starts at v0, as in Kafka 3.9 (message formats v0/v1)
