"""Users' SCRAM credentials in the metadata store, each scenario on both engines (the local
file and ZooKeeper, where they sit at Kafka's /config/users/<name>)."""

from __future__ import annotations

import json

from kazoo.client import KazooClient

from odradek.cluster.metadata.zookeeper import ZooKeeperMetadataStore
from odradek.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, make_credential
from tests.cluster.metadata.test_store import Engine, engine  # noqa: F401 (fixture)


async def test_user_configs_round_trip_and_survive_reopen(engine: Engine) -> None:  # noqa: F811
    store = engine.open()
    assert await store.user_configs("carol") == {} and await store.user_names() == []
    sha512 = make_credential(SCRAM_SHA_512, "carol-secret").to_kafka()
    sha256 = make_credential(SCRAM_SHA_256, "carol-secret").to_kafka()
    await store.set_user_configs("carol", {SCRAM_SHA_512: sha512, SCRAM_SHA_256: sha256})
    await store.set_user_configs("dave", {SCRAM_SHA_512: sha512})
    await store.set_user_configs("dave", {})
    reopened = engine.open()
    assert await reopened.user_names() == ["carol"]
    assert await reopened.user_configs("carol") == {SCRAM_SHA_512: sha512, SCRAM_SHA_256: sha256}


async def test_zookeeper_layout_is_kafkas(zookeeper_connect: str) -> None:
    from tests.cluster.metadata.test_store import zookeeper_store

    store: ZooKeeperMetadataStore = zookeeper_store(zookeeper_connect)
    try:
        credential = make_credential(SCRAM_SHA_512, "s3cret").to_kafka()
        await store.set_user_configs("alice", {SCRAM_SHA_512: credential})
        client = KazooClient(zookeeper_connect)
        client.start()
        try:
            data, _ = client.get("/config/users/alice")
            changes = client.get_children("/config/changes")
            last = client.get(f"/config/changes/{max(changes)}")[0]
        finally:
            client.stop()
            client.close()
        assert json.loads(data) == {"version": 1, "config": {"SCRAM-SHA-512": credential}}
        assert json.loads(last) == {"version": 2, "entity_path": "users/alice"}
        assert b"s3cret" not in data
    finally:
        store.close()
