"""The transaction coordinator's channel to other brokers (Kafka's
``TransactionMarkerChannelManager``): WriteTxnMarkers to the leaders of a transaction's
partitions — this broker too, over a connection to itself, so that a marker takes one path
whoever leads the partition — and KIP-890's verification asked of a transaction's coordinator
elsewhere (AddPartitionsToTxn v4+ ``verify_only``).

One connection per broker, over the inter-broker listener with its TLS and SASL, opened when
first needed: a lone broker whose only listener is SASL and that never sees a transaction needs
no credentials of its own. A marker is retried with backoff (50 ms doubling to 1 s) until its
partition's leader writes it, refuses it for good, or the coordinator stops owning the
transaction.

Crash: nothing of its own; a transaction whose markers were not all written is still in its
Prepare state in ``__transaction_state`` and its markers are sent again on the next load.
Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from odradek.client.core import ClientError
from odradek.cluster.broker_connections import BrokerConnections
from odradek.cluster.metadata.view import BrokerEndpoint, ClusterView, leader_endpoint
from odradek.config import BrokerConfig
from odradek.coordinator.transaction.coordinator import MarkerJob
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27
ADD_PARTITIONS_TO_TXN = 24
_WRITE_TIMEOUT_S = 5.0
_MARKER_TIMEOUT_S = 30.0
RETRY_FIRST_S = 0.05
RETRY_MAX_S = 1.0
# Marker answers that retrying cannot change: the partition stops waiting for its marker.
_MARKER_FATAL = frozenset(
    {
        ErrorCode.invalid_producer_epoch,
        ErrorCode.producer_fenced,
        ErrorCode.transaction_coordinator_fenced,
        ErrorCode.invalid_request,
        ErrorCode.unsupported_version,
    }
)


class MarkerChannel:
    """Connections from the transaction coordinator to the brokers (see the module doc)."""

    def __init__(self, config: BrokerConfig, cluster: ClusterView | None) -> None:
        self._cluster = cluster
        # Markers and KIP-890 checks go over the inter-broker listener (to this broker too).
        self._connections = BrokerConnections(
            config,
            f"odradek-txn-coordinator-{cluster.node_id if cluster else -1}",
            _MARKER_TIMEOUT_S,
        )
        self._closing = False

    async def verify(
        self,
        endpoint: BrokerEndpoint,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
        *,
        add: bool = False,
    ) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890: ask the coordinator at ``endpoint`` whether ``partitions`` are in the
        producer's ongoing transaction (``add``: to add them, transaction version 2);
        COORDINATOR_NOT_AVAILABLE for each when it cannot be asked."""
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "verify_only": not add,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                }
            ]
        }
        try:
            connection = await self._connections.to(endpoint)
            response = await connection.request(
                ADD_PARTITIONS_TO_TXN, request, version=4, timeout_s=_WRITE_TIMEOUT_S
            )
        except (ClientError, OSError) as e:
            log.info(
                "verifying %s with broker %d failed: %s", transactional_id, endpoint.node_id, e
            )
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        if response.error_code:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        out: dict[tuple[str, int], ErrorCode] = {}
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    out[(topic.name, int(p.partition_index))] = ErrorCode(p.partition_error_code)
        return {tp: out.get(tp, ErrorCode.invalid_txn_state) for tp in partitions}

    async def send(self, job: MarkerJob, still_owned: Callable[[], bool]) -> None:
        """Write ``job``'s marker to each of its partitions' leaders, retrying with backoff
        until every one is written or refused for good, or the coordinator no longer owns the
        transaction (``still_owned``: its coordinator epoch moved on), or the channel closes."""
        remaining = set(job.partitions)
        delay = RETRY_FIRST_S
        while remaining and not self._closing and still_owned():
            cluster = self._cluster
            by_leader: dict[int, tuple[BrokerEndpoint, list[tuple[str, int]]]] = {}
            for tp in sorted(remaining):
                if cluster is None:
                    break
                if cluster.partition_info(*tp) is None:
                    remaining.discard(tp)  # the topic is gone: nothing to mark
                    continue
                endpoint = leader_endpoint(cluster, *tp)
                if endpoint is not None:
                    by_leader.setdefault(endpoint.node_id, (endpoint, []))[1].append(tp)
            results = await asyncio.gather(
                *(self._send_to(endpoint, job, tps) for endpoint, tps in by_leader.values())
            )
            for answered in results:
                for tp, code in answered.items():
                    if code == ErrorCode.none:
                        remaining.discard(tp)
                    elif code in _MARKER_FATAL:
                        log.warning(
                            "marker of transaction %s for %s-%d refused: %s",
                            job.transactional_id,
                            *tp,
                            code.name,
                        )
                        remaining.discard(tp)
            if remaining:
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)

    async def _send_to(
        self, endpoint: BrokerEndpoint, job: MarkerJob, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = {
            "markers": [
                {
                    "producer_id": job.producer_id,
                    "producer_epoch": job.producer_epoch,
                    "transaction_result": job.commit,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                    "coordinator_epoch": job.coordinator_epoch,
                }
            ]
        }
        try:
            connection = await self._connections.to(endpoint)
            response = await connection.request(
                WRITE_TXN_MARKERS, request, timeout_s=_MARKER_TIMEOUT_S
            )
        except (ClientError, OSError) as e:
            log.info("markers to broker %d: %s; retrying", endpoint.node_id, e)
            self._connections.drop(endpoint.node_id)
            return {}
        out: dict[tuple[str, int], ErrorCode] = {}
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    out[(topic.name, int(p.partition_index))] = ErrorCode(p.error_code)
        return out

    async def close(self) -> None:
        """Stop retrying and close every connection."""
        self._closing = True
        await self._connections.close()
