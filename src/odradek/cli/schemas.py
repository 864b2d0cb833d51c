"""``odradek schemas list | get | register | delete | compat | config``: the schema registry
(``schema.registry.listener``) over its HTTP API, as Confluent's REST API documents it, so the
commands work against Confluent's registry too."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from odradek.cli.output import columns, output_option, wants_json, write_json, write_records
from odradek.registry.client import RegistryCallError, RegistryClient, quote

DEFAULT_REGISTRY = "http://127.0.0.1:8081"
LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)

Command = Callable[[argparse.Namespace, TextIO], int]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    schemas = commands.add_parser("schemas", help="subjects, versions and compatibility of schemas")
    actions = schemas.add_subparsers(dest="action", required=True)

    listing = actions.add_parser("list", help="subjects with their latest version and id")
    listing.add_argument("--prefix", default="", help="only subjects starting with it")
    listing.add_argument("--deleted", action="store_true", help="soft-deleted ones too")
    listing.set_defaults(run=_runner(_list))

    get = actions.add_parser("get", help="a schema, by subject and version or by id")
    which = get.add_mutually_exclusive_group(required=True)
    which.add_argument("--subject")
    which.add_argument("--id", type=int)
    get.add_argument("--version", default="latest", help="a number or latest (the default)")
    get.set_defaults(run=_runner(_get))

    register = actions.add_parser("register", help="register a schema under a subject")
    register.add_argument("--subject", required=True)
    _schema_arguments(register)
    register.add_argument("--normalize", action="store_true")
    register.set_defaults(run=_runner(_register))

    delete = actions.add_parser("delete", help="delete a subject, or one of its versions")
    delete.add_argument("--subject", required=True)
    delete.add_argument("--version", help="only this version (a number or latest)")
    delete.add_argument("--permanent", action="store_true", help="for good (after a soft delete)")
    delete.set_defaults(run=_runner(_delete))

    compat = actions.add_parser(
        "compat", help="whether a schema may follow a subject's versions (exit 1 if not)"
    )
    compat.add_argument("--subject", required=True)
    _schema_arguments(compat)
    compat.add_argument(
        "--version", help="against this version only (default: those the level covers)"
    )
    compat.set_defaults(run=_runner(_compat))

    config = actions.add_parser("config", help="show or set a compatibility level")
    config.add_argument("--subject", help="default: the global level")
    change = config.add_mutually_exclusive_group()
    change.add_argument("--set", choices=LEVELS, type=str.upper, help="the new level")
    change.add_argument(
        "--delete", action="store_true", help="remove the subject's level (the global applies)"
    )
    config.set_defaults(run=_runner(_config))

    for action in (listing, get, register, delete, compat, config):
        action.add_argument(
            "--registry",
            default=DEFAULT_REGISTRY,
            help=f"the registry's URL (default {DEFAULT_REGISTRY})",
        )
        action.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
        action.add_argument(
            "--basic-auth",
            metavar="USER:PASSWORD",
            help="HTTP basic credentials (Confluent's basic.auth.user.info)",
        )
        action.add_argument(
            "--ca-file",
            help="PEM file of the CAs that an https:// registry's certificate is checked against",
        )
        output_option(action)


def _schema_arguments(parser: argparse.ArgumentParser) -> None:
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--schema", help="the schema's text")
    given.add_argument("--schema-file", type=Path, help="a file holding the schema")
    parser.add_argument(
        "--type", default="AVRO", type=str.upper, choices=("AVRO", "JSON", "PROTOBUF")
    )
    parser.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="NAME=SUBJECT:VERSION",
        help="a type the schema takes from another subject (repeatable)",
    )


def _runner(command: Command) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args, sys.stdout)
        except (RegistryCallError, OSError, ValueError) as e:
            print(f"odradek schemas: {e}", file=sys.stderr)
            return 1

    return run


def _call(args: argparse.Namespace, method: str, path: str, body: object = None) -> Any:
    client = RegistryClient(
        args.registry, basic_auth=args.basic_auth, ca_file=args.ca_file, timeout_s=args.timeout
    )
    return client.call(method, path, body)


def _schema_body(args: argparse.Namespace) -> dict[str, object]:
    text = args.schema if args.schema is not None else args.schema_file.read_text()
    body: dict[str, object] = {"schema": text}
    if args.type != "AVRO":
        body["schemaType"] = args.type
    references = []
    for given in args.reference:
        name, _, target = given.partition("=")
        subject, _, version = target.rpartition(":")
        if not name or not subject or not version.lstrip("-").isdigit():
            raise ValueError(f"--reference {given!r} is not NAME=SUBJECT:VERSION")
        references.append({"name": name, "subject": subject, "version": int(version)})
    if references:
        body["references"] = references
    return body


def _list(args: argparse.Namespace, out: TextIO) -> int:
    query = urllib.parse.urlencode(
        {"latestOnly": "true", "deleted": str(args.deleted).lower(), "subjectPrefix": args.prefix}
    )
    found = _call(args, "GET", f"/schemas?{query}")
    records = [
        {
            "subject": v["subject"],
            "version": v["version"],
            "id": v["id"],
            "type": v.get("schemaType", "AVRO"),
        }
        for v in found
    ]
    shown = columns(("SUBJECT", "subject"), ("VERSION", "version"), ("ID", "id"), ("TYPE", "type"))
    write_records(args, records, shown, out, empty="no subjects")
    return 0


def _get(args: argparse.Namespace, out: TextIO) -> int:
    if args.id is not None:
        found = _call(args, "GET", f"/schemas/ids/{args.id}")
        found["id"] = args.id
    else:
        found = _call(args, "GET", f"/subjects/{quote(args.subject)}/versions/{args.version}")
    if wants_json(args):
        write_json(found, out)
        return 0
    try:
        out.write(json.dumps(json.loads(found["schema"]), indent=2) + "\n")
    except ValueError:  # a Protobuf schema's text
        out.write(found["schema"] + "\n")
    return 0


def _register(args: argparse.Namespace, out: TextIO) -> int:
    subject = quote(args.subject)
    normalize = str(args.normalize).lower()
    body = _schema_body(args)
    registered = _call(args, "POST", f"/subjects/{subject}/versions?normalize={normalize}", body)
    found = _call(args, "POST", f"/subjects/{subject}?normalize={normalize}", body)
    result = {"subject": args.subject, "version": found["version"], "id": registered["id"]}
    if wants_json(args):
        write_json(result, out)
    else:
        out.write(f"{args.subject}: version {result['version']}, id {result['id']}\n")
    return 0


def _delete(args: argparse.Namespace, out: TextIO) -> int:
    permanent = str(args.permanent).lower()
    path = f"/subjects/{quote(args.subject)}"
    if args.version is not None:
        path += f"/versions/{args.version}"
    deleted = _call(args, "DELETE", f"{path}?permanent={permanent}")
    versions = deleted if isinstance(deleted, list) else [deleted]
    if wants_json(args):
        write_json(
            {"subject": args.subject, "versions": versions, "permanent": args.permanent}, out
        )
    else:
        how = "permanently" if args.permanent else "soft-"
        out.write(f"{args.subject}: {how}deleted version(s) {', '.join(map(str, versions))}\n")
    return 0


def _compat(args: argparse.Namespace, out: TextIO) -> int:
    path = f"/compatibility/subjects/{quote(args.subject)}/versions"
    if args.version is not None:
        path += f"/{args.version}"
    answer = _call(args, "POST", f"{path}?verbose=true", _schema_body(args))
    compatible = bool(answer.get("is_compatible"))
    if wants_json(args):
        write_json({"compatible": compatible, "messages": answer.get("messages", [])}, out)
    else:
        out.write("compatible\n" if compatible else "incompatible\n")
        for message in answer.get("messages", []):
            out.write(f"  {message}\n")
    return 0 if compatible else 1


def _config(args: argparse.Namespace, out: TextIO) -> int:
    path = "/config" + (f"/{quote(args.subject)}" if args.subject else "")
    if args.set:
        _call(args, "PUT", path, {"compatibility": args.set})
    elif args.delete:
        _call(args, "DELETE", path)
    level = _call(args, "GET", path + ("?defaultToGlobal=true" if args.subject else ""))
    result = {"subject": args.subject, "compatibility": level["compatibilityLevel"]}
    if wants_json(args):
        write_json(result, out)
    else:
        out.write(f"{args.subject or '(global)'}: {result['compatibility']}\n")
    return 0
