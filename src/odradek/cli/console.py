"""``odradek console``: the web console against any Kafka-compatible cluster.

    odradek console --bootstrap broker1:9092 --listen 127.0.0.1:8080
    odradek console --bootstrap broker1:9093 --command-config client.properties
    odradek console --bootstrap broker1:9092 --schema-registry http://registry:8081

The page and its API are the broker's own console (:mod:`odradek.console`), served by this
process; ``--command-config`` is a Kafka client properties file (``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.truststore.location``, …) as Kafka's tools take;
``--schema-registry`` the REST API of a schema registry for the schemas page.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from odradek.cli.options import DEFAULT_BOOTSTRAP
from odradek.cli.stop_signals import StopSignals
from odradek.client.core import parse_address
from odradek.config import parse_properties
from odradek.security.client_settings import ClientSecurity, ClientSettingsError

DEFAULT_LISTEN = "127.0.0.1:8080"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    console = commands.add_parser("console", help="serve the web console for a cluster")
    console.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        dest="bootstrap",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"a broker of the cluster, or several comma-separated (default {DEFAULT_BOOTSTRAP})",
    )
    console.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where to serve the page (default {DEFAULT_LISTEN}; port 0: any free port)",
    )
    console.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties for the connection (security.protocol, sasl.*, ssl.*)",
    )
    console.add_argument(
        "--allowed-hosts",
        default="",
        metavar="NAME,NAME",
        help="host names besides this machine's (and IP addresses) the page may be opened "
        "under; * for any",
    )
    console.add_argument(
        "--schema-registry",
        metavar="URL",
        help="a schema registry's REST API for the schemas page (Confluent's, or a broker's "
        "schema.registry.listener)",
    )
    console.add_argument(
        "--schema-registry-basic-auth",
        metavar="USER:PASSWORD",
        help="the registry's HTTP basic credentials (Confluent's basic.auth.user.info)",
    )
    console.add_argument(
        "--schema-registry-ca",
        metavar="FILE",
        help="PEM file of the CAs that an https:// registry's certificate is checked against "
        "(default: the system's)",
    )
    console.add_argument("--timeout", type=float, default=15.0, help="seconds per request")
    console.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from odradek.console.api import ConsoleApi
    from odradek.console.schemas import RestRegistry, SchemaView, over_rest
    from odradek.console.server import HttpServer
    from odradek.registry.client import RegistryClient

    # Before the address is printed: whoever reads it may send SIGTERM at once.
    stop_signals = StopSignals().install()
    try:
        settings = (
            parse_properties(Path(args.command_config).read_text()) if args.command_config else {}
        )
        security = ClientSecurity.from_config(settings)
        host, port = parse_address(args.listen)
        schemas = None
        if args.schema_registry:
            client = RegistryClient(
                args.schema_registry,
                basic_auth=args.schema_registry_basic_auth,
                ca_file=args.schema_registry_ca,
                timeout_s=args.timeout,
            )
            schemas = SchemaView(over_rest(RestRegistry(client)))
    except (OSError, ValueError, ClientSettingsError) as e:
        print(f"odradek console: {e}", file=sys.stderr)
        return 2
    api = ConsoleApi(args.bootstrap, security, timeout_s=args.timeout, schemas=lambda: schemas)
    server = HttpServer(None, api, allowed_hosts=args.allowed_hosts.split(","))
    api.start()
    try:
        bound = server.start(host, port)
    except OSError as e:
        api.close()
        print(f"odradek console: cannot listen on {args.listen}: {e}", file=sys.stderr)
        return 1
    print(f"odradek console on http://{bound[0]}:{bound[1]}/ for {args.bootstrap}", flush=True)
    stop_signals.wait()
    server.stop()
    api.close()
    return 0
