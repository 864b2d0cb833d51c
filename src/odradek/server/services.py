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
from odradek.cluster.controller.runtime import ControllerRuntime
from odradek.cluster.metadata.producer_ids import ProducerIdManager
from odradek.cluster.metadata.view import ClusterView
from odradek.cluster.replication.purgatory import Purgatory
from odradek.cluster.replication.replica_manager import ReplicaManager
from odradek.cluster.share.manager import SharePartitionManager
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.group.runtime import GroupCoordinatorRuntime
from odradek.coordinator.share.persister import DefaultStatePersister
from odradek.coordinator.share.runtime import ShareCoordinatorRuntime
from odradek.coordinator.transaction.runtime import TransactionCoordinatorRuntime
from odradek.counters import BrokerCounters
from odradek.quotas.manager import ClientQuotas
from odradek.security.sasl import SaslSession
from odradek.server.authorizer import Authorizer
from odradek.server.delegation_tokens import DelegationTokens
from odradek.server.fetch_sessions import FetchSessionCache
from odradek.server.share_sessions import ShareSessionCache
from odradek.storage import LogManager
from odradek.telemetry.clients import ClientTelemetry

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
    # Where Fetch long-polls and acks=all produces wait (the replica manager's), and other
    # requests that wait for a commit point.
    purgatory: Purgatory
    # The data plane (appends and fetches, with their waits) and, in a cluster, the roles of
    # the partitions.
    replicas: ReplicaManager
    # The controller this broker may be (None for a broker that is the whole cluster).
    controller: ControllerRuntime | None = None
    # What the metrics endpoint reports (None unless ``metrics.listener`` is set): handlers
    # count their topics' traffic in it.
    counters: BrokerCounters | None = None
    # Incremental fetch sessions (KIP-227); None: every Fetch is answered without a session.
    fetch_sessions: FetchSessionCache | None = None
    # Consulted by every handler's checks (server/authorize.py); None, without
    # ``authorizer.class.name``, allows everything.
    authorizer: Authorizer | None = None
    # Client quotas (producer_byte_rate, consumer_byte_rate, ...); None: nobody is throttled.
    quotas: ClientQuotas | None = None
    # Client telemetry (KIP-714): subscriptions given and metrics pushed; None: not served.
    telemetry: ClientTelemetry | None = None
    # Share groups' share-partitions on the partitions led here, and their members' share
    # sessions (ShareFetch, ShareAcknowledge); None: share groups are not served.
    share_partitions: SharePartitionManager | None = None
    share_sessions: ShareSessionCache | None = None
    # Delegation tokens (KIP-48); None: Create/Renew/Expire/DescribeDelegationToken answer
    # DELEGATION_TOKEN_AUTH_DISABLED.
    tokens: DelegationTokens | None = None
    # The share coordinator (``__share_group_state``: the share-partitions' persisted states)
    # and the share-partitions' way to it, here or on another broker.
    share_states: ShareCoordinatorRuntime | None = None
    share_persister: DefaultStatePersister | None = None


@dataclass(slots=True)
class Session:
    """Facts about one client connection that outlive its requests.

    ``principal`` changes once, when the connection authenticates: the connection sets it from
    the client's certificate after a TLS handshake with ``ssl.client.auth``, and the
    SaslAuthenticate handler from ``sasl`` when a SASL exchange succeeds. Only the connection's
    own requests, on the event loop, read or write it."""

    peer: str  # "host:port" of the client
    # Kafka's principal, as the authorizer sees it ("User:<name>"); ANONYMOUS until (unless)
    # the connection authenticates.
    principal: str = ANONYMOUS
    # The name of the listener the connection came in on.
    listener: str = "PLAINTEXT"
    # The SASL state of a connection to a SASL_PLAINTEXT or SASL_SSL listener; None otherwise.
    sasl: SaslSession | None = None
    # What the client said it is in ApiVersions v3+ (KIP-511); "" until then.
    software_name: str = ""
    software_version: str = ""
