"""The API coverage page: every Kafka API, the versions odradek's handler registry serves
(what ApiVersions advertises), and those an Apache Kafka 4.4 broker serves
(:mod:`odradek.docs.kafka_apis`)."""

from __future__ import annotations

import ast
import importlib.util

from odradek.docs import header, rst_to_markdown, table
from odradek.docs.kafka_apis import KAFKA_4_4_BROKER_APIS
from odradek.server.registry import Handler, load_handlers

_INTRO = """\
# API coverage

The Kafka APIs a broker answers, as its handler registry (`src/odradek/server/registry.py`)
has them: ApiVersions advertises exactly these versions. A request for another API or version
closes the connection, as Kafka does; an ApiVersions request of a newer version gets the
versions in v0's format (KIP-511) so that the client can retry. Beside them, the versions an
Apache Kafka 4.4 broker serves (kafka-clients 4.4.0's `ApiKeys`, see
`src/odradek/docs/kafka_apis.py`).

odradek serves the versions that Kafka 4 removed (Produce v0-v2, Fetch v0-v3 and the like) as
Kafka 3.9 served them, so that old clients keep working; it does not serve the newest versions
of some APIs yet (the Difference column says which).
"""


def versions(low: int, high: int) -> str:
    """A version range as the page writes it: ``v3``, or ``v0`` to ``v11`` with an en dash."""
    return f"v{low}" if low == high else f"v{low}\N{EN DASH}v{high}"


def _what(handler: Handler) -> str:
    """The first paragraph of the handler module's doc, after its ``Name (key):``."""
    spec = importlib.util.find_spec(handler.fn.__module__)
    assert spec is not None and spec.origin is not None
    with open(spec.origin) as source:
        doc = ast.get_docstring(ast.parse(source.read())) or ""
    first = doc.split("\n\n")[0]
    what = rst_to_markdown(first.split("): ", 1)[-1])
    return what[:1].upper() + what[1:]


def _module_api_name(handler: Handler) -> str:
    """``controlled_shutdown`` → ``ControlledShutdown``."""
    module = handler.fn.__module__.rsplit(".", 1)[-1]
    return "".join(part.capitalize() for part in module.split("_"))


def _gaps(handler: Handler | None, kafka: tuple[str, int, int] | None) -> str:
    if handler is None:
        return "not implemented"
    if kafka is None:
        return "Kafka 4 no longer serves it (ZooKeeper mode)"
    notes = []
    _, low, high = kafka
    if handler.min_version < low:
        notes.append(f"{versions(handler.min_version, low - 1)} only here (Kafka 4 removed them)")
    if handler.max_version < high:
        notes.append(f"{versions(handler.max_version + 1, high)} not yet")
    return "; ".join(notes)


def page() -> str:
    handlers = load_handlers()
    keys = sorted(set(handlers) | set(KAFKA_4_4_BROKER_APIS))
    served = []
    missing = []
    for key in keys:
        handler = handlers.get(key)
        kafka = KAFKA_4_4_BROKER_APIS.get(key)
        if handler is None:
            assert kafka is not None
            missing.append([kafka[0], str(key), versions(kafka[1], kafka[2])])
            continue
        served.append(
            [
                kafka[0] if kafka is not None else _module_api_name(handler),
                str(key),
                versions(handler.min_version, handler.max_version),
                versions(kafka[1], kafka[2]) if kafka is not None else "—",
                _gaps(handler, kafka),
                _what(handler),
            ]
        )
    return (
        header("the handler registry (src/odradek/server/handlers/)")
        + _INTRO
        + f"\n## Served ({len(served)} APIs)\n\n"
        + table(["API", "Key", "odradek", "Kafka 4.4", "Difference", "What it does"], served)
        + f"\n## Not served ({len(missing)} APIs)\n\n"
        + "A Kafka 4.4 broker answers these; odradek does not advertise them.\n\n"
        + table(["API", "Key", "Kafka 4.4"], missing)
    )
