"""The broker's Prometheus endpoint: ``metrics.listener=HOST:PORT`` serves ``/metrics``.

The figures are Kafka's, under the names the Prometheus JMX exporter gives Kafka's MBeans with
the usual rules (those of Strimzi's and Confluent's examples: ``kafka_<domain>_<type>_<name>``,
lower case, ``_total`` on counters), so that queries and dashboards written for Kafka read them.
Where Kafka has a Yammer timer in milliseconds (percentiles only), odradek has a Prometheus
histogram in seconds under the same stem. Consumer lag has no broker MBean in Kafka; it uses the
names of the common exporter (kafka_exporter).

Prometheus name ← Kafka MBean (``kafka.<domain>:type=<type>,name=<name>``); ``…`` repeats the
prefix of the line above::

    kafka_server_brokertopicmetrics_bytesin_total{topic}     ← server:BrokerTopicMetrics,BytesIn…
      …_messagesin_total{topic}, …_bytesout_total{topic}     ← MessagesInPerSec, BytesOutPerSec
      …_totalproducerequests_total{topic}                    ← TotalProduceRequestsPerSec
      …_failedproducerequests_total{topic}                   ← FailedProduceRequestsPerSec
      …_totalfetchrequests_total{topic}                      ← TotalFetchRequestsPerSec
      …_failedfetchrequests_total{topic}                     ← FailedFetchRequestsPerSec
      …_replicationbytesout_total                            ← ReplicationBytesOutPerSec
    kafka_network_requestmetrics_requests_total{request}     ← network:RequestMetrics,RequestsPerSec
                           (a Fetch counts under request="Fetch" and again under "FetchConsumer"
                            or "FetchFollower", here and in the times below, as in Kafka)
      …_errors_total{request,error}                          ← ErrorsPerSec
      …_totaltime_seconds{request} (histogram)               ← TotalTimeMs
      …_requestqueuetime_seconds{request} (histogram)        ← RequestQueueTimeMs
      …_localtime_seconds{request} (histogram)               ← LocalTimeMs
      …_remotetime_seconds{request} (histogram)              ← RemoteTimeMs
      …_responsesendtime_seconds{request} (histogram)        ← ResponseSendTimeMs
    kafka_server_delayedoperationpurgatory_purgatorysize     ← server:DelayedOperationPurgatory
    kafka_server_replicamanager_underreplicatedpartitions    ← server:ReplicaManager,…
      …_underminisrpartitioncount, …_atminisrpartitioncount  ← UnderMinIsr/AtMinIsrPartitionCount
      …_partitioncount, …_leadercount                        ← PartitionCount, LeaderCount
      …_isrshrinks_total, …_isrexpands_total                 ← IsrShrinksPerSec, IsrExpandsPerSec
    kafka_server_fetchsessioncache_numincrementalfetchsessions ← server:FetchSessionCache,…
      …_numincrementalfetchpartitionscached                  ← NumIncrementalFetchPartitionsCached
      …_incrementalfetchsessionevictions_total               ← IncrementalFetchSessionEvictions…
    kafka_cluster_partition_underreplicated{topic,partition} ← cluster:Partition,UnderReplicated
    kafka_controller_kafkacontroller_offlinepartitionscount  ← controller:KafkaController,…
      …_activecontrollercount                                ← ActiveControllerCount
    kafka_log_log_size{topic,partition}                      ← log:Log,Size
      …_numlogsegments, …_logstartoffset, …_logendoffset     ← NumLogSegments, LogStart/EndOffset
    kafka_log_logflushstats_logflush_seconds (histogram)     ← log:LogFlushStats,LogFlushRate…
    kafka_log_logmanager_offlinelogdirectorycount            ← log:LogManager,OfflineLogDirectory…
      …_logdirectoryoffline{logdirectory} (1: offline)       ← LogDirectoryOffline
    kafka_log_logcleaner_cleaner_recopy_percent              ← log:LogCleaner,cleaner-recopy-…
      …_max_clean_time_secs                                  ← max-clean-time-secs
    kafka_log_logcleanermanager_max_dirty_percent            ← log:LogCleanerManager,max-dirty-…
      …_time_since_last_run_ms                               ← time-since-last-run-ms
      …_uncleanable_partitions_count                         ← uncleanable-partitions-count
    odradek_log_cleaner_passes_total                         ← (odradek's own: Kafka has none)
    odradek_iceberg_translation_lag_records{topic,partition} ← (odradek's own: iceberg.mode)
      …_lag_seconds, odradek_iceberg_translated_records_total, …_dead_letter_records_total,
      …_translation_errors_total (each {topic,partition}, partitions translated here)
    odradek_schema_registry_*                                ← (odradek's own: the schema
                                                               registry, odradek.registry.metrics)
    kafka_server_socket_server_metrics_connection_count{listener}  ← server:socket-server-metrics
      …_connection_creation_total, …_connection_close_total  ← connection-creation/close-total
    kafka_coordinator_group_groupmetadatamanager_numgroups   ← coordinator.group:GroupMetadataMan…
      …_numgroupsstable, …preparingrebalance, …completingrebalance, …empty, …dead
    org_apache_kafka_<client metric>{client_instance_id,client_id,principal,<attributes>}
                                                             ← a client's push (KIP-714)
    kafka_consumergroup_lag{consumergroup,topic,partition}   ← (kafka_exporter)
      kafka_consumergroup_current_offset{…}, kafka_consumergroup_members{consumergroup},
      kafka_consumergroup_state{consumergroup,state} (1 for the current state)

Semantics follow Kafka's: per-topic traffic counts clients only (a follower's fetch is replication);
bytes in are the record batches appended; a request counts once handled, and its total time, from
the frame received to the response handed to the socket, is the sum of its queue time (a pipelined
request's wait behind the earlier requests of its connection: Kafka's wait for a handler thread),
local time (handling, less the purgatory), remote time (the wait in the purgatory: acks=all, a Fetch
long-poll, a group commit; 0 for requests that did not wait) and send time (until the socket took
the response); errors count the partitions answered with each error code (Produce and Fetch; NONE is
not counted). Under-replicated and min-ISR counts are of the partitions this broker leads; offline
partitions (no live leader) are counted by the controller only, as in Kafka, so a sum over brokers
is the cluster's. Group metrics come from the group coordinator, for the groups this broker
coordinates; a group's lag is reported for the partitions this broker hosts (their high watermark
minus the committed offset), other partitions report only the committed offset. Connections are
counted per listener name. The cleaner's figures exist while the log cleaner runs
(``log.cleaner.enable``): those of its last pass (bytes written over bytes read, as a percentage;
its seconds) and of its last choice of a log (the dirtiest cleanable log's dirty ratio, as a
percentage; how long ago it looked).

Costs: the hot path bumps plain ints (:mod:`odradek.counters`), and only while metrics are on;
everything computed from state (partitions, logs, groups) is read when Prometheus scrapes.

Threads: the HTTP server of :mod:`odradek.console.server`, on its blocking threads (one per
scrape in progress). Its handler asks the event loop for a :class:`Snapshot` (partitions, logs,
groups and counters are the loop's: reading them from another thread could see a dict change
size mid-iteration), then builds and encodes the metric families in its own thread, so the loop
pays for the copy and not for the text. A scrape while the loop is stuck waits at most
``_SNAPSHOT_TIMEOUT_S`` and fails (500).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from odradek.cluster.metadata.view import NO_NODE
from odradek.config import BrokerConfig
from odradek.console.api import ConsoleApi
from odradek.coordinator.group.group import GroupState
from odradek.counters import (
    SERIES_NAMES,
    BrokerCounters,
    Histogram,
    RequestTimes,
    TopicCounters,
)
from odradek.protocol.errors import ErrorCode
from odradek.security.tls import server_context
from odradek.server.console_client import console_client

if TYPE_CHECKING:
    from odradek.clock import Clock
    from odradek.cluster.node import ClusterNode
    from odradek.cluster.replication.purgatory import Purgatory
    from odradek.cluster.topics import TopicManager
    from odradek.console.server import HttpServer
    from odradek.coordinator.group.runtime import GroupCoordinatorRuntime
    from odradek.iceberg.translator import TableTranslation, TranslatorFigures
    from odradek.registry.http import RegistryServer
    from odradek.server.services import BrokerServices, Session
    from odradek.storage import LogManager
    from odradek.storage.cleaner import LogCleaner
    from odradek.telemetry.clients import ClientTelemetry

log = logging.getLogger(__name__)

# listener.name.metrics.ssl.* set the TLS settings of an https:// metrics.listener (else ssl.*).
TLS_LISTENER_NAME = "metrics"


class Measured(Protocol):
    """What a scrape reads of the broker it measures (the Broker, which this module does not
    import: only the broker's own module knows it)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def node_id(self) -> int: ...
    @property
    def bound(self) -> tuple[str, int]: ...
    @property
    def bound_listeners(self) -> dict[str, tuple[str, int]]: ...
    @property
    def node(self) -> ClusterNode | None: ...
    @property
    def services(self) -> BrokerServices: ...
    @property
    def topics(self) -> TopicManager: ...
    @property
    def groups(self) -> GroupCoordinatorRuntime: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def purgatory(self) -> Purgatory: ...
    @property
    def cleaner(self) -> LogCleaner | None: ...
    @property
    def tables(self) -> TableTranslation | None: ...
    def sessions(self) -> list[Session]: ...


_SNAPSHOT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class PartitionFigures:
    """One hosted partition at the time of a scrape."""

    topic: str
    index: int
    leader: bool
    replicas: int
    isr: int
    min_isr: int
    size: int
    segments: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class GroupFigures:
    """One group this broker coordinates: state, members, and per partition the committed
    offset with the high watermark when the partition is hosted here (else None)."""

    group_id: str
    state: str
    members: int
    offsets: tuple[tuple[str, int, int, int | None], ...]


@dataclass(frozen=True, slots=True)
class CleanerFigures:
    """The log cleaner at the time of a scrape."""

    passes: int
    recopy_percent: int  # of its last pass; 0 before the first
    last_pass_seconds: float
    max_dirty_percent: int
    since_last_run_ms: int  # -1 until it first looked for a log
    uncleanable: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a scrape reports, copied on the event loop."""

    topics: dict[str, TopicCounters]
    requests: list[int]
    times: list[RequestTimes | None]
    errors: dict[tuple[int, int], int]
    replication_bytes_out: int
    connections: dict[str, int]  # per listener name, as the three below
    connections_created: dict[str, int]
    connections_closed: dict[str, int]
    parked: int
    partitions: list[PartitionFigures]
    isr_shrinks: int
    isr_expands: int
    is_controller: bool
    offline_partitions: int
    flush_time: Histogram
    groups: list[GroupFigures]
    cleaner: CleanerFigures | None = None
    # Each log dir, and whether it is offline (KIP-112).
    log_dirs: tuple[tuple[str, bool], ...] = ()
    # What clients pushed (KIP-714): (Prometheus name, labels, value).
    client_metrics: tuple[tuple[str, tuple[tuple[str, str], ...], float], ...] = ()
    # The partitions this broker translates into Iceberg tables (iceberg.mode).
    tables: tuple[TranslatorFigures, ...] = ()
    # Incremental fetch sessions (KIP-227): held, their partitions, evicted so far.
    fetch_sessions: int = 0
    fetch_session_partitions: int = 0
    fetch_session_evictions: int = 0


def take_snapshot(broker: Measured, counters: BrokerCounters) -> Snapshot:
    """Copy what a scrape reports (on the broker's event loop)."""
    topics = broker.topics
    partitions = [
        PartitionFigures(
            p.topic,
            p.index,
            p.is_leader,
            len(p.replicas),
            len(p.isr),
            p.min_insync_replicas,
            p.log.size_bytes(),
            p.log.segment_count(),
            p.log.log_start_offset,
            p.log.log_end_offset,
        )
        for p in topics.partitions.values()
    ]
    view = broker.services.cluster
    is_controller = view.controller_id() == view.node_id
    offline = 0
    if is_controller:
        for metadata in topics.topics():
            for index in range(metadata.partitions):
                info = view.partition_info(metadata.name, index)
                if info is not None and info.leader == NO_NODE:
                    offline += 1
    coordinator = broker.groups.shard
    groups = []
    for group in coordinator.groups.values():
        if not coordinator.is_active(coordinator.partition_for(group.group_id)):
            continue
        offsets = []
        for (topic, index), committed in group.offsets.items():
            hosted = topics.partition(topic, index)
            end = hosted.high_watermark if hosted is not None else None
            offsets.append((topic, index, committed.offset, end))
        groups.append(
            GroupFigures(group.group_id, group.state.value, len(group.members), tuple(offsets))
        )
    requests = counters.requests
    replicas = broker.node.replicas if broker.node is not None else None
    connections = dict.fromkeys(broker.bound_listeners, 0)
    for session in broker.sessions():
        connections[session.listener] = connections.get(session.listener, 0) + 1
    fetch_sessions = broker.services.fetch_sessions
    return Snapshot(
        topics={name: _copy_topic(c) for name, c in counters.topics.items()},
        requests=list(requests.requests),
        times=[t.copy() if t is not None else None for t in requests.times],
        errors=dict(requests.errors),
        replication_bytes_out=counters.replication_bytes_out,
        connections=connections,
        connections_created=dict(counters.connections_created),
        connections_closed=dict(counters.connections_closed),
        parked=broker.purgatory.parked,
        partitions=partitions,
        isr_shrinks=replicas.isr_shrinks if replicas is not None else 0,
        isr_expands=replicas.isr_expands if replicas is not None else 0,
        is_controller=is_controller,
        offline_partitions=offline,
        flush_time=broker.logs.flusher.flush_time.copy(),
        groups=groups,
        cleaner=cleaner_figures(broker.cleaner, broker.clock.time_ms()),
        log_dirs=tuple((str(d), broker.logs.failures.is_offline(d)) for d in broker.logs.log_dirs),
        client_metrics=client_metric_samples(broker.services.telemetry),
        tables=tuple(broker.tables.figures()) if broker.tables is not None else (),
        fetch_sessions=len(fetch_sessions) if fetch_sessions is not None else 0,
        fetch_session_partitions=(
            fetch_sessions.partitions_cached() if fetch_sessions is not None else 0
        ),
        fetch_session_evictions=fetch_sessions.evictions if fetch_sessions is not None else 0,
    )


_NOT_IN_A_NAME = re.compile(r"[^a-zA-Z0-9_]")
_KIND_SUFFIX = {"gauge": "", "sum": "", "histogram_count": "_count", "histogram_sum": "_sum"}


def client_metric_samples(
    telemetry: ClientTelemetry | None,
) -> tuple[tuple[str, tuple[tuple[str, str], ...], float], ...]:
    """The metrics clients pushed, under their names with every character Prometheus does not
    take (the dots) as an underscore, labelled with the client's instance id, client id and
    principal beside the metric's own attributes."""
    if telemetry is None:
        return ()
    samples = []
    for instance in telemetry.instances():
        own = (
            ("client_instance_id", str(instance.instance_id)),
            ("client_id", instance.client.get("client_id", "")),
            ("principal", instance.principal),
        )
        for (name, kind, labels), value in instance.metrics.items():
            prometheus = _NOT_IN_A_NAME.sub("_", name) + _KIND_SUFFIX[kind]
            attributes = tuple((_NOT_IN_A_NAME.sub("_", k), v) for k, v in labels)
            samples.append((prometheus, own + attributes, value))
    return tuple(samples)


def cleaner_figures(cleaner: LogCleaner | None, now_ms: int) -> CleanerFigures | None:
    if cleaner is None:
        return None
    last = cleaner.last_result
    return CleanerFigures(
        passes=cleaner.passes,
        # As Kafka: the share of what the last pass read that it wrote back, a whole percentage.
        recopy_percent=int(100 * last.bytes_written / max(last.bytes_read, 1)) if last else 0,
        last_pass_seconds=last.seconds if last else 0.0,
        max_dirty_percent=int(100 * cleaner.max_dirty_ratio),
        since_last_run_ms=now_ms - cleaner.last_run_ms if cleaner.last_run_ms is not None else -1,
        uncleanable=cleaner.uncleanable_count(),
    )


def _copy_topic(counters: TopicCounters) -> TopicCounters:
    copy = TopicCounters()
    for name in TopicCounters.__slots__:
        setattr(copy, name, getattr(counters, name))
    return copy


@functools.cache
def api_name(api_key: int) -> str:
    """Kafka's name of an API (``Produce``, ``Fetch``, …), as RequestMetrics labels it, or of
    one of the series Kafka counts beside them (``FetchConsumer``, ``FetchFollower``)."""
    if api_key in SERIES_NAMES:
        return SERIES_NAMES[api_key]
    try:
        versions = schema_name_map[api_key_map[api_key]]
        path = next(iter(versions.values()))[EntityType.request]
    except (KeyError, StopIteration):
        return str(api_key)
    return path.rpartition(":")[2].removesuffix("Request")


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


def _histogram(family: HistogramMetricFamily, labels: list[str], histogram: Histogram) -> None:
    buckets = []
    cumulative = 0
    for bound, count in zip(histogram.bounds_s, histogram.counts, strict=False):
        cumulative += count
        buckets.append((repr(bound), float(cumulative)))
    cumulative += histogram.counts[-1]
    buckets.append(("+Inf", float(cumulative)))
    family.add_metric(labels, buckets, histogram.sum_ns / 1e9)


def families(snapshot: Snapshot) -> Iterator[Metric]:
    """The metric families of a snapshot (see the module doc for the names)."""
    yield from _topic_families(snapshot)
    yield from _request_families(snapshot)
    yield from _replica_families(snapshot)
    yield from _log_families(snapshot)
    yield from _group_families(snapshot)
    yield from _cleaner_families(snapshot.cleaner)
    yield from _client_families(snapshot.client_metrics)
    yield from _table_families(snapshot.tables)
    prefix = "kafka_server_socket_server_metrics_"
    listener = ["listener"]
    for name, kind, doc, values in (
        ("connection_count", GaugeMetricFamily, "Open client connections", snapshot.connections),
        (
            "connection_creation",
            CounterMetricFamily,
            "Connections accepted",
            snapshot.connections_created,
        ),
        (
            "connection_close",
            CounterMetricFamily,
            "Connections closed",
            snapshot.connections_closed,
        ),
    ):
        family = kind(prefix + name, doc, labels=listener)
        for listener_name, value in sorted(values.items()):
            family.add_metric([listener_name], value)
        yield family


def _topic_families(snapshot: Snapshot) -> Iterator[Metric]:
    prefix = "kafka_server_brokertopicmetrics_"
    fields = [
        ("bytesin", "bytes_in", "Record batch bytes appended by producers"),
        ("bytesout", "bytes_out", "Record bytes sent to consumers"),
        ("messagesin", "messages_in", "Records appended by producers"),
        ("totalproducerequests", "produce_requests", "Partitions written to by Produce"),
        ("failedproducerequests", "failed_produce_requests", "Partitions Produce failed for"),
        ("totalfetchrequests", "fetch_requests", "Partitions read by Fetch"),
        ("failedfetchrequests", "failed_fetch_requests", "Partitions Fetch failed for"),
    ]
    for name, attribute, doc in fields:
        family = CounterMetricFamily(prefix + name, doc, labels=["topic"])
        for topic, counters in sorted(snapshot.topics.items()):
            family.add_metric([topic], getattr(counters, attribute))
        yield family
    yield CounterMetricFamily(
        prefix + "replicationbytesout",
        "Record bytes sent to followers",
        value=snapshot.replication_bytes_out,
    )


# (Prometheus name, RequestTimes attribute, help) of the parts of a request's time.
_REQUEST_TIMES = (
    ("totaltime", "total", "Time from a request received to its response written"),
    (
        "requestqueuetime",
        "queue",
        "Time a request waited behind the earlier requests of its connection",
    ),
    ("localtime", "local", "Time handling a request, less its wait in the purgatory"),
    (
        "remotetime",
        "remote",
        "Time a request waited in the purgatory (acks=all, long polls, group commits)",
    ),
    ("responsesendtime", "send", "Time handing a response to the socket"),
)


def client_instances(
    samples: tuple[tuple[str, tuple[tuple[str, str], ...], float], ...],
) -> list[dict[str, Any]]:
    """The pushed metrics by client instance, for the console: its client id and principal,
    and each metric's name, other labels and value."""
    found: dict[str, dict[str, Any]] = {}
    for name, labels, value in samples:
        own = dict(labels[:3])  # client_instance_id, client_id, principal come first
        instance = found.setdefault(
            own["client_instance_id"],
            {**own, "metrics": []},
        )
        instance["metrics"].append({"name": name, "labels": dict(labels[3:]), "value": value})
    return list(found.values())


def _client_families(
    samples: tuple[tuple[str, tuple[tuple[str, str], ...], float], ...],
) -> Iterator[Metric]:
    # A metric's samples may carry different attributes (per node, per topic), so each sample
    # has its own labels rather than a family's fixed ones.
    families: dict[str, Metric] = {}
    for name, labels, value in samples:
        family = families.get(name)
        if family is None:
            family = families[name] = Metric(name, "Pushed by clients (KIP-714)", "gauge")
        family.add_sample(name, dict(labels), value)
    yield from families.values()


def _cleaner_families(cleaner: CleanerFigures | None) -> Iterator[Metric]:
    if cleaner is None:
        return
    prefix = "kafka_log_logcleaner_"
    yield GaugeMetricFamily(
        prefix + "cleaner_recopy_percent",
        "Bytes the last cleaning pass wrote, per 100 it read",
        value=cleaner.recopy_percent,
    )
    yield GaugeMetricFamily(
        prefix + "max_clean_time_secs",
        "Seconds the last cleaning pass took",
        value=cleaner.last_pass_seconds,
    )
    prefix = "kafka_log_logcleanermanager_"
    yield GaugeMetricFamily(
        prefix + "max_dirty_percent",
        "Dirty share of the dirtiest cleanable log when the cleaner last chose one",
        value=cleaner.max_dirty_percent,
    )
    yield GaugeMetricFamily(
        prefix + "time_since_last_run_ms",
        "Milliseconds since the cleaner last looked for a log to clean (-1: never)",
        value=cleaner.since_last_run_ms,
    )
    yield GaugeMetricFamily(
        prefix + "uncleanable_partitions_count",
        "Logs the cleaner could not read, left uncleaned until a restart",
        value=cleaner.uncleanable,
    )
    yield CounterMetricFamily(
        "odradek_log_cleaner_passes", "Cleaning passes swapped in", value=cleaner.passes
    )


def _request_families(snapshot: Snapshot) -> Iterator[Metric]:
    prefix = "kafka_network_requestmetrics_"
    requests = CounterMetricFamily(
        prefix + "requests", "Requests handled, by API", labels=["request"]
    )
    times = [
        (
            HistogramMetricFamily(prefix + name + "_seconds", doc, labels=["request"]),
            attribute,
        )
        for name, attribute, doc in _REQUEST_TIMES
    ]
    for api_key, count in enumerate(snapshot.requests):
        if not count:
            continue
        name = [api_name(api_key)]
        requests.add_metric(name, count)
        measured = snapshot.times[api_key]
        if measured is not None:
            for family, attribute in times:
                _histogram(family, name, getattr(measured, attribute))
    errors = CounterMetricFamily(
        prefix + "errors", "Partitions answered with an error code", labels=["request", "error"]
    )
    for (api_key, code), count in sorted(snapshot.errors.items()):
        errors.add_metric([api_name(api_key), error_name(code)], count)
    parked = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "Requests waiting in the purgatory",
        value=snapshot.parked,
    )
    yield requests
    yield from (family for family, _ in times)
    yield from (errors, parked)


def _replica_families(snapshot: Snapshot) -> Iterator[Metric]:
    prefix = "kafka_server_replicamanager_"
    led = [p for p in snapshot.partitions if p.leader]
    under = [p for p in led if p.isr < p.replicas]
    per_partition = GaugeMetricFamily(
        "kafka_cluster_partition_underreplicated",
        "1 if this broker leads the partition and its ISR is smaller than its replicas",
        labels=["topic", "partition"],
    )
    for p in led:
        per_partition.add_metric([p.topic, str(p.index)], 1 if p.isr < p.replicas else 0)
    gauges = [
        ("underreplicatedpartitions", "Led partitions whose ISR is below their replicas", under),
        (
            "underminisrpartitioncount",
            "Led partitions whose ISR is below min.insync.replicas",
            [p for p in led if p.isr < p.min_isr],
        ),
        (
            "atminisrpartitioncount",
            "Led partitions whose ISR is exactly min.insync.replicas",
            [p for p in led if p.isr == p.min_isr],
        ),
        ("partitioncount", "Partitions hosted by this broker", snapshot.partitions),
        ("leadercount", "Partitions led by this broker", led),
    ]
    for name, doc, items in gauges:
        yield GaugeMetricFamily(prefix + name, doc, value=len(items))
    yield per_partition
    yield CounterMetricFamily(
        prefix + "isrshrinks", "ISR shrinks written by this leader", value=snapshot.isr_shrinks
    )
    yield CounterMetricFamily(
        prefix + "isrexpands", "ISR expansions written by this leader", value=snapshot.isr_expands
    )
    prefix = "kafka_server_fetchsessioncache_"
    yield GaugeMetricFamily(
        prefix + "numincrementalfetchsessions",
        "Incremental fetch sessions held",
        value=snapshot.fetch_sessions,
    )
    yield GaugeMetricFamily(
        prefix + "numincrementalfetchpartitionscached",
        "Partitions of the incremental fetch sessions held",
        value=snapshot.fetch_session_partitions,
    )
    yield CounterMetricFamily(
        prefix + "incrementalfetchsessionevictions",
        "Incremental fetch sessions evicted for new ones",
        value=snapshot.fetch_session_evictions,
    )
    prefix = "kafka_controller_kafkacontroller_"
    yield GaugeMetricFamily(
        prefix + "offlinepartitionscount",
        "Partitions without a live leader (counted by the controller only)",
        value=snapshot.offline_partitions,
    )
    yield GaugeMetricFamily(
        prefix + "activecontrollercount",
        "1 on the broker that is the controller",
        value=1 if snapshot.is_controller else 0,
    )


def _log_families(snapshot: Snapshot) -> Iterator[Metric]:
    labels = ["topic", "partition"]
    fields: list[tuple[str, str, Callable[[PartitionFigures], int]]] = [
        ("size", "Bytes of the partition's segment files", lambda p: p.size),
        ("numlogsegments", "Segments of the partition", lambda p: p.segments),
        ("logstartoffset", "First offset of the partition's log", lambda p: p.log_start_offset),
        ("logendoffset", "Offset after the last record of the log", lambda p: p.log_end_offset),
    ]
    for name, doc, value in fields:
        family = GaugeMetricFamily("kafka_log_log_" + name, doc, labels=labels)
        for p in snapshot.partitions:
            family.add_metric([p.topic, str(p.index)], value(p))
        yield family
    flush = HistogramMetricFamily(
        "kafka_log_logflushstats_logflush_seconds",
        "fsyncs of log segments by the log flusher",
    )
    _histogram(flush, [], snapshot.flush_time)
    yield flush
    yield GaugeMetricFamily(
        "kafka_log_logmanager_offlinelogdirectorycount",
        "Log dirs offline after an I/O error, until a restart",
        value=sum(offline for _, offline in snapshot.log_dirs),
    )
    per_dir = GaugeMetricFamily(
        "kafka_log_logmanager_logdirectoryoffline",
        "1 for a log dir offline after an I/O error, 0 for one serving",
        labels=["logdirectory"],
    )
    for directory, offline in snapshot.log_dirs:
        per_dir.add_metric([directory], 1 if offline else 0)
    yield per_dir


_GROUP_STATES = {
    "numgroupsstable": GroupState.STABLE,
    "numgroupspreparingrebalance": GroupState.PREPARING_REBALANCE,
    "numgroupscompletingrebalance": GroupState.COMPLETING_REBALANCE,
    "numgroupsempty": GroupState.EMPTY,
    "numgroupsdead": GroupState.DEAD,
}


def _table_families(tables: tuple[TranslatorFigures, ...]) -> Iterator[Metric]:
    prefix = "odradek_iceberg_"
    labels = ["topic", "partition"]
    lag = GaugeMetricFamily(
        prefix + "translation_lag_records",
        "Records below the high watermark not yet committed to the topic's Iceberg table",
        labels=labels,
    )
    lag_seconds = GaugeMetricFamily(
        prefix + "translation_lag_seconds",
        "How long the oldest record not yet in the table has been below the high watermark",
        labels=labels,
    )
    translated = CounterMetricFamily(
        prefix + "translated_records",
        "Records committed to the table by this broker",
        labels=labels,
    )
    dead = CounterMetricFamily(
        prefix + "dead_letter_records",
        "Records that could not be decoded, committed to the <topic>~dlq table",
        labels=labels,
    )
    errors = CounterMetricFamily(
        prefix + "translation_errors",
        "Translation attempts that failed and were retried from the table's offset",
        labels=labels,
    )
    for f in tables:
        key = [f.topic, str(f.partition)]
        lag.add_metric(key, f.lag_records)
        lag_seconds.add_metric(key, f.lag_seconds)
        translated.add_metric(key, f.translated)
        dead.add_metric(key, f.dead_letters)
        errors.add_metric(key, f.errors)
    yield from (lag, lag_seconds, translated, dead, errors)


def _group_families(snapshot: Snapshot) -> Iterator[Metric]:
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    yield GaugeMetricFamily(
        prefix + "numgroups", "Groups this broker coordinates", value=len(snapshot.groups)
    )
    for name, state in _GROUP_STATES.items():
        count = sum(1 for g in snapshot.groups if g.state == state.value)
        yield GaugeMetricFamily(prefix + name, f"Groups in state {state.value}", value=count)
    group = ["consumergroup"]
    partition = ["consumergroup", "topic", "partition"]
    states = GaugeMetricFamily(
        "kafka_consumergroup_state", "1 for the group's current state", labels=[*group, "state"]
    )
    members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group", labels=group)
    current = GaugeMetricFamily(
        "kafka_consumergroup_current_offset", "Committed offset", labels=partition
    )
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "High watermark minus committed offset (partitions hosted by this broker)",
        labels=partition,
    )
    for g in sorted(snapshot.groups, key=lambda g: g.group_id):
        states.add_metric([g.group_id, g.state], 1)
        members.add_metric([g.group_id], g.members)
        for topic, index, committed, end in sorted(g.offsets):
            labels = [g.group_id, topic, str(index)]
            current.add_metric(labels, committed)
            if end is not None:
                lag.add_metric(labels, max(end - committed, 0))
    yield from (states, members, current, lag)


class BrokerCollector(Collector):
    """Reads the broker at scrape time (see the module doc); called on the HTTP threads."""

    def __init__(
        self,
        broker: Measured,
        counters: BrokerCounters,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._broker = broker
        self._counters = counters
        self._loop = loop

    def describe(self) -> Iterable[Metric]:
        return []  # registering must not collect: that would wait on the loop registering it

    def collect(self) -> Iterable[Metric]:
        return families(self.snapshot())

    def snapshot(self) -> Snapshot:
        future: concurrent.futures.Future[Snapshot] = concurrent.futures.Future()

        def take() -> None:
            try:
                future.set_result(take_snapshot(self._broker, self._counters))
            except BaseException as e:
                future.set_exception(e)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            take()
        else:
            self._loop.call_soon_threadsafe(take)
        return future.result(_SNAPSHOT_TIMEOUT_S)


class MetricsServer:
    """``/metrics`` (and, unless ``console.enabled=false``, the web console) on the HTTP server
    of :mod:`odradek.console.server`: aiohttp on a thread and event loop of its own. Start and
    stop it from the broker's event loop.

    The console is a client of the cluster like any other: it connects to
    ``console.bootstrap.servers`` (by default this broker's first listener) with the security
    settings of ``console.client.config``, so ACLs apply to it as to anyone."""

    def __init__(
        self,
        broker: Measured,
        counters: BrokerCounters,
        schema_registry: Callable[[], RegistryServer | None] = lambda: None,
        collectors: Iterable[Collector] = (),
    ) -> None:
        self._broker = broker
        self._counters = counters
        # The broker's registry, for the console's schema page (it starts after this server).
        self._schema_registry = schema_registry
        # Others' figures served beside the broker's (the schema registry's).
        self._collectors = tuple(collectors)
        self._server: HttpServer | None = None
        self.bound: tuple[str, int] = ("", 0)
        self.console: ConsoleApi | None = None

    def start(self, host: str, port: int) -> tuple[str, int]:
        # Here, not at the top: aiohttp costs a broker that serves no HTTP a part of a second.
        from odradek.console.schemas import SchemaView, in_process
        from odradek.console.server import HttpServer

        registry = CollectorRegistry(auto_describe=False)
        collector = BrokerCollector(self._broker, self._counters, asyncio.get_running_loop())
        registry.register(collector)
        for other in self._collectors:
            registry.register(other)
        config = self._broker.config
        if config.get("console.enabled"):

            def tables() -> list[dict[str, Any]]:  # on the console's HTTP threads
                return [dataclasses.asdict(f) for f in collector.snapshot().tables]

            def clients() -> list[dict[str, Any]]:
                return client_instances(collector.snapshot().client_metrics)

            def schemas() -> SchemaView | None:
                # In process: the registry reads _schemas as the console's own principal, so
                # the page shows what the console could read from the topic anyway.
                server = self._schema_registry()
                return SchemaView(in_process(server.read)) if server is not None else None

            self.console = ConsoleApi(
                *console_client(config, self._broker.bound),
                tables=tables,
                clients=clients,
                schemas=schemas,
            )
            self.console.start()
        allowed = config.get("console.allowed.hosts")
        self._server = HttpServer(
            registry,
            self.console,
            allowed_hosts=allowed if isinstance(allowed, list) else (),
            ssl_context=server_context(config, TLS_LISTENER_NAME) if config.metrics_tls else None,
        )
        self.bound = self._server.start(host, port)
        if self.console is not None:
            log.info(
                "odradek broker %d web console on %s://%s:%d/ (its client: %s)",
                self._broker.node_id,
                self.scheme,
                *self.bound,
                self.console.bootstrap,
            )
        return self.bound

    @property
    def scheme(self) -> str:
        return "https" if self._broker.config.metrics_tls else "http"

    async def stop(self) -> None:
        server, self._server = self._server, None
        # A scrape in progress may be waiting for this event loop: stop off the loop.
        if server is not None:
            await asyncio.to_thread(server.stop)
        console, self.console = self.console, None
        if console is not None:
            await asyncio.to_thread(console.close)
