"""What Kafka API handlers may use of the broker: the services object and a connection's session.

A handler gets a :class:`~odradek.server.context.RequestContext` holding these, never the
:class:`~odradek.server.broker.Broker`: what it can reach is what is named here, and a handler
can be called in a test with services built from real parts and no listener, sockets or
housekeeping (``tests/server/handlers``). The broker builds one :class:`BrokerServices` when it
starts and hands it to every connection; each connection builds one :class:`Session` when it is
accepted. Neither is rebuilt per request.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.clock import Clock
from odradek.cluster.controller_runtime import ControllerRuntime
from odradek.cluster.producer_ids import ProducerIdManager
from odradek.cluster.replica_manager import ReplicaManager
from odradek.cluster.topics import TopicManager
from odradek.cluster.view import ClusterView
from odradek.config import BrokerConfig
from odradek.coordinator.runtime import GroupCoordinatorRuntime
from odradek.coordinator.txn_runtime import TransactionCoordinatorRuntime
from odradek.counters import BrokerCounters
from odradek.security.authorizer import Authorizer
from odradek.server.fetch_sessions import FetchSessionCache
from odradek.server.purgatory import Purgatory
from odradek.storage import LogManager

ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """The broker's parts a handler works with, built once when the broker starts."""

    config: BrokerConfig
    clock: Clock
    topics: TopicManager
    groups: GroupCoordinatorRuntime
    transactions: TransactionCoordinatorRuntime
    producer_ids: ProducerIdManager
    cluster: ClusterView
    # Only for what is about the storage itself (DescribeLogDirs, a checkpoint after
    # DeleteRecords): records go through ``topics``.
    logs: LogManager
    # Where Fetch long-polls and acks=all produces wait.
    purgatory: Purgatory
    # The roles of partitions in a cluster, and the controller this broker may be (None for a
    # broker that is the whole cluster).
    replicas: ReplicaManager | None = None
    controller: ControllerRuntime | None = None
    # What the metrics endpoint reports (None unless ``metrics.listener`` is set): handlers
    # count their topics' traffic in it.
    counters: BrokerCounters | None = None
    # Incremental fetch sessions (KIP-227); None: every Fetch is answered without a session.
    fetch_sessions: FetchSessionCache | None = None
    # Consulted by every handler's checks (server/authorize.py); None, without
    # ``authorizer.class.name``, allows everything.
    authorizer: Authorizer | None = None


@dataclass(frozen=True, slots=True)
class Session:
    """Facts about one client connection that outlive its requests."""

    peer: str  # "host:port" of the client
    # Kafka's principal, as the authorizer will see it: no authentication yet, so everyone is
    # anonymous (SASL and TLS will set it when the connection authenticates).
    principal: str = ANONYMOUS
