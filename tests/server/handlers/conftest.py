"""Handlers called directly, without a listener or sockets: :func:`services` builds the object a
handler gets from real parts on a temporary directory (log manager, topic manager, group
coordinator, cluster view) on a manual clock, and :class:`HandlerCaller` runs a handler on a kio
request and decodes its response from the bytes a client would receive.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.cluster.metadata.store import LocalMetadataStore
from odradek.cluster.metadata.view import BrokerEndpoint, PartitionInfo
from odradek.cluster.replication.purgatory import Purgatory
from odradek.config import BrokerConfig
from odradek.protocol.messages import RequestHeader, build, encode_response, request_schema
from odradek.server.composition import build_services, lone_cluster_view, open_parts
from odradek.server.context import FrameParts, RequestContext
from odradek.server.registry import HANDLERS, load_handlers
from odradek.server.services import BrokerServices, Session
from odradek.storage import LogManager, ReadSlice
from tests.server.conftest import decode_exactly, now_ms

NODE_ID = 1
ENDPOINT = BrokerEndpoint(NODE_ID, "broker.example", 9092)
PEER = Session("127.0.0.1:50000")


@pytest.fixture
def clock() -> ManualClock:
    # Starts at the wall clock's time, so batches stamped by tests.server.conftest.batch_of are
    # within the broker's timestamp bounds.
    return ManualClock(now_ms())


@pytest.fixture
def services(tmp_path: Path, clock: ManualClock) -> Iterator[BrokerServices]:
    """A single broker's services on ``tmp_path``, wired as :class:`Broker` wires them."""
    config = BrokerConfig({"log.dirs": str(tmp_path), "node.id": str(NODE_ID)})
    logs = LogManager(config.log_dirs, clock)
    store = LocalMetadataStore(config.log_dirs[0], node_id=NODE_ID)
    parts = open_parts(config, clock, store, logs, Purgatory())
    parts.groups.load()  # no timer task: tests move the clock and tick
    services = build_services(parts, lone_cluster_view(parts, ENDPOINT))
    services.transactions.load()  # no timer task and no markers sent: tests call the coordinator
    if services.share_states is not None:
        services.share_states.load()
    yield services
    groups = parts.groups
    groups.shard.shutdown()
    logs.close()


class HandlerCaller:
    """Calls registered handlers the way a connection does, minus the framing of requests."""

    _correlation_ids = itertools.count(1)

    def __init__(
        self,
        services: BrokerServices,
        session: Session = PEER,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        load_handlers()
        self.services = services
        self.session = session
        self._loop = loop or asyncio.new_event_loop()

    def close(self) -> None:
        self._loop.close()

    def run(self, work: Any) -> Any:
        """Await ``work`` on this caller's loop (where the handlers' background tasks run)."""
        return self._loop.run_until_complete(work)

    def context(self, api_key: int, version: int) -> RequestContext:
        header = RequestHeader(api_key, version, next(self._correlation_ids), "odradek-tests")
        return RequestContext(self.services, header, self.session)

    def call(self, api_key: int, version: int, /, **fields: Any) -> Any:
        """The response to a request built from ``fields`` (see ``odradek.protocol.messages.
        build``), decoded from the bytes the handler's answer encodes to; None if it sends none
        (Produce with acks=0)."""
        return self.call_request(api_key, version, build(request_schema(api_key, version), fields))

    def call_request(self, api_key: int, version: int, request: Any) -> Any:
        """As :meth:`call`, for a request made already (a kio entity of ``version``)."""
        ctx = self.context(api_key, version)
        handler = HANDLERS[api_key]
        assert handler.min_version <= version <= handler.max_version
        response = self._loop.run_until_complete(handler.fn(ctx, request))
        return self.decode(ctx, response)

    def answer(self, api_key: int, version: int, /, **fields: Any) -> Any:
        """The handler's answer as it made it (encoded, to prove it can be, but not decoded):
        for answers kio's reader refuses though Kafka's clients read them, such as the -1
        timestamps of the delegation token APIs' errors."""
        ctx = self.context(api_key, version)
        request = build(request_schema(api_key, version), fields)
        response = self._loop.run_until_complete(HANDLERS[api_key].fn(ctx, request))
        encode_response(ctx.header.correlation_id, response)
        return response

    def decode(self, ctx: RequestContext, response: Any) -> Any:
        """A handler's answer decoded from the bytes a client would receive (None: none)."""
        api_key = ctx.header.api_key
        version = ctx.header.api_version
        if response is None:
            return None
        if isinstance(response, FrameParts):
            frame = b"".join(
                p.read_bytes() if isinstance(p, ReadSlice) else bytes(p) for p in response.parts
            )
            assert len(frame) == response.size
        elif isinstance(response, bytes):
            frame = response
        else:
            frame = encode_response(ctx.header.correlation_id, response)
        return decode_exactly(api_key, version, frame[4:], ctx.header.correlation_id)

    def with_cluster(self, cluster: Any) -> HandlerCaller:
        """A caller (on this one's event loop) whose services answer from another cluster view."""
        services = dataclasses.replace(self.services, cluster=cluster)
        return HandlerCaller(services, self.session, self._loop)

    def with_session(self, session: Session) -> HandlerCaller:
        """A caller (on this one's event loop) for another connection: another principal."""
        return HandlerCaller(self.services, session, self._loop)


@pytest.fixture
def handlers(services: BrokerServices) -> Iterator[HandlerCaller]:
    caller = HandlerCaller(services)
    yield caller
    caller.close()


@dataclasses.dataclass
class StaticClusterView:
    """A cluster view answering from fixed data, as a view backed by ZooKeeper answers from the
    znodes it watches (for handlers facing more than one broker)."""

    node_id: int
    cluster_id: str
    brokers: Sequence[BrokerEndpoint]
    controller: int
    states: dict[tuple[str, int], PartitionInfo]
    coordinators: dict[str, BrokerEndpoint] = dataclasses.field(default_factory=dict)

    def controller_id(self) -> int:
        return self.controller

    def live_brokers(self) -> Sequence[BrokerEndpoint]:
        return self.brokers

    def partition_info(self, topic: str, index: int) -> PartitionInfo | None:
        return self.states.get((topic, index))

    def group_coordinator(self, group_id: str) -> BrokerEndpoint | None:
        return self.coordinators.get(group_id)
