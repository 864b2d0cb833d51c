"""The cluster as a broker of a ZooKeeper cluster sees it: live brokers from their registrations
(``/brokers/ids/<id>``), the controller from ``/controller``, and every partition's state from
``/brokers/topics/<t>/partitions/<p>/state`` with the topic's replica assignment.

What it holds is a cache fed on the broker's event loop by the membership watches
(:meth:`ZooKeeperClusterView.membership_changed`) and the metadata store's notifications
(:meth:`ZooKeeperClusterView.partition_state_changed`, :meth:`ZooKeeperClusterView.topic_changed`),
so that Metadata answers without a ZooKeeper round trip per partition. The store's watch of a
partition's state reports what it holds when set, with the data, so the cache fills without a read
of its own; a state not reported yet answers as no leader (clients retry). Nothing is on disk;
ZooKeeper is the source of truth. Threads: the event loop only; a new broker's registration is
read by the store, off the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from odradek.cluster.metadata.store import PartitionState
from odradek.cluster.metadata.view import (
    CONSUMER_OFFSETS,
    NO_NODE,
    BrokerEndpoint,
    PartitionInfo,
    leader_endpoint,
)
from odradek.cluster.metadata.zookeeper.membership import BrokerMembership, BrokerRegistration
from odradek.cluster.metadata.zookeeper.store import ZooKeeperMetadataStore

log = logging.getLogger(__name__)


class ZooKeeperClusterView:
    """A :class:`~odradek.cluster.metadata.view.ClusterView` answered from ZooKeeper (see the module
    doc)."""

    def __init__(
        self,
        node_id: int,
        store: ZooKeeperMetadataStore,
        membership: BrokerMembership,
        group_partition: Callable[[str], int],
    ) -> None:
        self.node_id = node_id
        self.cluster_id = store.cluster_id
        self._store = store
        self._membership = membership
        self._group_partition = group_partition
        self._brokers: dict[int, BrokerEndpoint] = {}
        self._states: dict[tuple[str, int], PartitionState | None] = {}

    # -- ClusterView -----------------------------------------------------------------------------

    def controller_id(self) -> int:
        controller = self._membership.controller_id
        return NO_NODE if controller is None else controller

    def live_brokers(self) -> Sequence[BrokerEndpoint]:
        return [self._brokers[b] for b in sorted(self._brokers)]

    def address_of(self, broker_id: int) -> str | None:
        endpoint = self._brokers.get(broker_id)
        return None if endpoint is None else f"{endpoint.host}:{endpoint.port}"

    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        return self._states.get((topic, index))

    def partition_info(self, topic: str, index: int) -> PartitionInfo | None:
        metadata = self._store.topics.get(topic)
        if metadata is None or not 0 <= index < metadata.partitions:
            return None
        replicas = metadata.replicas_of(index)
        offline = tuple(r for r in replicas if r not in self._brokers)
        state = self.partition_state(topic, index)
        if state is None:
            return PartitionInfo(NO_NODE, -1, replicas, (), offline)
        leader = state.leader if state.leader in self._brokers else NO_NODE
        return PartitionInfo(leader, state.leader_epoch, replicas, state.isr, offline, state.elr)

    def group_coordinator(self, group_id: str) -> BrokerEndpoint | None:
        return leader_endpoint(self, CONSUMER_OFFSETS, self._group_partition(group_id))

    # -- changes ---------------------------------------------------------------------------------

    async def membership_changed(self, brokers: frozenset[int]) -> None:
        """The registered brokers are now ``brokers``: read the registrations of new ones (one
        gone again meanwhile is left out). Calls must not overlap (the node runs them in turn)."""
        for gone in set(self._brokers) - brokers:
            del self._brokers[gone]
        found = await self._store.broker_registrations(brokers - set(self._brokers))
        for broker_id, (data, _) in found.items():
            registration = BrokerRegistration.from_json(broker_id, data)
            others = registration.other_endpoints
            self._brokers[broker_id] = BrokerEndpoint(
                broker_id,
                registration.host,
                registration.port,
                registration.rack,
                (
                    (registration.listener_name, registration.host, registration.port),
                    *((name, host, port) for name, _, host, port in others),
                )
                if others
                else (),
            )

    def partition_state_changed(
        self, topic: str, index: int, state: PartitionState | None
    ) -> PartitionState | None:
        """A notification brought the partition's state (None: gone); returns the state kept."""
        self._states[(topic, index)] = state
        return state

    def state_written(self, topic: str, index: int, state: PartitionState) -> None:
        """This broker wrote ``state`` (its own ISR change): no need to read it back."""
        known = self._states.get((topic, index))
        if known is None or known.version < state.version:
            self._states[(topic, index)] = state

    def topic_changed(self, topic: str) -> None:
        """A topic was created, grown, reconfigured or deleted: forget its cached states that no
        longer exist (new partitions are read on first need)."""
        metadata = self._store.topics.get(topic)
        count = metadata.partitions if metadata is not None else 0
        for key in [k for k in self._states if k[0] == topic and k[1] >= count]:
            del self._states[key]
        if metadata is None:
            for key in [k for k in self._states if k[0] == topic]:
                del self._states[key]
