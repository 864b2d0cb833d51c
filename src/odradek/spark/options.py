"""The options of the ``odradek`` data source: Spark's Kafka source and sink options, parsed.

Names, defaults and meanings follow Spark's built-in ``kafka`` format so a pipeline ports by
changing the format name. Parsing is pure (no I/O, no Spark), happens where the reader or writer
is made, and raises :class:`OptionError` with a message naming the option.

Options of odradek's own, beyond Spark's (which has no exactly-once Kafka sink):

- ``exactlyOnce`` (sink, default false): write each task's rows of a micro-batch (or of a batch
  write) in one Kafka transaction, once, however often Spark runs the task — see
  :mod:`odradek.spark.sink`. Needs ``kafka.acks=all``.
- ``transactionalIdPrefix`` (sink, default ``odradek-spark``): the transactional ids are
  ``<prefix>-<query id>-<task partition>``, which is how the query's transactions show in
  ListTransactions / DescribeTransactions.
- ``kafka.transaction.timeout.ms`` (sink, default 60000): after this long the coordinator aborts
  a transaction whose task died without a successor.
- ``kafka.max.request.size`` (sink, default 4 MiB): bytes a Produce request gathers before it is
  sent.
- Typed keys and values from a schema registry (see :mod:`odradek.spark.typed`):
  ``valueFormat`` / ``keyFormat`` (``avro``, ``protobuf``, ``json``; default raw bytes),
  ``valueSubject`` / ``keySubject`` (default ``<topic>-value`` / ``<topic>-key``),
  ``valueSchemaVersion`` / ``keySchemaVersion`` (default latest), ``valueMessageName`` /
  ``keyMessageName`` (protobuf), ``schema.registry.url`` (default
  ``http://<first bootstrap host>:8081``), ``schema.registry.basic.auth.user.info``; and for
  the sink (``avro`` only) ``autoRegister`` (default false).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.client.data import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TopicPartition,
)
from odradek.security.client_settings import ClientSecurity, ClientSettingsError

_DURATION_UNITS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


class OptionError(ValueError):
    """An option is missing, malformed, or not allowed where it was given."""


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Option values by case-insensitive name (Spark lower-cases keys; plain dicts may not)."""
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return None if value is None else str(value)
    return None


def _int(options: Mapping[str, str], name: str, *, minimum: int) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, not {value}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, not {raw!r}")
    return lowered == "true"


def parse_duration_ms(text: str, name: str = "maxTriggerDelay") -> int:
    """``"15m"``, ``"30s"``, ``"500ms"``, ``"2h"`` or a bare number of milliseconds."""
    found = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    unit = found.group(2) if found else None
    if found is None or (unit and unit not in _DURATION_UNITS):
        raise OptionError(f"option {name} must be a duration such as 15m or 30s, not {text!r}")
    return int(found.group(1)) * _DURATION_UNITS[unit or "ms"]


# -- offsets ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start or end: every partition at ``default`` (EARLIEST or LATEST), or per
    partition (``-2`` earliest, ``-1`` latest, else an offset), or by timestamp."""

    default: int
    per_partition: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None  # one timestamp (ms) for all partitions
    per_partition_timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)

    @property
    def by_timestamp(self) -> bool:
        return self.timestamp is not None or bool(self.per_partition_timestamps)


def _partition_json(name: str, raw: str) -> dict[TopicPartition, int]:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name} is not valid JSON: {e}") from None
    if not isinstance(parsed, dict):
        raise OptionError(f'option {name} must be a JSON object like {{"topic": {{"0": 23}}}}')
    result = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map partitions to numbers")
        for partition, value in partitions.items():
            try:
                tp = TopicPartition(str(topic), int(partition))
            except ValueError:
                raise OptionError(f"option {name}: {partition!r} is not a partition") from None
            if not isinstance(value, int) or isinstance(value, bool):
                raise OptionError(f"option {name}: {tp} must be a number, not {value!r}")
            result[tp] = value
    return result


def _offset_spec(options: Mapping[str, str], prefix: str, default: int) -> OffsetSpec:
    """``startingOffsets`` / ``endingOffsets`` and their by-timestamp variants; the global
    timestamp wins over per-partition timestamps, which win over offsets (as in Spark)."""
    global_ts = _int(options, f"{prefix}Timestamp", minimum=0)
    if global_ts is not None:
        return OffsetSpec(default, timestamp=global_ts)
    by_ts = _get(options, f"{prefix}OffsetsByTimestamp")
    if by_ts is not None:
        timestamps = _partition_json(f"{prefix}OffsetsByTimestamp", by_ts)
        return OffsetSpec(default, per_partition_timestamps=timestamps)
    raw = _get(options, f"{prefix}Offsets")
    if raw is None:
        return OffsetSpec(default)
    lowered = raw.strip().lower()
    if lowered == "earliest":
        return OffsetSpec(EARLIEST)
    if lowered == "latest":
        return OffsetSpec(LATEST)
    offsets = _partition_json(f"{prefix}Offsets", raw)
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise OptionError(f"option {prefix}Offsets: {offset} for {tp} is not an offset")
    return OffsetSpec(default, per_partition=offsets)


# -- subscriptions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscription:
    """Exactly one of: topics by name, topics by pattern, or fixed partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern {self.pattern}"
        if self.assigned:
            return "assign " + ",".join(str(tp) for tp in self.assigned)
        return "subscribe " + ",".join(self.topics)


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = {
        name: _get(options, name)
        for name in ("subscribe", "subscribePattern", "assign")
        if _get(options, name) is not None
    }
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options subscribe, subscribePattern and assign must be given"
            + (f" (got {', '.join(sorted(given))})" if given else "")
        )
    ((name, raw),) = given.items()
    assert raw is not None
    if name == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if not topics:
            raise OptionError("option subscribe names no topic")
        return Subscription(topics=topics)
    if name == "subscribePattern":
        if not raw.strip():
            raise OptionError("option subscribePattern is empty")
        try:
            re.compile(raw)
        except re.error as e:
            raise OptionError(f"option subscribePattern is not a valid pattern: {e}") from None
        return Subscription(pattern=raw)
    try:
        parsed: Any = json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(f"option assign is not valid JSON: {e}") from None
    if not isinstance(parsed, dict) or not all(
        isinstance(ps, list) and all(isinstance(p, int) for p in ps) for ps in parsed.values()
    ):
        raise OptionError('option assign must be a JSON object like {"topicA": [0, 1]}')
    assigned = tuple(sorted({TopicPartition(t, p) for t, ps in parsed.items() for p in ps}))
    if not assigned:
        raise OptionError("option assign names no partition")
    return Subscription(assigned=assigned)


def _bootstrap(options: Mapping[str, str]) -> str:
    servers = _get(options, "kafka.bootstrap.servers")
    if not servers or not servers.strip():
        raise OptionError("option kafka.bootstrap.servers is required")
    return servers.strip()


def bootstrap_and_topics(options: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """The bootstrap servers, and the topics subscribed to by name (none for a pattern or an
    assignment)."""
    return _bootstrap(options), _subscription(options).topics


_ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


def _security(options: Mapping[str, str]) -> ClientSecurity:
    """``kafka.security.protocol``, ``kafka.ssl.*`` and ``kafka.sasl.*``, as Spark's kafka
    source passes them to its Kafka client: the same names, for the project's client."""
    settings = {
        name[len("kafka.") :]: value
        for name, value in options.items()
        if name.lower().startswith(("kafka.security.", "kafka.ssl.", "kafka.sasl."))
    }
    try:
        return ClientSecurity.from_config(settings)
    except ClientSettingsError as e:
        raise OptionError(str(e)) from e


def _isolation_level(options: Mapping[str, str]) -> int:
    """``kafka.isolation.level`` as a Kafka consumer takes it: read_committed reads up to the
    last stable offset and never sees aborted transactions; read_uncommitted (the default)
    reads up to the high watermark, aborted and open transactions included."""
    raw = (_get(options, "kafka.isolation.level") or "read_uncommitted").strip().lower()
    if raw not in _ISOLATION_LEVELS:
        raise OptionError(
            f"option kafka.isolation.level must be read_uncommitted or read_committed, not {raw!r}"
        )
    return _ISOLATION_LEVELS[raw]


# -- read and write options ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy_latest: bool  # startingOffsetsByTimestampStrategy=latest
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: int | None
    max_records_per_partition: int | None
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    fetch_max_bytes: int
    isolation_level: int = READ_UNCOMMITTED  # kafka.isolation.level
    security: ClientSecurity = field(default_factory=ClientSecurity)  # kafka.security.*, ssl, sasl

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
        starting = _offset_spec(options, "starting", LATEST if streaming else EARLIEST)
        ending = _offset_spec(options, "ending", LATEST)
        if streaming:
            for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
                if _get(options, name) is not None:
                    raise OptionError(f"option {name} is for batch queries only")
        else:
            if (
                starting.default == LATEST
                and not starting.per_partition
                and not (starting.by_timestamp)
            ):
                raise OptionError("startingOffsets=latest is for streaming queries only")
            if any(o == LATEST for o in starting.per_partition.values()):
                raise OptionError("startingOffsets may not use -1 (latest) in a batch query")
            if ending.default == EARLIEST and not ending.per_partition and not ending.by_timestamp:
                raise OptionError("endingOffsets=earliest is for streaming queries only")
            if any(o == EARLIEST for o in ending.per_partition.values()):
                raise OptionError("endingOffsets may not use -2 (earliest) in a batch query")
            for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
                if _get(options, name) is not None:
                    raise OptionError(f"option {name} is for streaming queries only")
        strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").lower()
        if strategy not in ("error", "latest"):
            raise OptionError(
                f"option startingOffsetsByTimestampStrategy must be error or latest, "
                f"not {strategy!r}"
            )
        max_offsets = _int(options, "maxOffsetsPerTrigger", minimum=1)
        min_offsets = _int(options, "minOffsetsPerTrigger", minimum=1)
        if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
            raise OptionError("minOffsetsPerTrigger may not be above maxOffsetsPerTrigger")
        delay = _get(options, "maxTriggerDelay")
        return cls(
            bootstrap=_bootstrap(options),
            subscription=_subscription(options),
            starting=starting,
            ending=ending,
            timestamp_strategy_latest=strategy == "latest",
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            include_headers=_bool(options, "includeHeaders", False),
            min_partitions=_int(options, "minPartitions", minimum=1),
            max_records_per_partition=_int(options, "maxRecordsPerPartition", minimum=1),
            max_offsets_per_trigger=max_offsets,
            min_offsets_per_trigger=min_offsets,
            max_trigger_delay_ms=parse_duration_ms(delay) if delay is not None else 15 * 60_000,
            security=_security(options),
            fetch_max_bytes=_int(options, "kafka.max.partition.fetch.bytes", minimum=1024)
            or 8 << 20,
            isolation_level=_isolation_level(options),
        )


_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


@dataclass(frozen=True, slots=True)
class WriteOptions:
    bootstrap: str
    topic: str | None  # overrides the topic column
    acks: int
    compression: int
    batch_bytes: int
    request_bytes: int  # kafka.max.request.size: a Produce request goes out when this is full
    # exactlyOnce=true: each task writes its rows in one Kafka transaction, once per micro-batch
    # (see odradek.spark.sink); transactional ids are transactionalIdPrefix-<query id>-<task>.
    exactly_once: bool = False
    transactional_id_prefix: str = "odradek-spark"
    transaction_timeout_ms: int = 60_000  # kafka.transaction.timeout.ms
    security: ClientSecurity = field(default_factory=ClientSecurity)  # kafka.security.*, ssl, sasl

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        from odradek.protocol.compression import CODEC_NAMES

        acks_raw = (_get(options, "kafka.acks") or "all").strip().lower()
        if acks_raw not in _ACKS:
            raise OptionError(f"option kafka.acks must be all, -1, 1 or 0, not {acks_raw!r}")
        codec = (_get(options, "kafka.compression.type") or "none").strip().lower()
        if codec not in CODEC_NAMES:
            raise OptionError(
                f"option kafka.compression.type must be one of {', '.join(CODEC_NAMES)}, "
                f"not {codec!r}"
            )
        topic = _get(options, "topic")
        exactly_once = _bool(options, "exactlyOnce", False)
        if exactly_once and _ACKS[acks_raw] != -1:
            raise OptionError("exactlyOnce=true needs kafka.acks=all, as Kafka's transactions do")
        prefix = (_get(options, "transactionalIdPrefix") or "odradek-spark").strip()
        if not prefix:
            raise OptionError("option transactionalIdPrefix is empty")
        return cls(
            bootstrap=_bootstrap(options),
            topic=topic.strip() if topic and topic.strip() else None,
            acks=_ACKS[acks_raw],
            compression=CODEC_NAMES[codec],
            batch_bytes=_int(options, "kafka.batch.size", minimum=1024) or 512 * 1024,
            request_bytes=_int(options, "kafka.max.request.size", minimum=1024) or 4 << 20,
            exactly_once=exactly_once,
            transactional_id_prefix=prefix,
            transaction_timeout_ms=_int(options, "kafka.transaction.timeout.ms", minimum=1000)
            or 60_000,
            security=_security(options),
        )
