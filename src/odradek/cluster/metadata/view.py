"""What the cluster looks like from this broker: its live brokers, its controller, and for each
partition the leader, leader epoch, replicas and in-sync replicas.

Metadata, FindCoordinator and DescribeCluster answer from a :class:`ClusterView`, and the topic
manager checks replication factors and replica assignments against its live brokers, so none of
them knows whether this broker is alone or one of many. The answers are plain values
(:class:`BrokerEndpoint`, :class:`PartitionInfo`) rather than computed from this broker's id where
they are used: a ZooKeeper-backed view answers the same questions from ``/brokers/ids``,
``/controller`` and the ``/brokers/topics/<t>/partitions/<p>/state`` znodes it watches (the
partition state the controller writes and the topic's assignment make a :class:`PartitionInfo`),
while :class:`LocalClusterView` answers for a broker that is the whole cluster.

Views are read on the broker's event loop, once or more per request; a view that learns of changes
from elsewhere (ZooKeeper watches) applies them on that loop too, so one request sees a consistent
picture between two awaits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from odradek.cluster.metadata.store import TopicMetadata
    from odradek.cluster.replication.partition import Partition

NO_NODE = -1
CONSUMER_OFFSETS = "__consumer_offsets"


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A live broker as clients reach it: its advertised address (Metadata's ``brokers``)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    # Every listener's advertised address, (listener name, host, port); host and port above are
    # the inter-broker listener's. Empty: the broker has the one listener.
    listeners: tuple[tuple[str, str, int], ...] = ()

    def on_listener(self, name: str) -> BrokerEndpoint | None:
        """This broker as clients of listener ``name`` reach it; None if it has no such listener
        (Kafka leaves such a broker out of Metadata)."""
        if not self.listeners:
            return self
        for listener, host, port in self.listeners:
            if listener == name:
                return BrokerEndpoint(self.node_id, host, port, self.rack, self.listeners)
        return None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """Who serves a partition, as Metadata tells clients (Kafka's ``PartitionInfo``): the
    partition state the controller wrote (leader, epoch, ISR: the metadata store's
    ``PartitionState``) with the topic's replica assignment and which replicas are offline.

    ``leader`` is :data:`NO_NODE` while the partition has none; ``offline_replicas`` are assigned
    replicas whose broker (or log dir) is down.
    """

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    # KIP-966's eligible leader replicas (DescribeTopicPartitions shows them).
    elr: tuple[int, ...] = ()


class ClusterView(Protocol):
    """The cluster as this broker knows it now."""

    @property
    def node_id(self) -> int:
        """This broker's id."""
        ...

    @property
    def cluster_id(self) -> str: ...

    def controller_id(self) -> int:
        """The controller's node id, or :data:`NO_NODE` while there is none."""
        ...

    def live_brokers(self) -> Sequence[BrokerEndpoint]:
        """Every registered, live broker (this one included), by node id."""
        ...

    def partition_info(self, topic: str, index: int) -> PartitionInfo | None:
        """The partition's leader and replicas; None if the cluster has no such partition."""
        ...

    def group_coordinator(self, group_id: str) -> BrokerEndpoint | None:
        """The broker coordinating ``group_id``: the live leader of the group's partition of
        ``__consumer_offsets``; None while that partition does not exist or has no live leader."""
        ...


def leader_endpoint(view: ClusterView, topic: str, index: int) -> BrokerEndpoint | None:
    """The live broker leading the partition, or None."""
    state = view.partition_info(topic, index)
    if state is None or state.leader == NO_NODE:
        return None
    for broker in view.live_brokers():
        if broker.node_id == state.leader:
            return broker
    return None


class HostedPartitions(Protocol):
    """What :class:`LocalClusterView` reads of the topic manager."""

    def topic(self, name: str) -> TopicMetadata | None: ...

    def partition(self, topic: str, index: int) -> Partition | None: ...


class LocalClusterView:
    """The view of a broker that is the whole cluster: it is the only live broker and the
    controller, and hosts (and leads) every partition of every topic.

    Partitions answer with the leader, epoch, replicas and ISR of the :class:`Partition` this
    broker opened for them. ``group_partition`` maps a group id to its partition of
    ``__consumer_offsets`` (the group coordinator's hashing).
    """

    __slots__ = ("_alone", "_brokers", "_group_partition", "_topics", "cluster_id", "node_id")

    def __init__(
        self,
        endpoint: BrokerEndpoint,
        cluster_id: str,
        topics: HostedPartitions,
        group_partition: Callable[[str], int],
    ) -> None:
        self.node_id = endpoint.node_id
        self.cluster_id = cluster_id
        self._brokers = (endpoint,)
        self._alone = (endpoint.node_id,)
        self._topics = topics
        self._group_partition = group_partition

    def controller_id(self) -> int:
        return self.node_id

    def live_brokers(self) -> Sequence[BrokerEndpoint]:
        return self._brokers

    def partition_info(self, topic: str, index: int) -> PartitionInfo | None:
        partition = self._topics.partition(topic, index)
        if partition is not None:
            if partition.log.offline:
                # Its only replica's log dir failed (KIP-112): no leader until a restart, as a
                # ZooKeeper-era Kafka controller leaves a partition whose last replica is
                # offline.
                return PartitionInfo(
                    NO_NODE, partition.leader_epoch, partition.replicas, partition.isr, self._alone
                )
            return partition.info()
        # In the metadata but not (or no longer) open here: still this broker's to lead.
        metadata = self._topics.topic(topic)
        if metadata is None or not 0 <= index < metadata.partitions:
            return None
        replicas = metadata.replicas_of(index) or self._alone
        return PartitionInfo(self.node_id, 0, replicas, self._alone)

    def group_coordinator(self, group_id: str) -> BrokerEndpoint | None:
        return leader_endpoint(self, CONSUMER_OFFSETS, self._group_partition(group_id))
