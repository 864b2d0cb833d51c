"""The partition leaders' way to the share coordinator (Kafka's ``DefaultStatePersister``): a
share-partition's state is asked of, and written to, the leader of its partition of
``__share_group_state`` — this broker's own share coordinator by a call when it leads that
partition, another broker over the inter-broker listener otherwise (one connection per broker,
opened when first needed, as the transaction coordinator's marker channel), with the share state
APIs (InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState, ReadShareGroupStateSummary).

The topic is created when first needed, as FindCoordinator creates it for clients. A coordinator
that moved or is loading (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, a connection lost) is asked again, after 50 ms doubling to 1 s, for
up to 10 s; then the last error is the answer. Crash: nothing of its own. Runs on the broker's
event loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from odradek.client.core import ClientError
from odradek.cluster.broker_connections import BrokerConnections
from odradek.cluster.metadata.view import BrokerEndpoint, ClusterView, leader_endpoint
from odradek.cluster.share.persister import PersistedState, StateBatch
from odradek.config import BrokerConfig
from odradek.coordinator.share.coordinator import StateAnswer
from odradek.coordinator.share.records import StateKey
from odradek.coordinator.share.runtime import SHARE_STATE_TOPIC, ShareCoordinatorRuntime
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

INITIALIZE_SHARE_GROUP_STATE = 83
READ_SHARE_GROUP_STATE = 84
WRITE_SHARE_GROUP_STATE = 85
DELETE_SHARE_GROUP_STATE = 86
READ_SHARE_GROUP_STATE_SUMMARY = 87
_REQUEST_TIMEOUT_S = 5.0
_RETRY_FOR_S = 10.0
_RETRY_FIRST_S = 0.05
_RETRY_MAX_S = 1.0
_RETRIABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
    }
)


def _as_state(answer: StateAnswer) -> PersistedState:
    state = answer.state
    if answer.error != ErrorCode.none or state is None:
        return PersistedState(answer.error, message=answer.message)
    return PersistedState(
        ErrorCode.none, state.state_epoch, state.leader_epoch, state.start_offset, state.batches
    )


class DefaultStatePersister:
    """:class:`~odradek.cluster.share.persister.StatePersister` over the share coordinators
    (see the module doc). ``cluster`` None: this broker is the whole cluster."""

    def __init__(
        self,
        runtime: ShareCoordinatorRuntime,
        config: BrokerConfig,
        cluster: ClusterView | None,
    ) -> None:
        self.runtime = runtime
        self._cluster = cluster
        self._connections = BrokerConnections(
            config,
            f"odradek-share-persister-{cluster.node_id if cluster else -1}",
            _REQUEST_TIMEOUT_S,
        )
        self._closing = False

    # -- the persister's calls -----------------------------------------------------------------

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> PersistedState:
        key = StateKey(group_id, topic_id, partition)
        return await self._retry(
            key,
            lambda: self.runtime.read_state(key, leader_epoch),
            lambda: self._remote_read(key, leader_epoch, READ_SHARE_GROUP_STATE),
        )

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> PersistedState:
        key = StateKey(group_id, topic_id, partition)
        return await self._retry(
            key,
            lambda: self.runtime.read_summary(key),
            lambda: self._remote_read(key, -1, READ_SHARE_GROUP_STATE_SUMMARY),
        )

    async def write(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> ErrorCode:
        key = StateKey(group_id, topic_id, partition)
        data = {
            "partition": partition,
            "state_epoch": state_epoch,
            "leader_epoch": leader_epoch,
            "start_offset": start_offset,
            "state_batches": [_batch_fields(b) for b in batches],
        }
        state = await self._retry(
            key,
            lambda: self.runtime.write_state(key, state_epoch, leader_epoch, start_offset, batches),
            lambda: self._remote_plain(key, WRITE_SHARE_GROUP_STATE, data),
        )
        return state.error

    async def initialize(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        start_offset: int,
    ) -> ErrorCode:
        key = StateKey(group_id, topic_id, partition)
        data = {"partition": partition, "state_epoch": state_epoch, "start_offset": start_offset}
        state = await self._retry(
            key,
            lambda: self.runtime.initialize_state(key, state_epoch, start_offset),
            lambda: self._remote_plain(key, INITIALIZE_SHARE_GROUP_STATE, data),
        )
        return state.error

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        key = StateKey(group_id, topic_id, partition)
        state = await self._retry(
            key,
            lambda: self.runtime.delete_state(key),
            lambda: self._remote_plain(key, DELETE_SHARE_GROUP_STATE, {"partition": partition}),
        )
        return state.error

    # -- where the coordinator is --------------------------------------------------------------

    async def _retry(
        self,
        key: StateKey,
        local: Callable[[], Awaitable[StateAnswer]],
        remote: Callable[[], Awaitable[PersistedState]],
    ) -> PersistedState:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _RETRY_FOR_S
        delay = _RETRY_FIRST_S
        while True:
            try:
                # Made on first need, as FindCoordinator makes it for clients.
                await self.runtime.state_topic.ensure()
            except KafkaError as e:
                state = PersistedState(ErrorCode.coordinator_not_available, message=e.message)
                if self._closing or loop.time() + delay > deadline:
                    return state
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)
                continue
            endpoint = self._coordinator(key)
            state = _as_state(await local()) if endpoint is None else await remote()
            if state.error not in _RETRIABLE or self._closing or loop.time() + delay > deadline:
                return state
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX_S)

    def _coordinator(self, key: StateKey) -> BrokerEndpoint | None:
        """The other broker to ask about ``key``; None: ask this one's coordinator (it leads
        the key's partition, or nobody is known to)."""
        cluster = self._cluster
        if cluster is None or self.runtime.serves(key):
            return None
        index = self.runtime.shard.partition_of(key)
        endpoint = leader_endpoint(cluster, SHARE_STATE_TOPIC, index)
        if endpoint is None or endpoint.node_id == cluster.node_id:
            return None
        return endpoint

    # -- over the network ----------------------------------------------------------------------

    async def _remote_read(self, key: StateKey, leader_epoch: int, api_key: int) -> PersistedState:
        endpoint = self._coordinator(key)
        if endpoint is None:
            return PersistedState(ErrorCode.not_coordinator)
        response = await self._request(
            endpoint,
            api_key,
            {
                "group_id": key.group_id,
                "topics": [
                    {
                        "topic_id": key.topic_id,
                        "partitions": [{"partition": key.partition, "leader_epoch": leader_epoch}],
                    }
                ],
            },
        )
        if isinstance(response, ErrorCode):
            return PersistedState(response)
        for result in response.results:
            for p in result.partitions:
                error = ErrorCode(p.error_code)
                if error != ErrorCode.none:
                    return PersistedState(error, message=p.error_message)
                return PersistedState(
                    ErrorCode.none,
                    int(p.state_epoch),
                    int(getattr(p, "leader_epoch", -1)),
                    int(p.start_offset),
                    tuple(
                        StateBatch(
                            int(b.first_offset),
                            int(b.last_offset),
                            int(b.delivery_state),
                            int(b.delivery_count),
                        )
                        for b in getattr(p, "state_batches", ())
                    ),
                )
        return PersistedState(ErrorCode.unknown_server_error)

    async def _remote_plain(
        self, key: StateKey, api_key: int, partition: dict[str, Any]
    ) -> PersistedState:
        endpoint = self._coordinator(key)
        if endpoint is None:
            return PersistedState(ErrorCode.not_coordinator)
        response = await self._request(
            endpoint,
            api_key,
            {
                "group_id": key.group_id,
                "topics": [{"topic_id": key.topic_id, "partitions": [partition]}],
            },
        )
        if isinstance(response, ErrorCode):
            return PersistedState(response)
        for result in response.results:
            for p in result.partitions:
                return PersistedState(ErrorCode(p.error_code), message=p.error_message)
        return PersistedState(ErrorCode.unknown_server_error)

    async def _request(self, endpoint: BrokerEndpoint, api_key: int, fields: dict[str, Any]) -> Any:
        try:
            connection = await self._connections.to(endpoint)
            return await connection.request(
                api_key, fields, version=0, timeout_s=_REQUEST_TIMEOUT_S
            )
        except (ClientError, OSError) as e:
            log.info("share state request to broker %d: %s", endpoint.node_id, e)
            self._connections.drop(endpoint.node_id)
            return ErrorCode.coordinator_not_available

    async def close(self) -> None:
        self._closing = True
        await self._connections.close()


def _batch_fields(batch: StateBatch) -> dict[str, int]:
    return {
        "first_offset": batch.first_offset,
        "last_offset": batch.last_offset,
        "delivery_state": batch.delivery_state,
        "delivery_count": batch.delivery_count,
    }
