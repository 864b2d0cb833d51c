"""The broker's authorizer: Kafka's StandardAuthorizer rules over the ACLs of the metadata store.

:class:`Authorizer` is built when ``authorizer.class.name`` names one of Kafka's authorizers;
without it the broker has none and every request is allowed (Kafka's behaviour with no authorizer).

Storage: the ACLs live in the metadata store (the local file, or ZooKeeper's ``/kafka-acl`` znodes
in a cluster), one entry set per resource pattern. A change is written there first and applied
here after; a broker that crashes between the two has either written the change (it is read at
the next start) or not (the client got no answer and may retry). Other brokers' changes arrive as
the store's ``"acls"`` notifications, after which the rules are rebuilt from the store's cache, so
every broker converges on what the store holds.

Threads: the broker's event loop only (the store's notifications are delivered there).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from odradek.cluster.metadata.store import MetadataChange, MetadataStore
from odradek.config import BrokerConfig
from odradek.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclRules,
    ResourceType,
    parse_super_users,
)

# Kafka's class names (ZooKeeper-mode, KRaft, and the pre-2.4 one): each means Kafka's ACL rules.
AUTHORIZER_CLASSES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }
)


class UnknownAuthorizerError(ValueError):
    """``authorizer.class.name`` names a class odradek cannot stand in for."""


@dataclass(frozen=True, slots=True)
class DeletedAcls:
    """What one DeleteAcls filter removed."""

    bindings: list[AclBinding]


class Authorizer:
    """Decisions from the ACLs in force; changes written through the metadata store."""

    def __init__(
        self,
        store: MetadataStore,
        super_users: frozenset[str] = frozenset(),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self.rules = self._rules()

    @classmethod
    def from_config(cls, config: BrokerConfig, store: MetadataStore) -> Authorizer | None:
        """The authorizer ``authorizer.class.name`` asks for, or None when it is empty."""
        name = (config.raw("authorizer.class.name") or "").strip()
        if not name:
            return None
        if name not in AUTHORIZER_CLASSES:
            known = ", ".join(sorted(AUTHORIZER_CLASSES))
            raise UnknownAuthorizerError(f"authorizer.class.name={name} is not one of {known}")
        return cls(
            store,
            parse_super_users(config.raw("super.users")),
            config.get_bool("allow.everyone.if.no.acl.found"),
        )

    def _rules(self) -> AclRules:
        return AclRules(self.store.acls, self.super_users, self.allow_if_no_acl)

    def on_change(self, change: MetadataChange) -> None:
        """A store listener: rebuild the rules when ACLs changed (here or on another broker)."""
        if change.kind == "acls":
            self.rules = self._rules()

    def authorize(
        self, principal: str, host: str, operation: AclOperation, rtype: ResourceType, name: str
    ) -> bool:
        return self.rules.authorize(principal, host, operation, rtype, name)

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, rtype: ResourceType
    ) -> bool:
        return self.rules.authorize_any(principal, host, operation, rtype)

    def describe(self, selection: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.rules.bindings() if selection.matches(b)]

    async def create(self, bindings: Iterable[AclBinding]) -> None:
        """Store bindings (already validated), one write per resource pattern, all in flight
        together."""
        by_pattern: dict[object, list[AclBinding]] = {}
        for binding in bindings:
            by_pattern.setdefault(binding.pattern, []).append(binding)
        await asyncio.gather(
            *(
                self.store.change_acls(group[0].pattern, add=[b.entry for b in group])
                for group in by_pattern.values()
            )
        )
        self.rules = self._rules()

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[DeletedAcls]:
        """Remove what each filter matches; a binding matched by two filters is reported by the
        first (as Kafka does)."""
        current = self.rules.bindings()
        results: list[DeletedAcls] = []
        taken: set[AclBinding] = set()
        for selection in filters:
            matched = [b for b in current if selection.matches(b) and b not in taken]
            taken.update(matched)
            results.append(DeletedAcls(matched))
        by_pattern: dict[object, list[AclBinding]] = {}
        for binding in sorted(taken):
            by_pattern.setdefault(binding.pattern, []).append(binding)
        await asyncio.gather(
            *(
                self.store.change_acls(group[0].pattern, remove=[b.entry for b in group])
                for group in by_pattern.values()
            )
        )
        self.rules = self._rules()
        return results
