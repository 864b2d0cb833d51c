"""What tests of ACL tools share: asking a running broker's authorizer directly."""

from __future__ import annotations

from odradek.security.acl import AclOperation, ResourceType
from odradek.testing import RunningBroker


def may(broker: RunningBroker, principal: str, op: AclOperation, rtype: ResourceType, name: str):
    """The broker's authorizer's decision on ``op`` by ``principal`` (from 10.0.0.1) on the
    resource ``rtype`` ``name``."""
    assert broker.broker is not None
    authorizer = broker.broker.services.authorizer
    assert authorizer is not None
    return authorizer.authorize(principal, "10.0.0.1", op, rtype, name)
