"""ApiVersions lists every registered handler's versions and the cluster's features;
UpdateFeatures changes the features."""

from __future__ import annotations

import dataclasses
from typing import Any

from odradek.cluster import features
from odradek.protocol.errors import ErrorCode
from odradek.server.authorizer import Authorizer
from odradek.server.registry import HANDLERS
from odradek.server.services import BrokerServices, Session
from tests.server.conftest import API_VERSIONS

from .conftest import HandlerCaller

UPDATE_FEATURES = 57


def test_every_registered_api_is_advertised(handlers: HandlerCaller) -> None:
    response = handlers.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    assert response.error_code == ErrorCode.none
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {h.api_key: (h.min_version, h.max_version) for h in HANDLERS.values()}
    assert advertised[0][0] == 0  # Produce starts at v0, as in Kafka 3.9 (message formats v0/v1)


def test_features_are_supported_and_finalized_at_kafka_defaults(handlers: HandlerCaller) -> None:
    response = handlers.call(API_VERSIONS, 4, client_software_name="t", client_software_version="1")
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert supported == {n: (r.min_level, r.max_level) for n, r in features.SUPPORTED.items()}
    finalized = {
        f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features
    }
    assert finalized == {n: (v, v) for n, v in features.DEFAULT_LEVELS.items() if v > 0}
    assert response.finalized_features_epoch == 0
    # Before v4 a client refuses ranges starting at 0: none is listed (the levels still are).
    older = handlers.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    assert older.supported_features == ()
    assert len(older.finalized_features) == len(finalized)


def test_update_features_is_stored_and_advertised(handlers: HandlerCaller) -> None:
    def update(version: int, *changes: tuple[str, int, int], validate: bool = False) -> Any:
        return handlers.call(
            UPDATE_FEATURES,
            version,
            timeout=60000,
            feature_updates=[
                {"feature": n, "max_version_level": v, "upgrade_type": t, "allow_downgrade": t != 1}
                for n, v, t in changes
            ],
            validate_only=validate,
        )

    refused = update(1, ("group.version", 0, 1), ("share.version", 0, 2))
    assert refused.error_code == ErrorCode.invalid_update_version
    assert [r.error_code for r in refused.results] == [ErrorCode.invalid_update_version] * 2
    checked = update(2, ("group.version", 0, 2), validate=True)
    assert checked.error_code == ErrorCode.none
    assert handlers.services.topics.store.finalized_features is None  # only validated
    done = update(1, ("group.version", 0, 2), ("share.version", 0, 3))
    assert done.error_code == ErrorCode.none
    assert [r.error_code for r in done.results] == [ErrorCode.none] * 2
    assert update(0, ("share.version", 1, 1)).error_code == ErrorCode.none

    response = handlers.call(API_VERSIONS, 4, client_software_name="t", client_software_version="1")
    assert response.finalized_features_epoch == 2
    assert {f.name: f.max_version_level for f in response.finalized_features} == {
        n: v for n, v in features.DEFAULT_LEVELS.items() if v > 0 and n != "group.version"
    }


def test_update_features_needs_alter_on_the_cluster(services: BrokerServices) -> None:
    authorizer = Authorizer(services.topics.store, frozenset({"User:admin"}))
    secured = dataclasses.replace(services, authorizer=authorizer)
    alice = HandlerCaller(secured, Session("10.0.0.2:4000", principal="User:alice"))
    try:
        response = alice.call(
            UPDATE_FEATURES,
            1,
            timeout=60000,
            feature_updates=[{"feature": "group.version", "max_version_level": 1}],
        )
    finally:
        alice.close()
    assert response.error_code == ErrorCode.cluster_authorization_failed
    assert services.topics.store.finalized_features is None
