"""The cluster as the clients of one listener see it: each broker at its address on that listener.

Kafka answers Metadata and FindCoordinator with the endpoints of the listener the request came in
on, so that a client that bootstrapped over SSL keeps talking SSL, and one inside a private
network gets its private addresses. :class:`ListenerClusterView` wraps the broker's
:class:`~odradek.cluster.metadata.view.ClusterView` for one listener name; everything but the
brokers' addresses is the wrapped view's. A broker without that listener is left out, as Kafka
does. Read on the event loop only, like the view it wraps.
"""

from __future__ import annotations

from collections.abc import Sequence

from odradek.cluster.metadata.view import BrokerEndpoint, ClusterView, PartitionInfo


class ListenerClusterView:
    """A :class:`~odradek.cluster.metadata.view.ClusterView` for one listener's clients (see the
    module doc): nothing of its own on disk, nothing to lose in a crash; event loop only."""

    __slots__ = ("_view", "listener")

    def __init__(self, view: ClusterView, listener: str) -> None:
        self._view = view
        self.listener = listener

    @property
    def node_id(self) -> int:
        return self._view.node_id

    @property
    def cluster_id(self) -> str:
        return self._view.cluster_id

    def controller_id(self) -> int:
        return self._view.controller_id()

    def live_brokers(self) -> Sequence[BrokerEndpoint]:
        found = []
        for broker in self._view.live_brokers():
            endpoint = broker.on_listener(self.listener)
            if endpoint is not None:
                found.append(endpoint)
        return found

    def partition_info(self, topic: str, index: int) -> PartitionInfo | None:
        return self._view.partition_info(topic, index)

    def group_coordinator(self, group_id: str) -> BrokerEndpoint | None:
        coordinator = self._view.group_coordinator(group_id)
        return None if coordinator is None else coordinator.on_listener(self.listener)

    def __getattr__(self, name: str) -> object:
        # What only one kind of view has (a ZooKeeper view's partition_state, address_of).
        return getattr(self._view, name)
