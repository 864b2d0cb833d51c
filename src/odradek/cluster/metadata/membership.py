"""Cluster membership in ZooKeeper: broker registration and controller election, as Kafka does.

Znodes (Kafka's JSON)::

    /brokers/ids/<id>   ephemeral  {"features":{},"listener_security_protocol_map":{"PLAINTEXT":
                                    "PLAINTEXT"},"endpoints":["PLAINTEXT://host:9092"],"rack":"r1",
                                    "jmx_port":-1,"host":"host","port":9092,"timestamp":"<ms>",
                                    "version":5}   ("rack" only when broker.rack is set, as Kafka)
    /controller         ephemeral  {"version":1,"brokerid":1,"timestamp":"<ms>"}
    /controller_epoch   persistent "<epoch>" (a number as text)

A broker registers its id at start; an id already registered by another live session is refused
(:class:`DuplicateBrokerIdError`), and the broker must not start. Every broker runs for controller
at start and whenever ``/controller`` disappears: the winner creates ``/controller`` and bumps
``/controller_epoch`` in one multi-op, the epoch by compare-and-set on its znode version, so each
controller term has an epoch no other term had.

Crashes: the ephemeral znodes go with the session (at once on a clean close, after the session
timeout on a crash). When a session expires while the broker lives, kazoo opens a new one and
:class:`BrokerMembership` registers again and runs for controller again.

Threads: :meth:`BrokerMembership.start` registers and runs for controller, ZooKeeper round
trips: the broker calls it off its event loop (``asyncio.to_thread``); :meth:`close` only sets a
flag. Watches and re-registration run on kazoo's threads, keep their state under a lock, and tell
the loop of each change with ``call_soon_threadsafe`` (a :class:`MembershipChange` value); nothing
here runs on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from odradek.clock import Clock, SystemClock
from odradek.cluster.metadata.store import MetadataStoreError
from odradek.cluster.metadata.zookeeper import (
    BROKER_IDS_PATH,
    CONTROLLER_EPOCH_PATH,
    ZooKeeperSession,
)

log = logging.getLogger(__name__)

__all__ = ["BROKER_IDS_PATH", "BrokerMembership", "BrokerRegistration", "MembershipChange"]
CONTROLLER_PATH = "/controller"
REGISTRATION_VERSION = 5


class DuplicateBrokerIdError(MetadataStoreError):
    """Another live broker is registered under this ``broker.id``."""


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """What a broker tells the cluster about itself (``/brokers/ids/<id>``)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    jmx_port: int = -1
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # The broker's other listeners, (name, security protocol, host, port); the one above is the
    # inter-broker listener, written first.
    other_endpoints: tuple[tuple[str, str, str, int], ...] = ()

    def to_json(self, timestamp_ms: int) -> bytes:
        plaintext = self.security_protocol == "PLAINTEXT"
        protocols = {self.listener_name: self.security_protocol}
        endpoints = [f"{self.listener_name}://{self.host}:{self.port}"]
        for name, protocol, host, port in self.other_endpoints:
            protocols[name] = protocol
            endpoints.append(f"{name}://{host}:{port}")
        info: dict[str, object] = {
            "features": {k: dict(v) for k, v in self.features.items()},
            "listener_security_protocol_map": protocols,
            "endpoints": endpoints,
            "jmx_port": self.jmx_port,
            # Kafka's top-level host and port are its first PLAINTEXT endpoint's, for old
            # clients; without one, null and -1.
            "host": self.host if plaintext else None,
            "port": self.port if plaintext else -1,
            "timestamp": str(timestamp_ms),
            "version": REGISTRATION_VERSION,
        }
        if self.rack is not None:
            info["rack"] = self.rack
        return json.dumps(info, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        info = json.loads(data)
        protocols: dict[str, str] = info.get("listener_security_protocol_map") or {}
        parsed = []
        for endpoint in info["endpoints"]:
            name, _, address = endpoint.partition("://")
            host, _, port = address.rpartition(":")
            parsed.append((name, protocols.get(name, name), host.strip("[]"), int(port)))
        listener, _, host, port = parsed[0]
        return cls(
            broker_id,
            host,
            port,
            info.get("rack"),
            listener,
            protocols.get(listener, listener),
            int(info.get("jmx_port", -1)),
            info.get("features") or {},
            tuple(parsed[1:]),
        )


@dataclass(frozen=True, slots=True)
class MembershipChange:
    """The cluster as one broker sees it after a change: who is controller (None: nobody yet),
    with which epoch, and which brokers are registered."""

    controller_id: int | None
    controller_epoch: int
    brokers: frozenset[int]


class BrokerMembership:
    """One broker's registration and its part in controller elections (see the module doc)."""

    def __init__(
        self,
        session: ZooKeeperSession,
        registration: BrokerRegistration,
        clock: Clock | None = None,
    ) -> None:
        self.session = session
        self.zk = session.client
        self.registration = registration
        self.clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._controller_id: int | None = None
        self._controller_epoch = 0
        self._broker_epoch = -1
        self._brokers: frozenset[int] = frozenset()
        self._closed = False
        self._listener: tuple[asyncio.AbstractEventLoop, Callable[[MembershipChange], None]] | None
        self._listener = None

    @property
    def broker_id(self) -> int:
        return self.registration.broker_id

    def start(
        self,
        loop: asyncio.AbstractEventLoop | None = None,
        listener: Callable[[MembershipChange], None] | None = None,
    ) -> None:
        """Register (or raise :class:`DuplicateBrokerIdError`), run for controller, and watch:
        ``listener`` is called on ``loop`` after every change of controller or of brokers."""
        if loop is not None and listener is not None:
            self._listener = (loop, listener)
        self.zk.ensure_path(BROKER_IDS_PATH)
        self._register()
        self.session.on_new_session(self._new_session)
        self._elect()
        ChildrenWatch(self.zk, BROKER_IDS_PATH, self._brokers_changed)
        DataWatch(self.zk, CONTROLLER_PATH, self._controller_changed)

    def _register(self) -> None:
        path = f"{BROKER_IDS_PATH}/{self.broker_id}"
        try:
            self.zk.create(path, self.registration.to_json(self.clock.time_ms()), ephemeral=True)
        except NodeExistsError:
            try:
                _, stat = self.zk.get(path)
                owner = stat.ephemeralOwner
            except NoNodeError:
                owner = None
            if owner == self.session.session_id:
                self._set_broker_epoch(stat.czxid)
                return  # ours already (a retried create)
            raise DuplicateBrokerIdError(
                f"broker.id {self.broker_id} is already registered in ZooKeeper at {path} "
                f"by another live session (0x{owner or 0:x}): another broker runs with this "
                "id; give each broker its own broker.id"
            ) from None
        stat = self.zk.exists(path)
        if stat is not None:
            self._set_broker_epoch(stat.czxid)
        log.info("registered broker %d in ZooKeeper at %s", self.broker_id, path)

    def _set_broker_epoch(self, czxid: int) -> None:
        with self._lock:
            self._broker_epoch = int(czxid)

    @property
    def broker_epoch(self) -> int:
        """The registration znode's creation zxid (Kafka's broker epoch, sent in
        ControlledShutdown v2+); new with every session, -1 before the first registration."""
        with self._lock:
            return self._broker_epoch

    def _new_session(self) -> None:
        """On a kazoo thread, after an expired session was replaced."""
        if self._closed:
            return
        log.warning(
            "ZooKeeper session expired and was re-created (0x%x): registering broker %d again",
            self.session.session_id,
            self.broker_id,
        )
        try:
            self._register()
            self._elect()
        except (DuplicateBrokerIdError, KazooException):
            log.exception("could not register broker %d again", self.broker_id)

    # -- controller election ---------------------------------------------------------------------

    @property
    def controller_id(self) -> int | None:
        with self._lock:
            return self._controller_id

    @property
    def controller_epoch(self) -> int:
        with self._lock:
            return self._controller_epoch

    @property
    def is_controller(self) -> bool:
        return self.controller_id == self.broker_id

    @property
    def brokers(self) -> frozenset[int]:
        with self._lock:
            return self._brokers

    def _elect(self) -> None:
        """Become controller if there is none (on a kazoo thread, or at start)."""
        while not self._closed:
            try:
                data, _ = self.zk.get(CONTROLLER_PATH)
                self._set_controller(json.loads(data)["brokerid"], None)
                return
            except NoNodeError:
                pass
            try:
                raw, epoch_stat = self.zk.get(CONTROLLER_EPOCH_PATH)
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    self.zk.create(CONTROLLER_EPOCH_PATH, b"0")
                continue
            epoch = int(raw) + 1
            tx = self.zk.transaction()
            tx.create(
                CONTROLLER_PATH,
                json.dumps(
                    {
                        "version": 1,
                        "brokerid": self.broker_id,
                        "timestamp": str(self.clock.time_ms()),
                    },
                    separators=(",", ":"),
                ).encode(),
                ephemeral=True,
            )
            tx.set_data(CONTROLLER_EPOCH_PATH, str(epoch).encode(), version=epoch_stat.version)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
                self._set_controller(self.broker_id, epoch)
                return
            if any(isinstance(r, (NodeExistsError, BadVersionError)) for r in results):
                continue  # another broker won (read who) or the epoch moved (try again)
            raise MetadataStoreError(f"controller election failed: {results}")

    def _set_controller(self, controller_id: int | None, epoch: int | None) -> None:
        if epoch is None:
            try:
                epoch = int(self.zk.get(CONTROLLER_EPOCH_PATH)[0])
            except NoNodeError:
                epoch = 0
        with self._lock:
            changed = (controller_id, epoch) != (self._controller_id, self._controller_epoch)
            self._controller_id = controller_id
            self._controller_epoch = epoch
        if changed:
            self._notify()

    def _controller_changed(self, data: bytes | None, stat: Any) -> bool | None:
        if self._closed:
            return False
        # Reading the epoch or running for controller makes ZooKeeper calls: not on kazoo's
        # callback thread.
        self.zk.handler.spawn(self._elect_in_background)
        return None

    def _elect_in_background(self) -> None:
        try:
            self._elect()
        except KazooException as e:
            # The session is gone or going: the next session elects again (_new_session).
            log.info("controller election interrupted: %r", e)

    def _brokers_changed(self, children: list[str]) -> bool | None:
        if self._closed:
            return False
        with self._lock:
            self._brokers = frozenset(int(c) for c in children)
        self._notify()
        return None

    def _notify(self) -> None:
        if self._listener is None:
            return
        loop, listener = self._listener
        with self._lock:
            change = MembershipChange(self._controller_id, self._controller_epoch, self._brokers)
        if not loop.is_closed():
            loop.call_soon_threadsafe(listener, change)

    def close(self) -> None:
        """Stop watching. Closing the session removes the registration (and ``/controller`` if
        this broker held it); the session's owner does that."""
        self._closed = True
