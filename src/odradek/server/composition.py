"""The composition root: the one place where the services a handler gets are built, each from
the parts built before it, none wired to another by assignment afterwards.

The order, and why it is that order::

    metadata store, log manager, purgatory        (the broker's own, made before these)
    → producer ids, topics                         topics place replicas on the live brokers:
                                                   the membership's in a cluster, else this one
    → group coordinator                            keeps its state in a topic
      ~ listeners bound, cluster joined ~          the cluster view names the bound addresses
                                                   and the groups' partitioning
    → cluster view                                 a lone broker's reads the topics
    → transaction coordinator                      sends markers to the leaders the view names
    → replica manager (a lone broker's), share-partitions on it, fetch and share sessions,
      client telemetry → BrokerServices

:func:`open_parts` is everything before the listeners, :func:`build_services` everything after.
:class:`~odradek.server.broker.Broker` calls them around binding and joining (and starts what
runs: timers, loading); the handler tests (``tests/server/handlers``) call them back to back on
a temporary directory, so that what a handler sees in a test is wired as in a broker.
Everything here runs on the event loop's thread, before the broker serves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from odradek.clock import Clock
from odradek.cluster.controller.assignment import BrokerMetadata
from odradek.cluster.controller.runtime import ControllerRuntime
from odradek.cluster.metadata.producer_ids import ProducerIdManager
from odradek.cluster.metadata.store import MetadataStore
from odradek.cluster.metadata.view import BrokerEndpoint, ClusterView, LocalClusterView
from odradek.cluster.replication.purgatory import Purgatory
from odradek.cluster.replication.replica_manager import (
    ReplicaManager,
    single_broker_replica_manager,
)
from odradek.cluster.share.manager import SharePartitionManager
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.common.runtime import CoordinatorContext
from odradek.coordinator.group.runtime import GroupCoordinatorRuntime, share_settings
from odradek.coordinator.share.persister import DefaultStatePersister
from odradek.coordinator.share.runtime import ShareCoordinatorRuntime
from odradek.coordinator.transaction.runtime import TransactionCoordinatorRuntime
from odradek.counters import BrokerCounters
from odradek.quotas.manager import ClientQuotas
from odradek.server.authorizer import Authorizer
from odradek.server.delegation_tokens import DelegationTokens
from odradek.server.fetch_sessions import FetchSessionCache
from odradek.server.services import BrokerServices
from odradek.server.share_sessions import ShareSessionCache
from odradek.storage import LogManager
from odradek.telemetry.clients import ClientTelemetry


@dataclass(frozen=True, slots=True)
class Foundation:
    """What exists before the listeners: the broker's storage-side parts and those built on
    them."""

    config: BrokerConfig
    clock: Clock
    store: MetadataStore
    logs: LogManager
    purgatory: Purgatory
    producer_ids: ProducerIdManager
    topics: TopicManager
    groups: GroupCoordinatorRuntime


def open_parts(
    config: BrokerConfig,
    clock: Clock,
    store: MetadataStore,
    logs: LogManager,
    purgatory: Purgatory,
    *,
    live_brokers: Callable[[], Sequence[BrokerMetadata]] | None = None,
) -> Foundation:
    """Open the topics' logs and build the group coordinator on them (not loaded: the broker
    starts it, a test loads it). ``live_brokers``: a cluster's membership; None for a broker
    that is the whole cluster (it leads every partition it has)."""
    producer_ids = ProducerIdManager(store)
    topics = TopicManager(
        config, store, logs, clock, live_brokers, leads_alone=live_brokers is None
    )
    topics.open()
    groups = GroupCoordinatorRuntime(
        CoordinatorContext(config, topics, clock, purgatory.replicated)
    )
    topics.deletion_listeners.append(groups.on_topic_deleted)
    return Foundation(config, clock, store, logs, purgatory, producer_ids, topics, groups)


def lone_cluster_view(parts: Foundation, endpoint: BrokerEndpoint) -> LocalClusterView:
    """The view of a broker that is the whole cluster, advertising ``endpoint``."""
    return LocalClusterView(
        endpoint, parts.store.cluster_id, parts.topics, parts.groups.shard.partition_for
    )


def build_services(
    parts: Foundation,
    cluster: ClusterView,
    *,
    replicas: ReplicaManager | None = None,
    controller: ControllerRuntime | None = None,
    counters: BrokerCounters | None = None,
    authorizer: Authorizer | None = None,
    quotas: ClientQuotas | None = None,
    tokens: DelegationTokens | None = None,
) -> BrokerServices:
    """The rest, on ``cluster``: the transaction and share coordinators (not loaded), and, unless a
    cluster's ``replicas`` are given, the replica manager of a broker that leads alone."""
    config, clock, topics = parts.config, parts.clock, parts.topics
    context = CoordinatorContext(config, topics, clock, parts.purgatory.replicated)
    transactions = TransactionCoordinatorRuntime(context, parts.producer_ids, cluster)
    topics.deletion_listeners.append(transactions.on_topic_deleted)
    if replicas is None:
        replicas = single_broker_replica_manager(
            config.node_id,
            parts.store,
            topics.partition,
            parts.logs.checkpoint,
            clock,
            parts.purgatory,
        )
    share_states = ShareCoordinatorRuntime(context)
    topics.deletion_listeners.append(share_states.on_topic_deleted)
    # A lone broker is its own share coordinator: no channel to others.
    persister = DefaultStatePersister(share_states, config, None if topics.leads_alone else cluster)
    shares = SharePartitionManager(
        replicas,
        topics.partition,
        clock,
        share_settings(config),
        parts.groups.share_group_config,
        persister=persister,
        topic_id_of=lambda name: getattr(topics.topic(name), "topic_id", None),
    )
    topics.deletion_listeners.append(shares.forget_topic)
    return BrokerServices(
        config=config,
        clock=clock,
        topics=topics,
        groups=parts.groups,
        transactions=transactions,
        producer_ids=parts.producer_ids,
        cluster=cluster,
        logs=parts.logs,
        purgatory=parts.purgatory,
        replicas=replicas,
        controller=controller,
        counters=counters,
        fetch_sessions=FetchSessionCache(
            clock,
            config.get_int("max.incremental.fetch.session.cache.slots"),
            config.get_int("min.incremental.fetch.session.eviction.ms"),
        ),
        authorizer=authorizer,
        quotas=quotas,
        telemetry=ClientTelemetry(clock, max_bytes=config.get_int("telemetry.max.bytes")),
        share_partitions=shares,
        share_states=share_states,
        share_persister=persister,
        share_sessions=ShareSessionCache(
            clock,
            config.get_int("group.share.max.share.sessions"),
            config.get_int("group.share.session.timeout.ms"),
        ),
        tokens=tokens,
    )
