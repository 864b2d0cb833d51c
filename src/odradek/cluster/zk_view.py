"""The cluster as a broker of a ZooKeeper cluster sees it: live brokers from their registrations
(``/brokers/ids/<id>``), the controller from ``/controller``, and every partition's state from
``/brokers/topics/<t>/partitions/<p>/state`` with the topic's replica assignment.

What it holds is a cache fed on the broker's event loop by the membership watches
(:meth:`ZooKeeperClusterView.membership_changed`) and the metadata store's notifications
(:meth:`ZooKeeperClusterView.partition_state_changed`, :meth:`ZooKeeperClusterView.topic_changed`),
so that Metadata answers without a ZooKeeper round trip per partition. A state not cached yet is
read once from the store. Nothing is on disk; ZooKeeper is the source of truth. Called on the
event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from kazoo.exceptions import NoNodeError

from odradek.cluster.membership import BROKER_IDS_PATH, BrokerMembership, BrokerRegistration
from odradek.cluster.metadata_store import MetadataStore, PartitionState
from odradek.cluster.view import (
    CONSUMER_OFFSETS,
    NO_NODE,
    BrokerEndpoint,
    PartitionInfo,
    leader_endpoint,
)
from odradek.cluster.zookeeper import ZooKeeperSession

log = logging.getLogger(__name__)


class ZooKeeperClusterView:
    """A :class:`~odradek.cluster.view.ClusterView` answered from ZooKeeper (see the module doc)."""

    def __init__(
        self,
        node_id: int,
        store: MetadataStore,
        membership: BrokerMembership,
        session: ZooKeeperSession,
        group_partition: Callable[[str], int],
    ) -> None:
        self.node_id = node_id
        self.cluster_id = store.cluster_id
        self._store = store
        self._membership = membership
        self._session = session
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
        key = (topic, index)
        if key not in self._states:
            self._states[key] = self._store.partition_state(topic, index)
        return self._states[key]

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
        return PartitionInfo(leader, state.leader_epoch, replicas, state.isr, offline)

    def group_coordinator(self, group_id: str) -> BrokerEndpoint | None:
        return leader_endpoint(self, CONSUMER_OFFSETS, self._group_partition(group_id))

    # -- changes ---------------------------------------------------------------------------------

    def membership_changed(self, brokers: frozenset[int]) -> None:
        """The registered brokers are now ``brokers``: read the registrations of new ones."""
        for gone in set(self._brokers) - brokers:
            del self._brokers[gone]
        for broker_id in brokers - set(self._brokers):
            try:
                data, _ = self._session.call(
                    self._session.client.get, f"{BROKER_IDS_PATH}/{broker_id}"
                )
            except NoNodeError:
                continue  # gone again already
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

    def partition_state_changed(self, topic: str, index: int) -> PartitionState | None:
        """Re-read a partition's state after a notification; returns it."""
        state = self._store.partition_state(topic, index)
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
