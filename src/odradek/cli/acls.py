"""``odradek acls add | remove | list``: ``kafka-acls.sh`` with its option names.

    odradek acls add --allow-principal User:alice --operation Read --topic orders
    odradek acls add --allow-principal User:alice --consumer --topic orders --group billing
    odradek acls add --deny-principal User:bob --operation Write --topic fin- \\
        --resource-pattern-type prefixed
    odradek acls list --topic orders
    odradek acls remove --allow-principal User:alice --operation Read --topic orders
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, run_command
from odradek.cli.output import output_option, wants_json, write_json
from odradek.client.acls import AclAdmin
from odradek.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_enum,
)

Op = AclOperation
# kafka-acls.sh's shorthands: what a producer and a consumer need.
_PRODUCER_TOPIC_OPS = (Op.WRITE, Op.DESCRIBE, Op.CREATE)
_CONSUMER_TOPIC_OPS = (Op.READ, Op.DESCRIBE)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    acls = commands.add_parser("acls", help="add, remove and list ACLs (as kafka-acls.sh)")
    connection_options(acls, DEFAULT_BOOTSTRAP, 30.0)
    actions = acls.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="add ACLs for the principals on the resources")
    remove = actions.add_parser("remove", help="remove the ACLs the options select")
    listing = actions.add_parser("list", help="the ACLs of the resources (of all if none given)")
    for action in (add, remove, listing):
        connection_options(action, argparse.SUPPRESS, argparse.SUPPRESS)
        action.add_argument("--topic", action="append", default=[])
        action.add_argument("--group", action="append", default=[])
        action.add_argument("--transactional-id", action="append", default=[])
        action.add_argument("--cluster", action="store_true", help="the cluster resource")
        action.add_argument(
            "--resource-pattern-type",
            default="literal" if action is add else None,
            help="literal or prefixed (add); also any or match (remove, list)",
        )
    for action in (add, remove):
        action.add_argument("--allow-principal", action="append", default=[])
        action.add_argument("--deny-principal", action="append", default=[])
        action.add_argument("--allow-host", action="append", default=[])
        action.add_argument("--deny-host", action="append", default=[])
        action.add_argument(
            "--operation",
            action="append",
            default=[],
            help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
            "AlterConfigs, IdempotentWrite, All (repeatable; default All)",
        )
        action.add_argument("--producer", action="store_true", help="what a producer needs")
        action.add_argument("--consumer", action="store_true", help="what a consumer needs")
    listing.add_argument("--principal", help="only the ACLs of this principal")
    for action in (add, remove, listing):
        output_option(action)
    add.set_defaults(run=run_command(_add, "odradek acls"))
    remove.set_defaults(run=run_command(_remove, "odradek acls"))
    listing.set_defaults(run=run_command(_list, "odradek acls"))


def _pattern_type(args: argparse.Namespace, default: PatternType) -> PatternType:
    raw = args.resource_pattern_type
    return default if raw is None else parse_enum(PatternType, raw)


def _resources(args: argparse.Namespace, pattern: PatternType) -> list[ResourcePattern]:
    found = [ResourcePattern(ResourceType.TOPIC, n, pattern) for n in args.topic]
    found += [ResourcePattern(ResourceType.GROUP, n, pattern) for n in args.group]
    found += [
        ResourcePattern(ResourceType.TRANSACTIONAL_ID, n, pattern) for n in args.transactional_id
    ]
    if args.cluster:
        found.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return found


def _operations(args: argparse.Namespace, resource: ResourcePattern) -> Iterator[AclOperation]:
    """The operations the options give for one resource (--producer and --consumer expand to
    Kafka's sets for its type)."""
    yield from (parse_enum(AclOperation, o) for o in args.operation)
    rtype = resource.resource_type
    if args.producer:
        if rtype is ResourceType.TOPIC:
            yield from _PRODUCER_TOPIC_OPS
        elif rtype is ResourceType.TRANSACTIONAL_ID:
            yield from (Op.WRITE, Op.DESCRIBE)
    if args.consumer:
        if rtype is ResourceType.TOPIC:
            yield from _CONSUMER_TOPIC_OPS
        elif rtype is ResourceType.GROUP:
            yield Op.READ
    if not (args.operation or args.producer or args.consumer):
        yield Op.ALL


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    resources = _resources(args, _pattern_type(args, PatternType.LITERAL))
    if not resources:
        raise SystemExit("odradek acls: name a resource (--topic, --group, --cluster, ...)")
    if not (args.allow_principal or args.deny_principal):
        raise SystemExit("odradek acls: give --allow-principal or --deny-principal")
    bindings: list[AclBinding] = []
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host or ["*"]),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host or ["*"]),
    ):
        for resource in resources:
            for operation in dict.fromkeys(_operations(args, resource)):
                bindings += [
                    AclBinding(resource, AccessControlEntry(p, h, operation, permission))
                    for p in principals
                    for h in hosts
                ]
    return bindings


def binding_record(binding: AclBinding) -> dict[str, object]:
    pattern, entry = binding.pattern, binding.entry
    return {
        "resource_type": pattern.resource_type.name,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type.name,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.name,
        "permission": entry.permission.name,
    }


def _print(args: argparse.Namespace, bindings: list[AclBinding], out: TextIO, heading: str) -> None:
    """As kafka-acls.sh prints them (grouped by resource), or a JSON array of bindings."""
    if wants_json(args):
        write_json([binding_record(b) for b in sorted(bindings)], out)
        return
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in sorted(bindings):
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    for pattern, entries in by_pattern.items():
        out.write(f"{heading} `{pattern}`:\n")
        for entry in entries:
            out.write(f" \t{entry} \n")
        out.write("\n")


async def _add(args: argparse.Namespace, out: TextIO) -> int:
    bindings = _bindings(args)
    async with await AclAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        await admin.create(bindings)
    _print(args, bindings, out, "Adding ACLs for resource")
    return 0


async def _remove(args: argparse.Namespace, out: TextIO) -> int:
    selections = [
        AclBindingFilter(
            b.pattern.resource_type,
            b.pattern.name,
            _pattern_type(args, PatternType.LITERAL),
            b.entry.principal,
            b.entry.host,
            b.entry.operation,
            b.entry.permission,
        )
        for b in _bindings(args)
    ]
    async with await AclAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        removed = await admin.delete(selections)
    _print(args, removed, out, "Removed ACLs for resource")
    return 0


async def _list(args: argparse.Namespace, out: TextIO) -> int:
    pattern = _pattern_type(args, PatternType.ANY)
    selections = [
        AclBindingFilter(r.resource_type, r.name, pattern, args.principal)
        for r in _resources(args, pattern)
    ] or [AclBindingFilter(principal=args.principal)]
    found: list[AclBinding] = []
    async with await AclAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        for selection in selections:
            found += await admin.describe(selection)
    _print(args, list(dict.fromkeys(found)), out, "Current ACLs for resource")
    return 0
