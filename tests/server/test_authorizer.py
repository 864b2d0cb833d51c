"""The authorizer built from broker config, over a real metadata store (a temporary directory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.cluster.metadata.store import LocalMetadataStore, MetadataChange
from odradek.config import BrokerConfig
from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.server.authorizer import Authorizer, UnknownAuthorizerError

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)


def test_built_only_for_kafkas_authorizer_class_names(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path)
    assert Authorizer.from_config(BrokerConfig({}), store) is None
    with pytest.raises(UnknownAuthorizerError):
        Authorizer.from_config(BrokerConfig({"authorizer.class.name": "com.example.Mine"}), store)
    built = Authorizer.from_config(
        BrokerConfig(
            {
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:admin;User:broker",
                "allow.everyone.if.no.acl.found": "true",
            }
        ),
        store,
    )
    assert built is not None
    assert built.super_users == {"User:admin", "User:broker"} and built.allow_if_no_acl


async def test_changes_are_stored_and_another_authorizer_on_the_store_follows(
    tmp_path: Path,
) -> None:
    store = LocalMetadataStore(tmp_path)
    writer, reader = Authorizer(store), Authorizer(store)
    await writer.create([AclBinding(ORDERS, READ)])
    assert writer.authorize(
        "User:alice", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "orders"
    )
    assert not reader.authorize(
        "User:alice", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "orders"
    )
    reader.on_change(MetadataChange("acls"))  # as the store tells its listeners
    assert reader.authorize(
        "User:alice", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "orders"
    )
    store.close()
    reopened = Authorizer(LocalMetadataStore(tmp_path))
    assert reopened.describe(AclBindingFilter()) == [AclBinding(ORDERS, READ)]
    (deleted,) = await reopened.delete([AclBindingFilter(ResourceType.TOPIC)])
    assert deleted.bindings == [AclBinding(ORDERS, READ)]
    assert not LocalMetadataStore(tmp_path).acls
