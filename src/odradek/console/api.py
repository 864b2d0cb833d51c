"""The web console's JSON API: a Kafka cluster seen and changed through odradek's own client.

Every answer comes from the cluster over the Kafka protocol (Metadata, DescribeConfigs,
DescribeLogDirs, ListOffsets, Fetch, DescribeGroups, OffsetFetch, …), asked as the console's own
principal, so what the console may see and do is what the cluster's ACLs allow that principal;
a refusal comes back as 403 with Kafka's error name. The same backend serves the console inside
a broker (connected to the broker's own listener) and ``odradek console`` against any
Kafka-compatible cluster. The logic of each change is the admin client's, shared with the CLI.

Routes (JSON in and out; errors are ``{"error": message}``)::

    GET    /api/cluster                    brokers, controller, counts
    GET    /api/brokers/B/configs          a broker's configs
    GET    /api/topics                     every topic: partitions, replication, size
    POST   /api/topics                     {name, partitions, replication_factor, configs}
    GET    /api/topics/T                   partitions (leaders, replicas, ISR, offsets, sizes),
                                           configs
    DELETE /api/topics/T
    POST   /api/topics/T/configs           {set: {name: value}, delete: [name]}
    GET    /api/topics/T/records           ?partition=P&offset=O|timestamp=MS&limit=N
    POST   /api/topics/T/delete-records    {partition, before}
    GET    /api/groups                     every group: state, protocol type
    GET    /api/groups/G                   members, assignments, committed offsets, lag
    POST   /api/groups/G/reset-offsets     {to: earliest|latest|offset|timestamp|shift, value,
                                           topic (optional), dry_run (optional)}
    GET    /api/offsets                    a sample for the live rates: per topic the sum of
                                           its end offsets, per group of its committed ones
    GET    /api/clients                    what clients pushed to the broker serving the console
                                           (KIP-714): per client instance its client id,
                                           principal and metrics; [] for ``odradek console``
    GET    /api/schemas/...                the schema registry of the broker serving the
                                           console, or ``odradek console --schema-registry``'s
                                           (odradek.console.schemas); 404 where there is none
    GET    /api/tables                     the Iceberg translation of the partitions the broker
                                           serving the console leads (iceberg.mode): lag in
                                           records and seconds; [] for ``odradek console``

Threads: :meth:`ConsoleApi.handle` is called on the HTTP server's blocking threads (one per
request in progress).
The admin clients are asyncio clients: they live on an event loop of the console's own, in a
thread of its own (never the broker's loop), and requests hand coroutines to it. The record
browser's blocking data client is shared under a lock.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

from odradek.client.admin import (
    BROKER_RESOURCE,
    LATEST,
    RESET_TARGETS,
    TOPIC_RESOURCE,
    AdminClient,
    ClusterAdmin,
    GroupAdmin,
)
from odradek.client.core import ClientError, ConnectionFailed, RequestTimeout
from odradek.client.data import DataClient
from odradek.client.data import TopicPartition as DataPartition
from odradek.protocol.records import iter_records
from odradek.security.client_settings import ClientSecurity

if TYPE_CHECKING:
    from odradek.console.schemas import SchemaView

log = logging.getLogger(__name__)

T = TypeVar("T")
A = TypeVar("A", bound=AdminClient)

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_MAX_RECORDS = 1000
_DEFAULT_RECORDS = 50
_CALL_TIMEOUT_S = 60.0


class ApiError(Exception):
    """An answer other than 200: the HTTP status and a message for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# Kafka's errors that say "not now" rather than "no": a retry may well succeed.
_RETRIABLE = (
    "not_coordinator",
    "coordinator_not_available",
    "coordinator_load_in_progress",
    "not_controller",
    "leader_not_available",
    "not_leader_or_follower",
    "request_timed_out",
)
_NOT_FOUND = ("unknown_topic_or_partition", "group_id_not_found")


def _status_of(error: ClientError) -> int:
    """403 for an ACL refusal, 503 when the cluster cannot be reached or answers with an error
    that a retry may cure (no coordinator or leader now), 504 when it did not answer in time,
    404 for a topic or group that does not exist, 400 when the cluster calls the request
    invalid (a config value, a partition count), 409 for any other refusal (the topic exists,
    the group has members, …)."""
    if isinstance(error, ConnectionFailed):
        return 503
    if isinstance(error, RequestTimeout):
        return 504
    text = str(error).lower()
    if "authorization_failed" in text:
        return 403
    if any(name in text for name in _NOT_FOUND):
        return 404
    if any(name in text for name in _RETRIABLE):
        return 503
    if "invalid_" in text or "policy_violation" in text:
        return 400
    return 409


def _int(value: object, what: str, minimum: int | None = None) -> int:
    if isinstance(value, bool):
        raise ApiError(400, f"{what} must be an integer, not {json.dumps(value)}")
    try:
        number = int(str(value))
    except (TypeError, ValueError):
        raise ApiError(400, f"{what} must be an integer, not {json.dumps(value)}") from None
    if minimum is not None and number < minimum:
        raise ApiError(400, f"{what} must be at least {minimum}, not {number}")
    return number


def _topic_name(raw: str) -> str:
    name = unquote(raw)
    if not _LEGAL_TOPIC.fullmatch(name) or name in (".", ".."):
        raise ApiError(400, f"{name!r} is not a topic name (1 to 249 of a-z A-Z 0-9 . _ -)")
    return name


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


class ConsoleApi:
    """The API of one cluster (see the module doc). :meth:`start` before use, :meth:`close`
    after; both from any thread but the console's own."""

    def __init__(
        self,
        bootstrap: str,
        security: ClientSecurity | None = None,
        *,
        timeout_s: float = 15.0,
        clock: Callable[[], float] = time.time,
        call_timeout_s: float = _CALL_TIMEOUT_S,
        tables: Callable[[], list[dict[str, Any]]] | None = None,
        clients: Callable[[], list[dict[str, Any]]] | None = None,
        schemas: Callable[[], SchemaView | None] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        # The hosting broker's schema registry, when it serves one (asked per request: the
        # registry starts after the console).
        self._schemas = schemas
        # The hosting broker's table translation figures (not a Kafka API: the broker's own).
        self._tables = tables
        self._clients = clients
        # How long a request of the page waits for its answer from the console's loop.
        self.call_timeout_s = call_timeout_s
        self._security = security
        self._timeout_s = timeout_s
        self._clock = clock
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="odradek-console", daemon=True
        )
        self._admins: dict[type[AdminClient], AdminClient] = {}
        self._connecting: asyncio.Lock | None = None
        self._data: DataClient | None = None
        self._data_lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):  # a connection that fails to close is gone anyway
            self._call(self._close_admins)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if self._thread.is_alive():
            # A call still running on the loop: closing it under that call would raise; the
            # daemon thread ends with the process.
            log.warning("the console's client loop did not stop within 10 s")
            return
        self._loop.close()
        with self._data_lock:
            if self._data is not None:
                self._data.close()
                self._data = None

    # -- the console's loop --------------------------------------------------------------------

    def _call(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        future = asyncio.run_coroutine_threadsafe(make(), self._loop)
        try:
            return future.result(self.call_timeout_s)
        except concurrent.futures.TimeoutError:
            # Given up here, so given up there too: it would hold the admin client's
            # connection lock (and pile up on the console's loop) for nobody.
            future.cancel()
            raise ApiError(
                504, f"the cluster did not answer within {self.call_timeout_s:g} s"
            ) from None

    async def _close_admins(self) -> None:
        admins, self._admins = list(self._admins.values()), {}
        for admin in admins:
            await admin.close()

    async def _admin(self, kind: type[A]) -> A:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            admin = self._admins.get(kind)
            if admin is None:
                admin = await kind.connect(
                    self.bootstrap,
                    client_id="odradek-console",
                    timeout_s=self._timeout_s,
                    security=self._security,
                )
                self._admins[kind] = admin
        assert isinstance(admin, kind)
        return admin

    def _with(
        self, kind: type[A], work: Callable[[A], Coroutine[Any, Any, T]], *, change: bool = False
    ) -> T:
        """``work`` with a connected admin client, on the console's loop. A broken connection
        is dropped, so the next request connects afresh (a broker restarted); a read is tried
        once more at once, a ``change`` is not (it may have been done before the break)."""

        async def run() -> T:
            for attempt in range(1 if change else 2):
                admin = await self._admin(kind)
                try:
                    return await work(admin)
                except ConnectionFailed:
                    if self._admins.get(kind) is admin:
                        del self._admins[kind]
                    await admin.close()
                    if change or attempt:
                        raise
            raise AssertionError("unreachable")

        return self._call(run)

    # -- dispatch ------------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: Mapping[str, str], body: bytes) -> Any:
        """The JSON answer to a request for ``/api/...``; raises :class:`ApiError`."""
        parts = [p for p in path.split("/") if p][1:]  # without "api"
        try:
            return self._route(method, parts, query, body)
        except ClientError as e:
            raise ApiError(_status_of(e), str(e)) from e

    def _route(self, method: str, parts: list[str], query: Mapping[str, str], body: bytes) -> Any:
        routes: dict[tuple[str, ...], Callable[[], Any]] = {}
        match parts:
            case ["cluster"]:
                routes[("GET",)] = self.cluster
            case ["topics"]:
                routes[("GET",)] = self.topics
                routes[("POST",)] = lambda: self.create_topic(_json_body(body))
            case ["topics", name]:
                routes[("GET",)] = lambda: self.topic(_topic_name(name))
                routes[("DELETE",)] = lambda: self.delete_topic(_topic_name(name))
            case ["topics", name, "configs"]:
                routes[("POST",)] = lambda: self.alter_topic_configs(
                    _topic_name(name), _json_body(body)
                )
            case ["topics", name, "records"]:
                routes[("GET",)] = lambda: self.records(_topic_name(name), query)
            case ["topics", name, "delete-records"]:
                routes[("POST",)] = lambda: self.delete_records(_topic_name(name), _json_body(body))
            case ["groups"]:
                routes[("GET",)] = self.groups
            case ["groups", group]:
                routes[("GET",)] = lambda: self.group(unquote(group))
            case ["groups", group, "reset-offsets"]:
                routes[("POST",)] = lambda: self.reset_offsets(unquote(group), _json_body(body))
            case ["offsets"]:
                routes[("GET",)] = self.offsets
            case ["tables"]:
                routes[("GET",)] = lambda: self._tables() if self._tables is not None else []
            case ["clients"]:
                routes[("GET",)] = lambda: self._clients() if self._clients is not None else []
            case ["schemas", *rest]:
                view = self._schemas() if self._schemas is not None else None
                if view is None:
                    raise ApiError(404, "no schema registry is served beside this console")
                return view.route(method, rest, query)
            case ["brokers", broker, "configs"]:
                routes[("GET",)] = lambda: self.broker_configs(_int(broker, "broker id", 0))
            case _:
                raise ApiError(404, f"no such API: /api/{'/'.join(parts)}")
        route = routes.get((method,))
        if route is None:
            allowed = ", ".join(m for (m,) in routes)
            raise ApiError(405, f"{method} is not allowed here (only {allowed})")
        return route()

    # -- reading -------------------------------------------------------------------------------

    def cluster(self) -> dict[str, Any]:
        async def work(admin: ClusterAdmin) -> dict[str, Any]:
            described = await admin.describe_cluster(with_min_isr=False)
            partitions = described.partitions()
            return {
                "bootstrap": self.bootstrap,
                "cluster_id": described.cluster_id,
                "controller": described.controller_id,
                "brokers": [
                    {"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in described.brokers
                ],
                "topics": len(described.topics),
                "partitions": len(partitions),
                "under_replicated": sum(p.is_under_replicated for p in partitions),
                "offline": sum(p.is_offline for p in partitions),
                "leaders": {
                    str(b.node_id): sum(p.leader == b.node_id for p in partitions)
                    for b in described.brokers
                },
            }

        return self._with(ClusterAdmin, work)

    def broker_configs(self, broker_id: int) -> list[dict[str, Any]]:
        async def work(admin: ClusterAdmin) -> list[dict[str, Any]]:
            return _configs(await admin.describe_configs(BROKER_RESOURCE, str(broker_id)))

        return self._with(ClusterAdmin, work)

    def topics(self) -> list[dict[str, Any]]:
        async def work(admin: ClusterAdmin) -> list[dict[str, Any]]:
            described = await admin.describe_cluster(with_min_isr=False)
            sizes = await admin.replica_sizes(described.brokers)
            return [
                {
                    "name": t.name,
                    "internal": t.internal,
                    "error": t.error,
                    "partitions": len(t.partitions),
                    "replication_factor": t.replication_factor,
                    "under_replicated": sum(p.is_under_replicated for p in t.partitions),
                    "offline": sum(p.is_offline for p in t.partitions),
                    "size": sum(sizes.get((t.name, p.partition), 0) for p in t.partitions),
                }
                for t in described.topics
            ]

        return self._with(ClusterAdmin, work)

    def topic(self, name: str) -> dict[str, Any]:
        async def work(admin: ClusterAdmin) -> dict[str, Any]:
            described = await admin.describe_cluster([name])
            (topic,) = described.topics
            if topic.error:
                status = 403 if "authorization" in topic.error else 404
                raise ApiError(status, f"topic {name!r}: {topic.error}")
            offsets = await admin.log_offsets((name, p.partition) for p in topic.partitions)
            sizes = await admin.replica_sizes(described.brokers)
            configs_error = None
            try:
                configs = _configs(await admin.describe_configs(TOPIC_RESOURCE, name))
            except ConnectionFailed:
                raise
            except ClientError as e:  # no DescribeConfigs right: the partitions still show
                configs, configs_error = [], str(e)
            return {
                "name": name,
                "internal": topic.internal,
                "partitions": [
                    {
                        "partition": p.partition,
                        "leader": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replicas": list(p.replicas),
                        "isr": list(p.isr),
                        "offline": list(p.offline),
                        "start_offset": offsets.get((name, p.partition), (None, None))[0],
                        "end_offset": offsets.get((name, p.partition), (None, None))[1],
                        "size": sizes.get((name, p.partition)),
                    }
                    for p in topic.partitions
                ],
                "configs": configs,
                "configs_error": configs_error,
            }

        return self._with(ClusterAdmin, work)

    def groups(self) -> list[dict[str, Any]]:
        async def work(admin: GroupAdmin) -> list[dict[str, Any]]:
            return [
                {"group_id": g.group_id, "state": g.state, "protocol_type": g.protocol_type}
                for g in await admin.list_groups()
            ]

        return self._with(GroupAdmin, work)

    def group(self, group_id: str) -> dict[str, Any]:
        if not group_id:
            raise ApiError(400, "a group id is needed")

        async def work(admin: GroupAdmin) -> dict[str, Any]:
            g = await admin.describe_group(group_id)
            if not g.exists:
                raise ApiError(404, f"consumer group {group_id!r} does not exist")
            return {
                "group_id": g.group_id,
                "state": g.state,
                "protocol_type": g.protocol_type,
                "protocol": g.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "host": m.host,
                        "assignment": [list(tp) for tp in m.assignment],
                    }
                    for m in g.members
                ],
                "partitions": [
                    {
                        "topic": p.topic,
                        "partition": p.partition,
                        "committed": p.committed,
                        "end_offset": p.end_offset,
                        "lag": p.lag,
                        "member_id": p.member.member_id if p.member else None,
                    }
                    for p in g.partitions
                ],
            }

        return self._with(GroupAdmin, work)

    def offsets(self) -> dict[str, Any]:
        """One sample for the live rates (see the module doc)."""

        async def topic_ends(admin: ClusterAdmin) -> dict[str, int]:
            described = await admin.describe_cluster(with_min_isr=False)
            partitions = [
                (t.name, p.partition)
                for t in described.topics
                if not t.internal
                for p in t.partitions
            ]
            sums = dict.fromkeys((t.name for t in described.topics if not t.internal), 0)
            for (topic, _), end in (await admin.list_offsets(partitions, LATEST)).items():
                sums[topic] += end
            return sums

        async def group_sums(admin: GroupAdmin) -> dict[str, int]:
            # Every group's requests at once: pipelined on the coordinators' connections, so a
            # sample costs a couple of round trips however many groups there are.
            ids = [g.group_id for g in await admin.list_groups()]
            found = await asyncio.gather(
                *(admin.committed(group_id) for group_id in ids), return_exceptions=True
            )
            sums: dict[str, int] = {}
            for group_id, committed in zip(ids, found, strict=True):
                if isinstance(committed, ConnectionFailed):
                    raise committed
                if isinstance(committed, ClientError):
                    continue  # a group this principal may not describe: no rate
                if isinstance(committed, BaseException):
                    raise committed
                sums[group_id] = sum(committed.values())
            return sums

        topics = self._with(ClusterAdmin, topic_ends)
        groups = self._with(GroupAdmin, group_sums)
        return {"time_ms": int(self._clock() * 1000), "topics": topics, "groups": groups}

    def records(self, topic: str, query: Mapping[str, str]) -> dict[str, Any]:
        """Up to ``limit`` records of one partition from ``offset`` or ``timestamp`` (the last
        ``limit`` when neither is given), key, value and header values in base64."""
        unknown = set(query) - {"partition", "offset", "timestamp", "limit"}
        if unknown:
            raise ApiError(400, f"unknown parameter(s): {', '.join(sorted(unknown))}")
        partition = _int(query.get("partition", "0"), "partition", 0)
        limit = _int(query.get("limit", str(_DEFAULT_RECORDS)), "limit", 1)
        if limit > _MAX_RECORDS:
            raise ApiError(400, f"limit must be at most {_MAX_RECORDS}, not {limit}")
        if "offset" in query and "timestamp" in query:
            raise ApiError(400, "give offset or timestamp, not both")
        offset = _int(query["offset"], "offset", 0) if "offset" in query else None
        timestamp = _int(query["timestamp"], "timestamp", 0) if "timestamp" in query else None
        with self._data_lock:
            if self._data is None:
                self._data = DataClient(
                    self.bootstrap,
                    client_id="odradek-console",
                    timeout_s=self._timeout_s,
                    security=self._security,
                )
            try:
                return _read_records(self._data, topic, partition, offset, timestamp, limit)
            except ConnectionFailed:
                self._data.close()
                self._data = None
                raise

    # -- changes -------------------------------------------------------------------------------

    def create_topic(self, body: dict[str, Any]) -> dict[str, Any]:
        _only(body, {"name", "partitions", "replication_factor", "configs"})
        name = _topic_name(str(body.get("name", "")))
        partitions = _int(body.get("partitions", -1), "partitions", -1)
        factor = _int(body.get("replication_factor", -1), "replication_factor", -1)
        if partitions == 0 or factor == 0:
            raise ApiError(400, "partitions and replication_factor are -1 (the default) or >= 1")
        configs = _string_map(body.get("configs", {}), "configs")

        async def work(admin: ClusterAdmin) -> dict[str, Any]:
            await admin.create_topic(name, partitions, factor, configs)
            return {"created": name}

        return self._with(ClusterAdmin, work, change=True)

    def delete_topic(self, name: str) -> dict[str, Any]:
        async def work(admin: ClusterAdmin) -> dict[str, Any]:
            await admin.delete_topics([name])
            return {"deleted": name}

        return self._with(ClusterAdmin, work, change=True)

    def alter_topic_configs(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        _only(body, {"set", "delete"})
        set_values = _string_map(body.get("set", {}), "set")
        delete = body.get("delete", [])
        if not isinstance(delete, list) or not all(isinstance(k, str) for k in delete):
            raise ApiError(400, "delete must be a list of config names")
        if not set_values and not delete:
            raise ApiError(400, "nothing to change: give set and/or delete")

        async def work(admin: ClusterAdmin) -> dict[str, Any]:
            await admin.alter_configs(TOPIC_RESOURCE, name, set_values, delete)
            return {"altered": name, "set": set_values, "deleted": delete}

        return self._with(ClusterAdmin, work, change=True)

    def delete_records(self, topic: str, body: dict[str, Any]) -> dict[str, Any]:
        _only(body, {"partition", "before"})
        if "partition" not in body or "before" not in body:
            raise ApiError(400, "partition and before are needed")
        partition = _int(body["partition"], "partition", 0)
        before = _int(body["before"], "before", -1)

        async def work(admin: ClusterAdmin) -> dict[str, Any]:
            start = await admin.delete_records(topic, partition, before)
            return {"topic": topic, "partition": partition, "log_start_offset": start}

        return self._with(ClusterAdmin, work, change=True)

    def reset_offsets(self, group_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Move the group's committed offsets (all its partitions, or one topic's) as
        ``odradek groups reset-offsets`` does; ``dry_run`` only answers the plan."""
        _only(body, {"to", "value", "topic", "dry_run"})
        to = body.get("to")
        if to not in RESET_TARGETS:
            raise ApiError(400, f"to must be one of {', '.join(RESET_TARGETS)}, not {to!r}")
        needs_value = to in ("offset", "timestamp", "shift")
        if needs_value and "value" not in body:
            raise ApiError(400, f"a reset to {to} needs a value")
        value = _int(body.get("value", 0), "value", 0 if to != "shift" else None)
        topic = body.get("topic") or None
        if topic is not None:
            topic = _topic_name(str(topic))
        dry_run = bool(body.get("dry_run", False))

        async def work(admin: GroupAdmin) -> dict[str, Any]:
            committed = await admin.committed(group_id)
            partitions = sorted(tp for tp in committed if topic is None or tp[0] == topic)
            if not partitions:
                what = f"topic {topic!r}" if topic else "any topic"
                raise ApiError(400, f"group {group_id!r} has no committed offsets for {what}")
            plan = await admin.reset_plan(group_id, partitions, to, value, committed)
            if not dry_run:
                await admin.reset_offsets(group_id, plan)
            return {
                "group_id": group_id,
                "dry_run": dry_run,
                "offsets": [
                    {"topic": t, "partition": p, "offset": o, "was": committed.get((t, p))}
                    for (t, p), o in sorted(plan.items())
                ],
            }

        return self._with(GroupAdmin, work, change=not dry_run)


def _read_records(
    client: DataClient,
    topic: str,
    partition: int,
    offset: int | None,
    timestamp: int | None,
    limit: int,
) -> dict[str, Any]:
    info = client.describe([topic]).get(topic)
    if info is None:
        raise ApiError(404, f"topic {topic!r} does not exist (or may not be described)")
    if partition >= info.partitions:
        raise ApiError(400, f"topic {topic!r} has no partition {partition}")
    tp = DataPartition(topic, partition)
    start = client.earliest([tp])[tp]
    end = client.latest([tp])[tp]
    if timestamp is not None:
        found = client.list_offsets([tp], timestamp)[tp]
        position = end if found < 0 else found
    elif offset is not None:
        position = max(offset, start)
    else:
        position = max(start, end - limit)
    records: list[dict[str, Any]] = []
    while position < end and len(records) < limit:
        fetched = client.fetch(tp, position)
        for header, batch in iter_records(fetched.records):
            if header.is_control:
                continue
            for record in batch:
                if record.offset < position or len(records) >= limit:
                    continue
                records.append(
                    {
                        "offset": record.offset,
                        "timestamp": record.timestamp,
                        "key": _b64(record.key),
                        "value": _b64(record.value),
                        "headers": [{"key": h.key, "value": _b64(h.value)} for h in record.headers],
                    }
                )
        if fetched.next_offset <= position:
            break  # nothing whole came back (a batch larger than the fetch): stop, not spin
        position = fetched.next_offset
    return {
        "topic": topic,
        "partition": partition,
        "start_offset": start,
        "end_offset": end,
        "records": records,
    }


def _configs(configs: list[tuple[str, str | None, str, bool]]) -> list[dict[str, Any]]:
    return [
        {"name": name, "value": value, "source": source, "read_only": read_only}
        for name, value, source, read_only in configs
    ]


def _json_body(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body or b"{}")
    except ValueError as e:
        raise ApiError(400, f"the request body is not JSON: {e}") from None
    if not isinstance(parsed, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return parsed


def _only(body: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = set(body) - allowed
    if unknown:
        raise ApiError(
            400,
            f"unknown field(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(allowed))})",
        )


def _string_map(value: object, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ApiError(400, f"{what} must be an object of names to string values")
    return dict(value)
