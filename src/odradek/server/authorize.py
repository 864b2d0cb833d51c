"""The authorisation checks handlers make at their top, against the broker's authorizer.

Each handler asks here whether the request's principal (from its connection's session, on the
client's host) may perform Kafka's operation for that API on the resources it names
(https://kafka.apache.org/documentation/#operations_resources_and_protocols), and answers what
it may not with Kafka's error for the resource type. A broker without an authorizer
(``authorizer.class.name`` unset) allows everything, at the cost of one attribute test.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.static.protocol import ResponsePayload

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.server.context import RequestContext
from odradek.server.services import ANONYMOUS

Op = AclOperation
TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID

AUTHORIZATION_ERRORS = {
    TOPIC: ErrorCode.topic_authorization_failed,
    GROUP: ErrorCode.group_authorization_failed,
    CLUSTER: ErrorCode.cluster_authorization_failed,
    TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
}


def client_host(ctx: RequestContext) -> str:
    """The client's address as ACL hosts name it (the session's peer without its port)."""
    host = ctx.session.peer.rpartition(":")[0]
    return host.strip("[]") or ctx.session.peer


def permits(ctx: RequestContext, operation: AclOperation, rtype: ResourceType, name: str) -> bool:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.session.principal, client_host(ctx), operation, rtype, name)


# What Metadata, DescribeCluster and DescribeGroups answer when the client did not ask for the
# operations it may perform (Kafka's -2147483648).
OPERATIONS_NOT_ASKED = -(2**31)
# The operations each resource type has, as Kafka's AclEntry.supportedOperations lists them.
SUPPORTED_OPERATIONS = {
    TOPIC: (
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ),
    GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE),
    CLUSTER: (
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    ),
}


def authorized_operations(ctx: RequestContext, rtype: ResourceType, name: str) -> int:
    """The operations the principal may perform on the resource, as Kafka's bit field (bit n
    for the operation whose wire value is n)."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[rtype]:
        if permits(ctx, operation, rtype, name):
            bits |= 1 << operation.value
    return bits


def permits_cluster(ctx: RequestContext, operation: AclOperation) -> bool:
    return permits(ctx, operation, CLUSTER, CLUSTER_NAME)


def permits_any(ctx: RequestContext, operation: AclOperation, rtype: ResourceType) -> bool:
    """Whether ``operation`` is allowed on some resource of the type (Kafka's
    authorizeByResourceType, e.g. InitProducerId's "WRITE on any topic")."""
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_any(ctx.session.principal, client_host(ctx), operation, rtype)


def denied(
    ctx: RequestContext, operation: AclOperation, rtype: ResourceType, names: Iterable[str]
) -> frozenset[str]:
    """Those of ``names`` the principal may not perform ``operation`` on."""
    if ctx.services.authorizer is None:
        return frozenset()
    return frozenset(n for n in set(names) if not permits(ctx, operation, rtype, n))


def refusal(ctx: RequestContext, rtype: ResourceType, **fields: Any) -> ResponsePayload:
    """A whole-request refusal: the response with its top-level ``error_code`` set to the
    resource type's authorization error (other fields as given, or empty)."""
    return ctx.respond(throttle_time=0, error_code=AUTHORIZATION_ERRORS[rtype], **fields)


def producer_denials(ctx: RequestContext, request: Any) -> dict[tuple[str, int], ErrorCode]:
    """Produce: WRITE on the transactional id of a transactional produce (else every partition
    is refused), and WRITE on each topic."""
    if ctx.services.authorizer is None:
        return {}
    everything = [(t.name, int(p.index)) for t in request.topic_data for p in t.partition_data]
    txn_id = request.transactional_id
    if txn_id is not None and not permits(ctx, Op.WRITE, TRANSACTIONAL_ID, txn_id):
        return dict.fromkeys(everything, ErrorCode.transactional_id_authorization_failed)
    refused = denied(ctx, Op.WRITE, TOPIC, (t for t, _ in everything))
    return {tp: ErrorCode.topic_authorization_failed for tp in everything if tp[0] in refused}


def fetch_denials(ctx: RequestContext, topics: Iterable[str], replica: bool) -> frozenset[str]:
    """Fetch: the topics refused (of those the request, or its session, names). A follower
    needs CLUSTER_ACTION on the cluster (without it, every topic is refused, as Kafka answers),
    a consumer READ on each topic."""
    if ctx.services.authorizer is None:
        return frozenset()
    names = sorted(set(topics))  # a name per partition: once each
    if replica:
        return frozenset() if permits_cluster(ctx, Op.CLUSTER_ACTION) else frozenset(names)
    return denied(ctx, Op.READ, TOPIC, names)


_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER = 2, 4, 8
_CONFIG_CLIENT_METRICS, _CONFIG_GROUP = 16, 32


def config_denial(
    ctx: RequestContext, operation: AclOperation, kind: int, name: str
) -> ErrorCode | None:
    """Describe/AlterConfigs of one config resource: the topic's DESCRIBE_CONFIGS or
    ALTER_CONFIGS, or the cluster's for a broker's configs and client metrics subscriptions;
    the error, or None if allowed."""
    if kind == _CONFIG_TOPIC:
        allowed = permits(ctx, operation, TOPIC, name)
        return None if allowed else ErrorCode.topic_authorization_failed
    if kind in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_CLIENT_METRICS):
        allowed = permits_cluster(ctx, operation)
        return None if allowed else ErrorCode.cluster_authorization_failed
    if kind == _CONFIG_GROUP:
        allowed = permits(ctx, operation, GROUP, name)
        return None if allowed else ErrorCode.group_authorization_failed
    return None


def transaction_denials(
    ctx: RequestContext,
    transactional_id: str,
    partitions: Iterable[tuple[str, int]],
    operation: AclOperation = Op.WRITE,
    group: str | None = None,
) -> dict[tuple[str, int], ErrorCode]:
    """A transaction's request over ``partitions`` (AddPartitionsToTxn, TxnOffsetCommit): WRITE
    on the transactional id, READ on ``group`` if one, and ``operation`` on each topic. Empty
    when all is allowed; else every partition's answer, those not refused themselves
    OPERATION_NOT_ATTEMPTED when only some topics are (Kafka's answers)."""
    if ctx.services.authorizer is None:
        return {}
    listed = list(partitions)
    if not permits(ctx, Op.WRITE, TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(listed, ErrorCode.transactional_id_authorization_failed)
    if group is not None and not permits(ctx, Op.READ, GROUP, group):
        return dict.fromkeys(listed, ErrorCode.group_authorization_failed)
    refused = denied(ctx, operation, TOPIC, (t for t, _ in listed))
    if not refused:
        return {}
    return {
        tp: ErrorCode.topic_authorization_failed
        if tp[0] in refused
        else ErrorCode.operation_not_attempted
        for tp in listed
    }


def producer_permitted(ctx: RequestContext, transactional_id: str | None) -> bool:
    """InitProducerId: WRITE on the transactional id; for an idempotent producer,
    IDEMPOTENT_WRITE on the cluster or WRITE on some topic."""
    if transactional_id is not None:
        return permits(ctx, Op.WRITE, TRANSACTIONAL_ID, transactional_id)
    return permits_cluster(ctx, Op.IDEMPOTENT_WRITE) or permits_any(ctx, Op.WRITE, TOPIC)


def token_requests_allowed(ctx: RequestContext) -> bool:
    """Kafka's rule for the delegation token APIs: only a connection that authenticated (SASL,
    or TLS with a client certificate), and not with a delegation token itself."""
    sasl = ctx.session.sasl
    if sasl is not None and sasl.token_authenticated:
        return False
    return ctx.session.principal != ANONYMOUS


def permits_user(ctx: RequestContext, operation: AclOperation, principal: str) -> bool:
    """``operation`` (CREATE_TOKENS, DESCRIBE_TOKENS) on the USER resource named by a principal
    (``User:alice``), as Kafka 3.3+ checks tokens made or shown on behalf of another user."""
    return permits(ctx, operation, ResourceType.USER, principal)
