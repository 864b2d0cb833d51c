"""``odradek users add | delete | list``: SCRAM credentials of users, as Kafka's
``kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-512=[password=…]'`` and
``kafka-configs.sh --describe`` manage them (AlterUserScramCredentials and
DescribeUserScramCredentials, KIP-554).

The password is salted here, on the client, as Kafka's admin client does: only the salt, the
iteration count and the salted password travel, and the broker keeps keys derived from them.
"""

from __future__ import annotations

import argparse
import getpass
import secrets
import sys
from typing import Any, TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, run_command
from odradek.cli.output import (
    columns,
    output_option,
    wants_json,
    write_json,
    write_records,
    write_result,
)
from odradek.client.aio import AsyncConnection
from odradek.client.core import ClientError
from odradek.protocol.errors import ErrorCode
from odradek.security.scram import (
    DEFAULT_ITERATIONS,
    MECHANISM_TYPES,
    MECHANISMS_BY_TYPE,
    SCRAM_SHA_512,
    salted_password,
)

ALTER_USER_SCRAM_CREDENTIALS = 51
DESCRIBE_USER_SCRAM_CREDENTIALS = 50


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    users = commands.add_parser("users", help="add, delete and list users' SCRAM credentials")
    connection_options(users, DEFAULT_BOOTSTRAP, 30.0)
    actions = users.add_subparsers(dest="action", required=True)
    mechanisms = sorted(MECHANISM_TYPES)

    add = actions.add_parser("add", help="add or replace a user's SCRAM credential")
    add.add_argument("--user", required=True)
    add.add_argument(
        "--password",
        help="the password (default: read from the terminal, or a line of stdin if piped)",
    )
    add.add_argument("--mechanism", choices=mechanisms, action="append")
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    add.set_defaults(run=run_command(_add, "odradek users"))

    delete = actions.add_parser("delete", help="delete a user's SCRAM credentials")
    delete.add_argument("--user", required=True)
    delete.add_argument(
        "--mechanism", choices=mechanisms, action="append", help="default: every one it has"
    )
    delete.set_defaults(run=run_command(_delete, "odradek users"))

    listing = actions.add_parser("list", help="users with SCRAM credentials and their mechanisms")
    listing.add_argument("--user", action="append", help="only these users")
    listing.set_defaults(run=run_command(_list, "odradek users"))
    for action in (add, delete, listing):
        connection_options(action, argparse.SUPPRESS, argparse.SUPPRESS)
        output_option(action)


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        password: str = args.password
        return password
    if sys.stdin.isatty():
        return getpass.getpass(f"Password for {args.user}: ")
    return sys.stdin.readline().rstrip("\n")


async def _connect(args: argparse.Namespace) -> AsyncConnection:
    address = args.bootstrap_server.split(",")[0].strip()
    return await AsyncConnection.open(address, client_id="odradek-users", timeout_s=args.timeout)


async def _alter(args: argparse.Namespace, fields: dict[str, Any], out: TextIO, done: str) -> int:
    connection = await _connect(args)
    try:
        response = await connection.request(ALTER_USER_SCRAM_CREDENTIALS, fields, highest=0)
    finally:
        await connection.close()
    failed = [r for r in response.results if r.error_code != ErrorCode.none]
    if wants_json(args):
        errors = [
            {"user": r.user, "error": r.error_code.name, "message": r.error_message} for r in failed
        ]
        write_json({"user": args.user, "changed": not failed, "errors": errors}, out)
        return 1 if failed else 0
    for result in failed:
        out.write(f"{result.user}: {result.error_code.name} {result.error_message or ''}\n")
    if not failed:
        out.write(f"{done}\n")
    return 1 if failed else 0


async def _add(args: argparse.Namespace, out: TextIO) -> int:
    password = _password(args)
    if not password:
        raise ClientError("empty password")
    upsertions = []
    for mechanism in args.mechanism or [SCRAM_SHA_512]:
        salt = secrets.token_bytes(32)
        upsertions.append(
            {
                "name": args.user,
                "mechanism": MECHANISM_TYPES[mechanism],
                "iterations": args.iterations,
                "salt": salt,
                "salted_password": salted_password(mechanism, password, salt, args.iterations),
            }
        )
    fields = {"deletions": [], "upsertions": upsertions}
    return await _alter(args, fields, out, f"Credentials of user {args.user} set.")


async def _delete(args: argparse.Namespace, out: TextIO) -> int:
    mechanisms = args.mechanism
    if not mechanisms:
        described = await _describe(args, [args.user])
        mechanisms = [m for _, m, _ in described]
        if not mechanisms:
            result = {"user": args.user, "changed": False, "errors": []}
            write_result(args, result, f"User {args.user} has no SCRAM credentials.", out)
            return 2
    deletions = [{"name": args.user, "mechanism": MECHANISM_TYPES[m]} for m in mechanisms]
    fields = {"deletions": deletions, "upsertions": []}
    return await _alter(args, fields, out, f"Credentials of user {args.user} deleted.")


async def _describe(
    args: argparse.Namespace, users: list[str] | None
) -> list[tuple[str, str, int]]:
    connection = await _connect(args)
    try:
        response = await connection.request(
            DESCRIBE_USER_SCRAM_CREDENTIALS,
            {"users": None if users is None else [{"name": u} for u in users]},
            highest=0,
        )
    finally:
        await connection.close()
    if response.error_code != ErrorCode.none:
        raise ClientError(f"{response.error_code.name}: {response.error_message}")
    return [
        (result.user, MECHANISMS_BY_TYPE.get(int(info.mechanism), "?"), int(info.iterations))
        for result in response.results
        if result.error_code == ErrorCode.none
        for info in result.credential_infos
    ]


async def _list(args: argparse.Namespace, out: TextIO) -> int:
    records = [
        {"user": u, "mechanism": m, "iterations": i} for u, m, i in await _describe(args, args.user)
    ]
    write_records(args, records, _LIST_COLUMNS, out)
    return 0


_LIST_COLUMNS = columns(("User", "user"), ("Mechanism", "mechanism"), ("Iterations", "iterations"))
