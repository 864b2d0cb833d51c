"""The schema registry's figures for the broker's Prometheus endpoint (``/metrics``).

Names are odradek's own (Confluent's registry reports through JMX under other names; its nearest
equivalents in brackets)::

    odradek_schema_registry_subjects                       subjects with a version not deleted
    odradek_schema_registry_schemas                        schema ids (registered-count)
    odradek_schema_registry_versions                       subject versions, soft-deleted too
    odradek_schema_registry_registrations_total{result}    registrations answered by this
                                                           broker: new (a version written,
                                                           schemas-created) or existing
    odradek_schema_registry_lookups_by_id_total{result}    GET /schemas/ids/{id}[/...]:
                                                           found or not_found
    odradek_schema_registry_http_requests_total{method,endpoint,status}
                                                           every request answered (jersey
                                                           request-rate/-error-rate), the
                                                           endpoint as its route (e.g.
                                                           /subjects/{subject}/versions)
    odradek_schema_registry_validation_refusals_total{topic}
                                                           produces refused by schema id
                                                           validation (a partition's record
                                                           set each), on this broker as leader

The subjects, schemas and versions are those of this broker's replay of ``_schemas`` (a broker
whose registry has not been asked anything yet has not read it: 0). Nothing here exists on a
broker that serves no registry, except the refusals (all of them, then, for want of one).

Threads: counted on the registry's HTTP and store threads and on the broker's event loop,
collected on the metrics endpoint's threads, hence the lock; every update is a few integers.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

_PREFIX = "odradek_schema_registry_"


class RegistryMetrics(Collector):
    """The counters above, and a collector of them (register it with a CollectorRegistry)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._figures: tuple[int, int, int] | None = None  # subjects, schemas, versions
        self._registrations: Counter[str] = Counter()
        self._lookups: Counter[str] = Counter()
        self._requests: Counter[tuple[str, str, str]] = Counter()
        self._refusals: Counter[str] = Counter()

    # -- counting ----------------------------------------------------------------------------

    def replayed(self, subjects: int, schemas: int, versions: int) -> None:
        with self._lock:
            self._figures = (subjects, schemas, versions)

    def registered(self, created: bool) -> None:
        with self._lock:
            self._registrations["new" if created else "existing"] += 1

    def looked_up(self, found: bool) -> None:
        with self._lock:
            self._lookups["found" if found else "not_found"] += 1

    def answered(self, method: str, endpoint: str, status: int) -> None:
        with self._lock:
            self._requests[(method, endpoint, str(status))] += 1

    def validation_refused(self, topic: str) -> None:
        with self._lock:
            self._refusals[topic] += 1

    def topic_deleted(self, topic: str) -> None:
        with self._lock:
            self._refusals.pop(topic, None)

    # -- collecting --------------------------------------------------------------------------

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            figures = self._figures
            registrations = dict(self._registrations)
            lookups = dict(self._lookups)
            requests = dict(self._requests)
            refusals = dict(self._refusals)
        if figures is not None:
            for name, doc, value in zip(
                ("subjects", "schemas", "versions"),
                (
                    "Subjects with a version not deleted, in this broker's replay of _schemas",
                    "Schema ids in this broker's replay of _schemas",
                    "Subject versions (soft-deleted ones too) in this broker's replay",
                ),
                figures,
                strict=True,
            ):
                yield GaugeMetricFamily(_PREFIX + name, doc, value=value)
        for name, doc, counts, results in (
            (
                "registrations",
                "Schema registrations answered by this broker: new (a version written) or existing",
                registrations,
                ("new", "existing"),
            ),
            (
                "lookups_by_id",
                "Schema lookups by id (GET /schemas/ids/{id} and below it)",
                lookups,
                ("found", "not_found"),
            ),
        ):
            family = CounterMetricFamily(_PREFIX + name, doc, labels=["result"])
            for result in results:
                family.add_metric([result], counts.get(result, 0))
            yield family
        family = CounterMetricFamily(
            _PREFIX + "http_requests",
            "Requests answered by the registry's HTTP API, by method, route and status",
            labels=["method", "endpoint", "status"],
        )
        for key, count in sorted(requests.items()):
            family.add_metric(list(key), count)
        yield family
        family = CounterMetricFamily(
            _PREFIX + "validation_refusals",
            "Produces refused by schema id validation (confluent.key/value.schema.validation)",
            labels=["topic"],
        )
        for topic, count in sorted(refusals.items()):
            family.add_metric([topic], count)
        yield family
