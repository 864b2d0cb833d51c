"""TxnOffsetCommit over a real socket: the commit stays pending (OffsetFetch with require_stable
answers UNSTABLE_OFFSET_COMMIT, without it the last plain commit) and stays so across a broker
restart, which replays the transactional batch from ``__consumer_offsets`` on disk. (Clients
ending their transactions are in test_transactions.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.testing import running_broker
from tests.server.conftest import KafkaConnection

TXN_OFFSET_COMMIT, OFFSET_COMMIT, OFFSET_FETCH = 28, 8, 9
GROUP, TOPIC = "e2e-txn-group", "e2e-txn-topic"


def partition(offset: int) -> dict[str, Any]:
    return {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}


def fetch(client: KafkaConnection, require_stable: bool) -> tuple[int, ErrorCode]:
    response = client.request(
        OFFSET_FETCH,
        8,
        groups=[{"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
        require_stable=require_stable,
    )
    ((group,),) = [response.groups]
    assert group.error_code == ErrorCode.none
    (((p,),),) = [[t.partitions for t in group.topics]]
    return int(p.committed_offset), p.error_code


def test_a_pending_transactional_commit_survives_a_restart(tmp_path: Path) -> None:
    with running_broker(tmp_path) as broker, KafkaConnection(broker.bootstrap) as client:
        client.create_topic(TOPIC)
        plain = client.request(
            OFFSET_COMMIT,
            8,
            group_id=GROUP,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[{"name": TOPIC, "partitions": [partition(3)]}],
        )
        assert plain.topics[0].partitions[0].error_code == ErrorCode.none
        init = client.request(
            22,
            5,
            transactional_id="e2e-txn",
            transaction_timeout=600_000,
            producer_id=-1,
            producer_epoch=-1,
        )
        added = client.request(
            25,
            4,
            transactional_id="e2e-txn",
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            group_id=GROUP,
        )
        assert (init.error_code, added.error_code) == (ErrorCode.none, ErrorCode.none)
        txn = client.request(
            TXN_OFFSET_COMMIT,
            4,
            transactional_id="e2e-txn",
            group_id=GROUP,
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            topics=[{"name": TOPIC, "partitions": [partition(10)]}],
        )
        assert txn.topics[0].partitions[0].error_code == ErrorCode.none
        assert fetch(client, require_stable=False) == (3, ErrorCode.none)
        assert fetch(client, require_stable=True) == (-1, ErrorCode.unstable_offset_commit)

    with running_broker(tmp_path) as broker, KafkaConnection(broker.bootstrap) as client:
        assert fetch(client, require_stable=False) == (3, ErrorCode.none)
        assert fetch(client, require_stable=True) == (-1, ErrorCode.unstable_offset_commit)
