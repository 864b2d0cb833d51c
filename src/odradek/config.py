"""Broker and topic configuration under Kafka's own names.

Broker settings come from a Java-style properties file plus ``key=value`` overrides. Topic
settings default to their broker synonym (``segment.bytes`` to ``log.segment.bytes``, …) and can be
set per topic at creation or by AlterConfigs; they are stored with the topic's metadata.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from odradek.security.client_settings import ClientSecurity, ClientSettingsError

LONG_MAX = 9223372036854775807


class ConfigType(IntEnum):
    """DescribeConfigs' config types (KIP-569)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigError(ValueError):
    """A configuration name or value that the broker does not accept."""


def _parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"expected true or false, got {raw!r}")
    return lowered == "true"


def _parse(kind: ConfigType, raw: str) -> object:
    text = raw.strip()
    try:
        if kind is ConfigType.BOOLEAN:
            return _parse_bool(text)
        if kind in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
            return int(text)
        if kind is ConfigType.DOUBLE:
            return float(text)
        if kind is ConfigType.LIST:
            return [item.strip() for item in text.split(",") if item.strip()]
    except ValueError as e:
        raise ConfigError(f"{raw!r} is not a valid {kind.name.lower()}") from e
    return text


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    kind: ConfigType
    default: str | None
    doc: str
    check: Callable[[object], str | None] | None = None  # returns a complaint, or None
    read_only: bool = False

    def parse(self, raw: str) -> object:
        try:
            value = _parse(self.kind, raw)
        except ConfigError as e:
            raise ConfigError(f"invalid value for {self.name}: {e}") from e
        if self.check is not None:
            complaint = self.check(value)
            if complaint:
                raise ConfigError(f"invalid value {raw!r} for {self.name}: {complaint}")
        return value


def _at_least(minimum: int) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        return None if isinstance(value, int) and value >= minimum else f"must be >= {minimum}"

    return check


def _one_of(*allowed: str) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        items = value if isinstance(value, list) else [value]
        bad = [item for item in items if item not in allowed]
        return f"must be one of {', '.join(allowed)}" if bad or not items else None

    return check


# Confluent's subject name strategies (storage.log has them too: config imports no layer).
_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
_TOPIC_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
_SUBJECT_NAME_STRATEGY = _one_of(
    *(f"io.confluent.kafka.serializers.subject.{name}" for name in _STRATEGIES), *_STRATEGIES
)


def _ratio(value: object) -> str | None:
    return None if isinstance(value, float) and 0.0 <= value <= 1.0 else "must be in [0, 1]"


def _host_port_check(value: object) -> str | None:
    host, _, port = str(value).rpartition(":")
    return None if host and port.isdigit() and int(port) < 65536 else "must be HOST:PORT"


def parse_per_ip_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs (a host name, an IPv4
    address, or an IPv6 address whose colons the last one splits from its count)."""
    overrides: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip():
            raise ConfigError(f"{item!r} is not HOST:COUNT")
        try:
            value = int(count)
        except ValueError:
            raise ConfigError(f"{item!r}: {count!r} is not a number of connections") from None
        if value < 0:
            raise ConfigError(f"{item!r}: a count must be >= 0")
        overrides[host.strip().strip("[]")] = value
    return overrides


def _per_ip_overrides_check(value: object) -> str | None:
    try:
        parse_per_ip_overrides(str(value))
    except ConfigError as e:
        return str(e)
    return None


def _http_listener_check(value: object) -> str | None:
    return _host_port_check(_without_scheme(str(value)))


def _without_scheme(text: str) -> str:
    """``HOST:PORT`` of an HTTP listener's ``[http://|https://]HOST:PORT``."""
    return text.removeprefix("http://").removeprefix("https://")


def _registry_listener_check(value: object) -> str | None:
    return _http_listener_check(value) if str(value) else None  # empty: off


def _namespace_check(value: object) -> str | None:
    parts = str(value).split(".")
    return None if all(parts) else "must be dot-separated non-empty names"


# One transform of iceberg.partition.spec: identity (a column), or year/month/day/hour(column),
# bucket[N](column), truncate[N](column).
PARTITION_TRANSFORM = re.compile(
    r"^(?:(?P<fn>year|month|day|hour|identity)\((?P<fcol>[\w.]+)\)"
    r"|(?P<nfn>bucket|truncate)\[(?P<n>\d+)\]\((?P<ncol>[\w.]+)\)"
    r"|(?P<col>[\w.]+))$"
)


def parse_partition_spec(text: str) -> list[tuple[str, str, int | None]]:
    """``(t1, t2, ...)`` into (transform, column, width) triples; ConfigError when malformed."""
    body = text.strip()
    if not (body.startswith("(") and body.endswith(")")):
        raise ConfigError(f"{text!r} is not a parenthesised list of transforms")
    found: list[tuple[str, str, int | None]] = []
    for item in (i.strip() for i in _split_top_level(body[1:-1])):
        if not item:
            continue
        match = PARTITION_TRANSFORM.match(item)
        if match is None:
            raise ConfigError(f"{item!r} is not a partition transform")
        if match["fn"]:
            found.append((match["fn"], match["fcol"], None))
        elif match["nfn"]:
            found.append((match["nfn"], match["ncol"], int(match["n"])))
        else:
            found.append(("identity", match["col"], None))
    return found


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        depth += ch in "(["
        depth -= ch in ")]"
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _partition_spec_check(value: object) -> str | None:
    try:
        parse_partition_spec(str(value))
    except ConfigError as e:
        return str(e)
    return None


def _client_config_check(value: object) -> str | None:
    """A readable Kafka client properties file whose security settings make sense."""
    try:
        ClientSecurity.from_config(parse_properties(Path(str(value)).read_text()))
    except OSError as e:
        return f"cannot read it: {e.strerror or e}"
    except ClientSettingsError as e:
        return str(e)
    return None


# Topic configs, each with its broker-level synonym (None where Kafka has none).
TOPIC_CONFIGS: dict[str, tuple[ConfigDef, str | None]] = {
    d.name: (d, synonym)
    for d, synonym in [
        (
            ConfigDef(
                "cleanup.policy",
                ConfigType.LIST,
                "delete",
                "delete and/or compact old segments",
                _one_of("delete", "compact"),
            ),
            "log.cleanup.policy",
        ),
        (
            ConfigDef(
                "compression.type",
                ConfigType.STRING,
                "producer",
                "final compression codec",
                _one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
            ),
            "compression.type",
        ),
        (
            ConfigDef(
                "delete.retention.ms",
                ConfigType.LONG,
                "86400000",
                "how long tombstones are kept on compacted topics",
                _at_least(0),
            ),
            "log.cleaner.delete.retention.ms",
        ),
        (
            ConfigDef(
                "file.delete.delay.ms",
                ConfigType.LONG,
                "60000",
                "wait before deleting a file from the file system",
                _at_least(0),
            ),
            "log.segment.delete.delay.ms",
        ),
        (
            ConfigDef(
                "flush.messages",
                ConfigType.LONG,
                str(LONG_MAX),
                "fsync after this many messages",
                _at_least(1),
            ),
            "log.flush.interval.messages",
        ),
        (
            ConfigDef(
                "flush.ms", ConfigType.LONG, str(LONG_MAX), "fsync after this many ms", _at_least(0)
            ),
            "log.flush.interval.ms",
        ),
        (
            ConfigDef(
                "index.interval.bytes",
                ConfigType.INT,
                "4096",
                "bytes between offset index entries",
                _at_least(0),
            ),
            "log.index.interval.bytes",
        ),
        (
            ConfigDef(
                "max.compaction.lag.ms",
                ConfigType.LONG,
                str(LONG_MAX),
                "longest a record stays uncompacted",
                _at_least(1),
            ),
            "log.cleaner.max.compaction.lag.ms",
        ),
        (
            ConfigDef(
                "max.message.bytes",
                ConfigType.INT,
                "1048588",
                "largest record batch accepted",
                _at_least(0),
            ),
            "message.max.bytes",
        ),
        (
            ConfigDef(
                "message.timestamp.type",
                ConfigType.STRING,
                "CreateTime",
                "CreateTime or LogAppendTime",
                _one_of("CreateTime", "LogAppendTime"),
            ),
            "log.message.timestamp.type",
        ),
        (
            ConfigDef(
                "message.timestamp.before.max.ms",
                ConfigType.LONG,
                str(LONG_MAX),
                "how far in the past a record timestamp may be",
                _at_least(0),
            ),
            "log.message.timestamp.before.max.ms",
        ),
        (
            ConfigDef(
                "message.timestamp.after.max.ms",
                ConfigType.LONG,
                "3600000",
                "how far in the future a record timestamp may be",
                _at_least(0),
            ),
            "log.message.timestamp.after.max.ms",
        ),
        (
            ConfigDef(
                "min.cleanable.dirty.ratio",
                ConfigType.DOUBLE,
                "0.5",
                "dirty share of the log that triggers compaction",
                _ratio,
            ),
            "log.cleaner.min.cleanable.ratio",
        ),
        (
            ConfigDef(
                "min.compaction.lag.ms",
                ConfigType.LONG,
                "0",
                "youngest a record may be compacted",
                _at_least(0),
            ),
            "log.cleaner.min.compaction.lag.ms",
        ),
        (
            ConfigDef(
                "min.insync.replicas",
                ConfigType.INT,
                "1",
                "replicas that must have a record for acks=all",
                _at_least(1),
            ),
            "min.insync.replicas",
        ),
        (
            ConfigDef(
                "retention.bytes",
                ConfigType.LONG,
                "-1",
                "partition size above which old segments are deleted",
                _at_least(-1),
            ),
            "log.retention.bytes",
        ),
        (
            ConfigDef(
                "retention.ms",
                ConfigType.LONG,
                "604800000",
                "age above which old segments are deleted",
                _at_least(-1),
            ),
            "log.retention.ms",
        ),
        (
            ConfigDef(
                "segment.bytes", ConfigType.INT, "1073741824", "segment file size", _at_least(14)
            ),
            "log.segment.bytes",
        ),
        (
            ConfigDef(
                "segment.index.bytes", ConfigType.INT, "10485760", "offset index size", _at_least(4)
            ),
            "log.index.size.max.bytes",
        ),
        (
            ConfigDef(
                "segment.jitter.ms", ConfigType.LONG, "0", "jitter on segment.ms", _at_least(0)
            ),
            "log.roll.jitter.ms",
        ),
        (
            ConfigDef(
                "segment.ms", ConfigType.LONG, "604800000", "age that rolls a segment", _at_least(1)
            ),
            "log.roll.ms",
        ),
        (
            ConfigDef(
                "unclean.leader.election.enable",
                ConfigType.BOOLEAN,
                "false",
                "elect out-of-sync replicas as a last resort",
            ),
            "unclean.leader.election.enable",
        ),
        (
            ConfigDef(
                "leader.replication.throttled.replicas",
                ConfigType.LIST,
                "",
                "partition:broker pairs (or *) whose leaders' replication is throttled",
            ),
            None,
        ),
        (
            ConfigDef(
                "follower.replication.throttled.replicas",
                ConfigType.LIST,
                "",
                "partition:broker pairs (or *) whose followers' replication is throttled",
            ),
            None,
        ),
        # Broker-side schema id validation (storage.validator), by Confluent Server's names.
        (
            ConfigDef(
                "confluent.key.schema.validation",
                ConfigType.BOOLEAN,
                "false",
                "refuse a batch unless every record's key is null or starts with the schema "
                "registry's wire format (magic byte 0, then a 4-byte schema id the registry "
                "knows); INVALID_RECORD, nothing appended",
            ),
            None,
        ),
        (
            ConfigDef(
                "confluent.value.schema.validation",
                ConfigType.BOOLEAN,
                "false",
                "refuse a batch unless every record's value is null (a tombstone) or starts "
                "with the schema registry's wire format (magic byte 0, then a 4-byte schema id "
                "the registry knows); INVALID_RECORD, nothing appended",
            ),
            None,
        ),
        (
            ConfigDef(
                "confluent.key.subject.name.strategy",
                ConfigType.STRING,
                _TOPIC_NAME_STRATEGY,
                "the subject a record key's schema id must be registered under when "
                "confluent.key.schema.validation is on, by Confluent's strategy class: "
                "TopicNameStrategy (<topic>-key), RecordNameStrategy (the schema's record "
                "name), TopicRecordNameStrategy (<topic>-<record name>)",
                _SUBJECT_NAME_STRATEGY,
            ),
            None,
        ),
        (
            ConfigDef(
                "confluent.value.subject.name.strategy",
                ConfigType.STRING,
                _TOPIC_NAME_STRATEGY,
                "the subject a record value's schema id must be registered under when "
                "confluent.value.schema.validation is on, by Confluent's strategy class: "
                "TopicNameStrategy (<topic>-value), RecordNameStrategy (the schema's record "
                "name), TopicRecordNameStrategy (<topic>-<record name>)",
                _SUBJECT_NAME_STRATEGY,
            ),
            None,
        ),
        # Topics as Iceberg tables (odradek.iceberg): names after Redpanda's.
        (
            ConfigDef(
                "iceberg.mode",
                ConfigType.STRING,
                "disabled",
                "disabled, or write every committed record to the Iceberg table named after the "
                "topic too: key_value (a kafka struct of partition, offset, timestamp and headers, "
                "then key and value as binary), value_schema_id_prefix (the value decoded by the "
                "Avro or JSON schema whose registry id its Confluent prefix names, into typed "
                "columns) or value_schema_latest (by the latest schema of subject <topic>-value)",
                _one_of("disabled", "key_value", "value_schema_id_prefix", "value_schema_latest"),
            ),
            None,
        ),
        (
            ConfigDef(
                "iceberg.namespace",
                ConfigType.STRING,
                "odradek",
                "the catalog namespace of the topic's table",
                _namespace_check,
            ),
            None,
        ),
        (
            ConfigDef(
                "iceberg.partition.spec",
                ConfigType.STRING,
                "(hour(kafka.timestamp))",
                "how the table is partitioned: a list of transforms of columns, e.g. "
                "(hour(kafka.timestamp)), (day(kafka.timestamp), kafka.partition), () for none; "
                "read when the table is created",
                _partition_spec_check,
            ),
            None,
        ),
        (
            ConfigDef(
                "iceberg.commit.interval.ms",
                ConfigType.LONG,
                "60000",
                "how often translated records are committed to the table (one snapshot, and "
                "about one data file per table partition, per commit)",
                _at_least(1),
            ),
            None,
        ),
    ]
}

# Broker configs this broker reads. Topic synonyms above are broker configs too.
# The broker configs a client may change at run time (IncrementalAlterConfigs on a broker): the
# replication throttles and the connection limits (Kafka's DynamicConnectionQuota; the
# listener-prefixed limits stay static here).
DYNAMIC_CONNECTION_CONFIGS = frozenset(
    {
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connection.creation.rate",
    }
)
DYNAMIC_BROKER_CONFIGS = DYNAMIC_CONNECTION_CONFIGS | {
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
}

BROKER_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef("node.id", ConfigType.INT, "1", "this broker's id", _at_least(0), True),
        ConfigDef("broker.id", ConfigType.INT, None, "alias of node.id", _at_least(-1), True),
        ConfigDef("log.dirs", ConfigType.LIST, None, "data directories", read_only=True),
        ConfigDef("log.dir", ConfigType.STRING, "./odradek-data", "data directory", read_only=True),
        ConfigDef(
            "listeners", ConfigType.LIST, "PLAINTEXT://127.0.0.1:9092", "listeners", read_only=True
        ),
        ConfigDef(
            "advertised.listeners",
            ConfigType.LIST,
            None,
            "addresses given to clients",
            read_only=True,
        ),
        # Security (odradek.security): listener names and protocols, TLS, SASL. Each ssl.* and
        # sasl.* setting can also be given per listener as listener.name.<name>.<setting>.
        ConfigDef(
            "listener.security.protocol.map",
            ConfigType.STRING,
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "LISTENER_NAME:SECURITY_PROTOCOL pairs",
            read_only=True,
        ),
        ConfigDef(
            "inter.broker.listener.name",
            ConfigType.STRING,
            None,
            "the listener brokers advertise to each other (unset: the first listener)",
            read_only=True,
        ),
        ConfigDef(
            "sasl.mechanism.inter.broker.protocol",
            ConfigType.STRING,
            None,
            "SASL mechanism brokers log in to each other with (unset: the inter-broker "
            "listener's first enabled one)",
            read_only=True,
        ),
        ConfigDef(
            "ssl.endpoint.identification.algorithm",
            ConfigType.STRING,
            "https",
            "https: a broker checks the host name of the broker it connects to; empty: not",
            read_only=True,
        ),
        ConfigDef(
            "ssl.keystore.type",
            ConfigType.STRING,
            "PEM",
            "format of the key store (only PEM)",
            _one_of("PEM"),
            True,
        ),
        ConfigDef(
            "ssl.keystore.location",
            ConfigType.STRING,
            None,
            "PEM file with the private key and the certificate chain",
            read_only=True,
        ),
        ConfigDef(
            "ssl.keystore.certificate.chain",
            ConfigType.PASSWORD,
            None,
            "the certificate chain as inline PEM",
            read_only=True,
        ),
        ConfigDef(
            "ssl.keystore.key",
            ConfigType.PASSWORD,
            None,
            "the private key as inline PEM",
            None,
            True,
        ),
        ConfigDef(
            "ssl.key.password", ConfigType.PASSWORD, None, "password of the private key", None, True
        ),
        ConfigDef(
            "ssl.truststore.type",
            ConfigType.STRING,
            "PEM",
            "format of the trust store (only PEM)",
            _one_of("PEM"),
            True,
        ),
        ConfigDef(
            "ssl.truststore.location",
            ConfigType.STRING,
            None,
            "PEM file of the certificate authorities client certificates are checked against",
            read_only=True,
        ),
        ConfigDef(
            "ssl.truststore.certificates",
            ConfigType.PASSWORD,
            None,
            "the trusted certificates as inline PEM",
            read_only=True,
        ),
        ConfigDef(
            "ssl.client.auth",
            ConfigType.STRING,
            "none",
            "none, requested or required: whether clients present certificates",
            _one_of("none", "requested", "required"),
            True,
        ),
        ConfigDef(
            "ssl.principal.mapping.rules",
            ConfigType.STRING,
            "DEFAULT",
            "how a client certificate's subject becomes a principal (only DEFAULT)",
            _one_of("DEFAULT"),
            True,
        ),
        ConfigDef(
            "sasl.enabled.mechanisms",
            ConfigType.LIST,
            "GSSAPI",
            "SASL mechanisms a SASL listener offers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
            "OAUTHBEARER)",
            read_only=True,
        ),
        # OAUTHBEARER (odradek.security.oauthbearer), each also per listener as
        # listener.name.<name>.sasl.oauthbearer.<setting>.
        ConfigDef(
            "sasl.oauthbearer.jwks.endpoint.url",
            ConfigType.STRING,
            None,
            "the identity provider's signing keys (a JWKS), file: or https:; unset: OAUTHBEARER "
            "takes unsecured (unsigned) tokens, for development",
            read_only=True,
        ),
        ConfigDef(
            "sasl.oauthbearer.token.endpoint.url",
            ConfigType.STRING,
            None,
            "where this broker gets the token of its own OAUTHBEARER login to the other brokers "
            "(the client credentials grant, with clientId, clientSecret and scope of the "
            "listener's OAuthBearerLoginModule entry); unset: an unsecured token for "
            "unsecuredLoginStringClaim_sub",
            read_only=True,
        ),
        ConfigDef(
            "sasl.oauthbearer.jwks.endpoint.refresh.ms",
            ConfigType.LONG,
            "3600000",
            "how often the JWKS is read again",
            _at_least(1000),
            read_only=True,
        ),
        ConfigDef(
            "sasl.oauthbearer.expected.audience",
            ConfigType.LIST,
            None,
            "audiences a token's aud must name one of (unset: not checked)",
            read_only=True,
        ),
        ConfigDef(
            "sasl.oauthbearer.expected.issuer",
            ConfigType.STRING,
            None,
            "the issuer a token's iss must be (unset: not checked)",
            read_only=True,
        ),
        ConfigDef(
            "sasl.oauthbearer.clock.skew.seconds",
            ConfigType.INT,
            "30",
            "clock difference allowed with the identity provider when checking exp, nbf, iat",
            _at_least(0),
            read_only=True,
        ),
        ConfigDef(
            "sasl.oauthbearer.sub.claim.name",
            ConfigType.STRING,
            "sub",
            "the claim whose value is the principal's name (User:<value>)",
            read_only=True,
        ),
        ConfigDef(
            "sasl.jaas.config",
            ConfigType.PASSWORD,
            None,
            'JAAS login module options (PLAIN users as user_<name>="password")',
            read_only=True,
        ),
        ConfigDef(
            "connection.failed.authentication.delay.ms",
            ConfigType.INT,
            "100",
            "wait before closing a connection whose authentication failed",
            _at_least(0),
        ),
        ConfigDef(
            "connections.max.reauth.ms",
            ConfigType.LONG,
            "0",
            "KIP-368: SASL sessions last this long, then the client re-authenticates (0: forever)",
            _at_least(0),
        ),
        ConfigDef(
            "delegation.token.secret.key",
            ConfigType.PASSWORD,
            None,
            "KIP-48: the key delegation tokens' HMACs are made with, the same on every broker "
            "(unset: delegation tokens are disabled)",
            read_only=True,
        ),
        ConfigDef(
            "delegation.token.master.key",
            ConfigType.PASSWORD,
            None,
            "the older name of delegation.token.secret.key, read when that is unset",
            read_only=True,
        ),
        ConfigDef(
            "delegation.token.max.lifetime.ms",
            ConfigType.LONG,
            "604800000",
            "a delegation token cannot be renewed past this long after its creation",
            _at_least(1),
            read_only=True,
        ),
        ConfigDef(
            "delegation.token.expiry.time.ms",
            ConfigType.LONG,
            "86400000",
            "a delegation token expires this long after its creation or renewal, unless the "
            "request asks for another period",
            _at_least(1),
            read_only=True,
        ),
        ConfigDef(
            "delegation.token.expiry.check.interval.ms",
            ConfigType.LONG,
            "3600000",
            "how often expired delegation tokens are removed",
            _at_least(1),
            read_only=True,
        ),
        ConfigDef(
            "num.partitions", ConfigType.INT, "1", "partitions of auto-created topics", _at_least(1)
        ),
        ConfigDef(
            "default.replication.factor",
            ConfigType.SHORT,
            "1",
            "replication factor of auto-created topics",
            _at_least(1),
        ),
        ConfigDef(
            "auto.create.topics.enable",
            ConfigType.BOOLEAN,
            "true",
            "create a topic on first Metadata or Produce request",
        ),
        ConfigDef("delete.topic.enable", ConfigType.BOOLEAN, "true", "allow DeleteTopics"),
        ConfigDef(
            "max.request.partition.size.limit",
            ConfigType.INT,
            "2000",
            "the most partitions one DescribeTopicPartitions response holds (a client asking "
            "for more gets a cursor to go on from)",
            _at_least(1),
        ),
        ConfigDef("log.roll.hours", ConfigType.INT, "168", "segment age in hours", _at_least(1)),
        ConfigDef(
            "log.retention.hours", ConfigType.INT, "168", "retention in hours", _at_least(-1)
        ),
        ConfigDef("log.retention.minutes", ConfigType.INT, None, "retention in minutes"),
        ConfigDef(
            "log.retention.check.interval.ms",
            ConfigType.LONG,
            "300000",
            "how often retention is checked",
            _at_least(1),
        ),
        # The log cleaner (compaction of cleanup.policy=compact topics; odradek.storage.cleaner).
        ConfigDef("log.cleaner.enable", ConfigType.BOOLEAN, "true", "run the log cleaner"),
        ConfigDef(
            "log.cleaner.backoff.ms",
            ConfigType.LONG,
            "15000",
            "how long the cleaner sleeps when no log needs cleaning",
            _at_least(0),
        ),
        ConfigDef(
            "log.cleaner.dedupe.buffer.size",
            ConfigType.LONG,
            "134217728",
            "memory for the key map of one cleaning pass",
            _at_least(1024),
        ),
        ConfigDef(
            "log.cleaner.io.max.bytes.per.second",
            ConfigType.DOUBLE,
            "1.7976931348623157E308",
            "bytes the cleaner reads and writes per second at most",
        ),
        ConfigDef(
            "log.flush.scheduler.interval.ms",
            ConfigType.LONG,
            str(LONG_MAX),
            "how often logs are checked for flush.ms",
            _at_least(0),
        ),
        ConfigDef(
            "log.flush.offset.checkpoint.interval.ms",
            ConfigType.INT,
            "60000",
            "how often the recovery point is checkpointed",
            _at_least(0),
        ),
        ConfigDef(
            "connections.max.idle.ms",
            ConfigType.LONG,
            "600000",
            "close connections idle for longer than this",
            _at_least(1),
        ),
        # Connection limits (Kafka's ConnectionQuotas, KIP-308, KIP-402, KIP-612): a listener's
        # own limits are set as listener.name.<name>.max.connections and
        # listener.name.<name>.max.connection.creation.rate.
        ConfigDef(
            "max.connections",
            ConfigType.INT,
            "2147483647",
            "most connections open at once over every listener; past it the listeners accept "
            "no more until one closes (not the inter-broker listener, where there are others)",
            _at_least(0),
        ),
        ConfigDef(
            "max.connections.per.ip",
            ConfigType.INT,
            "2147483647",
            "most connections open at once from one IP address; one more is closed at once",
            _at_least(0),
        ),
        ConfigDef(
            "max.connections.per.ip.overrides",
            ConfigType.STRING,
            "",
            "per-address exceptions to max.connections.per.ip: HOST_OR_IP:COUNT pairs, "
            "comma-separated",
            _per_ip_overrides_check,
        ),
        ConfigDef(
            "max.connection.creation.rate",
            ConfigType.INT,
            "2147483647",
            "most new connections per second over every listener but the inter-broker one, "
            "measured over quota.window.num samples; past it the listeners wait",
            _at_least(0),
        ),
        ConfigDef(
            "quota.window.num",
            ConfigType.INT,
            "11",
            "samples the connection creation rate (and client quotas) are measured over",
            _at_least(1),
        ),
        ConfigDef(
            "quota.window.size.seconds",
            ConfigType.INT,
            "1",
            "length of one sample of the connection creation rate (and client quotas)",
            _at_least(1),
        ),
        ConfigDef(
            "telemetry.max.bytes",
            ConfigType.INT,
            "1048576",
            "largest metrics push a client may make (KIP-714), decompressed",
            _at_least(1),
        ),
        ConfigDef(
            "socket.request.max.bytes",
            ConfigType.INT,
            "104857600",
            "largest request accepted",
            _at_least(1),
        ),
        # Kafka's default is -1 (unbounded); a bound by default, because a broker's memory is
        # finite and this is what keeps many clients sending large requests from exhausting it.
        # 512 MiB holds five requests of socket.request.max.bytes, or hundreds of typical ones.
        ConfigDef(
            "queued.max.request.bytes",
            ConfigType.LONG,
            "536870912",
            "bytes of requests received and not yet handled, over all connections, past which "
            "connections stop reading until some are handled (<= 0: unbounded)",
            read_only=True,
        ),
        ConfigDef("cluster.id", ConfigType.STRING, None, "cluster id (made on first start)"),
        # The Prometheus endpoint (odradek.server.metrics); unset: no metrics are counted or served.
        ConfigDef(
            "metrics.listener",
            ConfigType.STRING,
            None,
            "[http://|https://]HOST:PORT of the Prometheus endpoint /metrics and the web console "
            "(port 0: any free port; https: TLS with the broker's ssl.keystore.*, or "
            "listener.name.metrics.ssl.*)",
            _http_listener_check,
            True,
        ),
        # The web console (odradek.console), served on metrics.listener beside /metrics. It is
        # a Kafka client of the cluster like any other, so ACLs apply to its principal.
        ConfigDef(
            "console.enabled",
            ConfigType.BOOLEAN,
            "true",
            "serve the web console on metrics.listener (http://HOST:PORT/)",
            read_only=True,
        ),
        ConfigDef(
            "console.bootstrap.servers",
            ConfigType.STRING,
            None,
            "where the console's client connects (default: this broker's first listener)",
            read_only=True,
        ),
        ConfigDef(
            "console.allowed.hosts",
            ConfigType.LIST,
            "",
            "host names besides this machine's (and IP addresses) that the console's API "
            "answers under; * for any (a page of another site that resolves its name to this "
            "address is refused)",
            read_only=True,
        ),
        ConfigDef(
            "console.client.config",
            ConfigType.STRING,
            None,
            "a Kafka client properties file for the console's connection (security.protocol, "
            "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)",
            _client_config_check,
            read_only=True,
        ),
        # The schema registry (odradek.registry): Confluent's REST API on its own HTTP listener,
        # a client of the cluster as the console is (console.bootstrap.servers and
        # console.client.config say how it connects).
        ConfigDef(
            "schema.registry.listener",
            ConfigType.STRING,
            None,
            "[http://|https://]HOST:PORT of the schema registry's HTTP API (Confluent Schema "
            "Registry's; port 0: any free port; https: TLS with the broker's ssl.keystore.*, or "
            "listener.name.schema_registry.ssl.*); empty: no registry; unset: none, except for "
            "odradek serve's lone broker (no zookeeper.connect), which serves it on "
            "127.0.0.1:8081 when that port is free",
            _registry_listener_check,
            True,
        ),
        ConfigDef(
            "schema.registry.authentication.method",
            ConfigType.STRING,
            "NONE",
            "NONE, or BASIC: HTTP basic authentication against the broker's users (PLAIN users "
            "of sasl.jaas.config, SCRAM credentials); with super.users set only they may change "
            "compatibility levels and modes",
            _one_of("NONE", "BASIC"),
            True,
        ),
        # Topics as Iceberg tables (odradek.iceberg): where the tables' catalog and files are.
        ConfigDef(
            "iceberg.catalog.type",
            ConfigType.STRING,
            "sql",
            "sql (pyiceberg's SQL catalog, an SQLAlchemy database) or rest (an Iceberg REST "
            "catalog at iceberg.catalog.uri)",
            _one_of("sql", "rest"),
            True,
        ),
        ConfigDef(
            "iceberg.catalog.uri",
            ConfigType.STRING,
            None,
            "the catalog: an SQLAlchemy URI (sql) or the REST catalog's URL (rest, required); "
            "unset: sqlite:///<first log dir>/iceberg/catalog.db",
            read_only=True,
        ),
        ConfigDef(
            "iceberg.warehouse",
            ConfigType.STRING,
            None,
            "where table files are written: a directory or a file IO URL (s3://..., with "
            "pyiceberg's properties as iceberg.catalog.<property>); unset: <first log "
            "dir>/iceberg/warehouse. With a rest catalog: the warehouse asked of it (its name "
            "or location; unset: the catalog's default)",
            read_only=True,
        ),
        # A cluster's metadata store (odradek.cluster.metadata.zookeeper.store); unset: the single
        # broker's file.
        ConfigDef(
            "zookeeper.connect",
            ConfigType.STRING,
            None,
            "ZooKeeper's host:port[,host:port...][/chroot]",
            read_only=True,
        ),
        ConfigDef(
            "zookeeper.session.timeout.ms",
            ConfigType.INT,
            "18000",
            "ZooKeeper session timeout",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "zookeeper.connection.timeout.ms",
            ConfigType.INT,
            None,
            "how long to wait for ZooKeeper at start (unset: zookeeper.session.timeout.ms)",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "group.initial.rebalance.delay.ms",
            ConfigType.INT,
            "3000",
            "wait for more members before the first rebalance",
            _at_least(0),
        ),
        ConfigDef(
            "offsets.topic.num.partitions",
            ConfigType.INT,
            "50",
            "partitions of __consumer_offsets",
            _at_least(1),
            True,
        ),
        # The group coordinator's settings (odradek.coordinator).
        ConfigDef(
            "offsets.topic.segment.bytes",
            ConfigType.INT,
            "104857600",
            "segment size of __consumer_offsets",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "offsets.retention.minutes",
            ConfigType.INT,
            "10080",
            "how long committed offsets outlive an empty group (or their commit)",
            _at_least(1),
        ),
        ConfigDef(
            "offsets.retention.check.interval.ms",
            ConfigType.LONG,
            "600000",
            "how often expired offsets are removed",
            _at_least(1),
        ),
        ConfigDef(
            "offsets.commit.timeout.ms",
            ConfigType.INT,
            "5000",
            "how long a group coordinator's answer waits for its records to be replicated",
            _at_least(1),
        ),
        ConfigDef(
            "offset.metadata.max.bytes",
            ConfigType.INT,
            "4096",
            "largest metadata string of a committed offset",
            _at_least(0),
        ),
        ConfigDef(
            "group.min.session.timeout.ms",
            ConfigType.INT,
            "6000",
            "shortest session timeout a member may ask for",
            _at_least(0),
        ),
        ConfigDef(
            "group.max.session.timeout.ms",
            ConfigType.INT,
            "1800000",
            "longest session timeout a member may ask for",
            _at_least(0),
        ),
        ConfigDef(
            "group.max.size", ConfigType.INT, "2147483647", "most members of a group", _at_least(1)
        ),
        # KIP-848 consumer groups (group.protocol=consumer;
        # odradek.coordinator.group.consumer_protocol).
        ConfigDef(
            "group.consumer.heartbeat.interval.ms",
            ConfigType.INT,
            "5000",
            "how often consumer group members heartbeat",
            _at_least(1),
        ),
        ConfigDef(
            "group.consumer.session.timeout.ms",
            ConfigType.INT,
            "45000",
            "how long a consumer group member may go without a heartbeat",
            _at_least(1),
        ),
        ConfigDef(
            "group.consumer.assignors",
            ConfigType.LIST,
            "uniform,range",
            "server-side assignors of consumer groups, the first the default",
        ),
        ConfigDef(
            "group.consumer.max.size",
            ConfigType.INT,
            "2147483647",
            "most members of a consumer group",
            _at_least(1),
        ),
        # Share groups (KIP-932; odradek.coordinator.group.share_group, odradek.cluster.share).
        ConfigDef(
            "group.share.heartbeat.interval.ms",
            ConfigType.INT,
            "5000",
            "how often share group members heartbeat",
            _at_least(1),
        ),
        ConfigDef(
            "group.share.session.timeout.ms",
            ConfigType.INT,
            "45000",
            "how long a share group member may go without a heartbeat",
            _at_least(1),
        ),
        ConfigDef(
            "group.share.max.size",
            ConfigType.INT,
            "200",
            "most members of a share group",
            _at_least(1),
        ),
        ConfigDef(
            "group.share.record.lock.duration.ms",
            ConfigType.INT,
            "30000",
            "how long a share group member holds the records it acquired",
            _at_least(1000),
        ),
        ConfigDef(
            "group.share.delivery.count.limit",
            ConfigType.INT,
            "5",
            "deliveries of a record to share group members before it is archived",
            _at_least(2),
        ),
        ConfigDef(
            "group.share.partition.max.record.locks",
            ConfigType.INT,
            "2000",
            "most records of a partition acquired at once by a share group",
            _at_least(100),
        ),
        ConfigDef(
            "group.share.max.share.sessions",
            ConfigType.INT,
            "2000",
            "most share sessions (ShareFetch) a broker keeps",
            _at_least(1),
        ),
        # Streams groups (KIP-1071; odradek.coordinator.group.streams_group).
        ConfigDef(
            "group.streams.heartbeat.interval.ms",
            ConfigType.INT,
            "5000",
            "how often streams group members heartbeat",
            _at_least(1),
        ),
        ConfigDef(
            "group.streams.session.timeout.ms",
            ConfigType.INT,
            "45000",
            "how long a streams group member may go without a heartbeat",
            _at_least(1),
        ),
        ConfigDef(
            "group.streams.max.size",
            ConfigType.INT,
            "2147483647",
            "most members of a streams group",
            _at_least(1),
        ),
        ConfigDef(
            "group.streams.num.standby.replicas",
            ConfigType.INT,
            "0",
            "standby replicas of each stateful task of a streams group",
            _at_least(0),
        ),
        ConfigDef(
            "group.streams.num.warmup.replicas",
            ConfigType.INT,
            "2",
            "most warm-up tasks a streams group runs at a time (as in Kafka 4.4, the assignor "
            "places none yet)",
            _at_least(0),
        ),
        ConfigDef(
            "group.streams.acceptable.recovery.lag",
            ConfigType.LONG,
            "10000",
            "the changelog lag within which a streams group member's state counts as caught up "
            "(told to the members in the heartbeat)",
            _at_least(0),
        ),
        ConfigDef(
            "group.streams.task.offset.interval.ms",
            ConfigType.INT,
            "60000",
            "how often streams group members report their tasks' changelog offsets",
            _at_least(1),
        ),
        ConfigDef(
            "group.consumer.migration.policy",
            ConfigType.STRING,
            "bidirectional",
            "whether a consumer-protocol member joining a non-empty classic group converts it "
            "to a consumer group (upgrade, bidirectional) or is refused (downgrade, disabled)",
            _one_of("bidirectional", "upgrade", "downgrade", "disabled"),
        ),
        # The share coordinator's settings (odradek.coordinator.share.runtime).
        ConfigDef(
            "share.coordinator.state.topic.num.partitions",
            ConfigType.INT,
            "50",
            "partitions of __share_group_state",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "share.coordinator.state.topic.replication.factor",
            ConfigType.SHORT,
            "3",
            "replication factor of __share_group_state (fewer while fewer brokers are live)",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "share.coordinator.state.topic.min.isr",
            ConfigType.SHORT,
            "2",
            "min.insync.replicas of __share_group_state (at most its replication factor)",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "share.coordinator.state.topic.segment.bytes",
            ConfigType.INT,
            "104857600",
            "segment size of __share_group_state",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "share.coordinator.snapshot.update.records.per.snapshot",
            ConfigType.INT,
            "500",
            "ShareUpdate records written for a share-partition before its state is written "
            "whole again as a ShareSnapshot",
            _at_least(0),
            True,
        ),
        # The transaction coordinator's settings (odradek.coordinator.transaction.runtime).
        ConfigDef(
            "transaction.state.log.num.partitions",
            ConfigType.INT,
            "50",
            "partitions of __transaction_state",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "transaction.state.log.replication.factor",
            ConfigType.SHORT,
            "3",
            "replication factor of __transaction_state (fewer while fewer brokers are live)",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "transaction.state.log.min.isr",
            ConfigType.INT,
            "2",
            "min.insync.replicas of __transaction_state (at most its replication factor)",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "transaction.state.log.segment.bytes",
            ConfigType.INT,
            "104857600",
            "segment size of __transaction_state",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "transaction.max.timeout.ms",
            ConfigType.INT,
            "900000",
            "longest transaction.timeout.ms a producer may ask for",
            _at_least(1),
        ),
        ConfigDef(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            ConfigType.INT,
            "10000",
            "how often the coordinator aborts transactions past their timeout",
            _at_least(1),
            True,
        ),
        ConfigDef(
            "transaction.partition.verification.enable",
            ConfigType.BOOLEAN,
            "true",
            "check with the coordinator that a transactional produce goes to a partition added "
            "to its transaction (KIP-890)",
        ),
        ConfigDef(
            "max.incremental.fetch.session.cache.slots",
            ConfigType.INT,
            "1000",
            "most incremental fetch sessions (KIP-227) the broker keeps",
            _at_least(0),
            True,
        ),
        ConfigDef(
            "min.incremental.fetch.session.eviction.ms",
            ConfigType.INT,
            "120000",
            "how long a fetch session must be idle before a new one may take its slot",
            _at_least(0),
            True,
        ),
        # Replication (odradek.cluster: the ISR, the follower fetcher, the controller).
        ConfigDef(
            "offsets.topic.replication.factor",
            ConfigType.SHORT,
            "3",
            "replication factor of __consumer_offsets (fewer while fewer brokers are live)",
            _at_least(1),
        ),
        ConfigDef(
            "replica.lag.time.max.ms",
            ConfigType.LONG,
            "30000",
            "a follower not caught up for this long leaves the ISR",
            _at_least(1),
        ),
        ConfigDef(
            "replica.fetch.max.bytes",
            ConfigType.INT,
            "1048576",
            "bytes a follower asks per partition",
            _at_least(0),
        ),
        ConfigDef(
            "replica.fetch.response.max.bytes",
            ConfigType.INT,
            "10485760",
            "bytes a follower asks per fetch",
            _at_least(0),
        ),
        ConfigDef(
            "replica.fetch.wait.max.ms",
            ConfigType.INT,
            "500",
            "how long a follower's fetch waits for data at the leader",
            _at_least(0),
        ),
        ConfigDef(
            "replica.fetch.min.bytes",
            ConfigType.INT,
            "1",
            "bytes a follower's fetch waits for",
            _at_least(1),
        ),
        ConfigDef(
            "num.replica.fetchers",
            ConfigType.INT,
            "1",
            "fetchers (each a connection) a follower runs for each leader; its partitions are "
            "spread over them",
            _at_least(1),
        ),
        ConfigDef(
            "replica.fetch.backoff.ms",
            ConfigType.INT,
            "1000",
            "pause after a follower's fetch failed",
            _at_least(0),
        ),
        ConfigDef(
            "leader.replication.throttled.rate",
            ConfigType.LONG,
            str(LONG_MAX),
            "bytes/s this broker sends to out-of-sync followers of throttled replicas",
            _at_least(0),
        ),
        ConfigDef(
            "follower.replication.throttled.rate",
            ConfigType.LONG,
            str(LONG_MAX),
            "bytes/s this broker copies as an out-of-sync follower of throttled replicas",
            _at_least(0),
        ),
        ConfigDef(
            "replica.alter.log.dirs.io.max.bytes.per.second",
            ConfigType.LONG,
            str(LONG_MAX),
            "accepted for Kafka's tools; no effect: replicas never move between log dirs here",
            _at_least(0),
        ),
        ConfigDef(
            "replication.quota.window.num",
            ConfigType.INT,
            "11",
            "samples the replication throttle's rate is measured over",
            _at_least(1),
        ),
        ConfigDef(
            "replication.quota.window.size.seconds",
            ConfigType.INT,
            "1",
            "length of one sample of the replication throttle",
            _at_least(1),
        ),
        ConfigDef(
            "replica.socket.timeout.ms",
            ConfigType.INT,
            "30000",
            "timeout of a follower's requests to its leader",
            _at_least(1),
        ),
        ConfigDef(
            "replica.selector.class",
            ConfigType.STRING,
            None,
            "KIP-392: RackAwareReplicaSelector lets consumers read from a replica in their rack",
        ),
        ConfigDef("broker.rack", ConfigType.STRING, None, "this broker's rack", read_only=True),
        ConfigDef(
            "auto.leader.rebalance.enable",
            ConfigType.BOOLEAN,
            "true",
            "move leadership back to preferred replicas",
        ),
        ConfigDef(
            "leader.imbalance.per.broker.percentage",
            ConfigType.INT,
            "10",
            "share of a broker's partitions led elsewhere that triggers a rebalance",
            _at_least(0),
        ),
        ConfigDef(
            "leader.imbalance.check.interval.seconds",
            ConfigType.LONG,
            "300",
            "how often the controller checks leader imbalance",
            _at_least(1),
        ),
        ConfigDef(
            "controlled.shutdown.enable",
            ConfigType.BOOLEAN,
            "true",
            "move leaderships away before a broker stops",
        ),
        ConfigDef(
            "authorizer.class.name",
            ConfigType.STRING,
            "",
            "Kafka's ACL authorizer (StandardAuthorizer or AclAuthorizer) to check requests with",
            read_only=True,
        ),
        ConfigDef(
            "super.users",
            ConfigType.STRING,
            "",
            "principals (User:name) that may do anything, separated by semicolons",
            read_only=True,
        ),
        ConfigDef(
            "allow.everyone.if.no.acl.found",
            ConfigType.BOOLEAN,
            "false",
            "allow a resource no ACL names to everyone",
            read_only=True,
        ),
    ]
}
for _d, _synonym in TOPIC_CONFIGS.values():
    if _synonym and _synonym not in BROKER_CONFIGS:
        BROKER_CONFIGS[_synonym] = ConfigDef(_synonym, _d.kind, _d.default, _d.doc, _d.check)

# Where a setting differs from Apache Kafka's (4.x; Kafka 3.9 for its ZooKeeper mode), for the
# configuration reference (`python -m odradek.docs`). A setting not named here has Kafka's
# default and meaning; one Kafka has and odradek lacks is warned about at start as unknown. A
# topic setting's text applies to its broker synonym too.
KAFKA_DIFFERENCES: dict[str, str] = {
    "queued.max.request.bytes": "Kafka's default is -1 (unbounded) and it charges a request's "
    "announced size up front; odradek bounds the bytes that have arrived (512 MiB), and a request "
    "larger than the bound is still served once it waits longest.",
    "node.id": "Kafka requires it (no default); a lone odradek broker is 1.",
    "broker.id": "Kafka 3.9's name (ZooKeeper mode). Unset or -1 means node.id here; Kafka "
    "generates an id instead.",
    "log.dir": "Kafka's default is /tmp/kafka-logs.",
    "listeners": "Kafka's default PLAINTEXT://:9092 listens on every interface; odradek's only on "
    "127.0.0.1. A bare HOST:PORT is a PLAINTEXT listener.",
    "cluster.id": "odradek's own: the id a lone broker takes when it first starts (Kafka sets it "
    "with kafka-storage format, or in ZooKeeper's /cluster/id); made up when unset.",
    "sasl.enabled.mechanisms": "GSSAPI (Kerberos, Kafka's default) is not implemented and is "
    "ignored: a SASL listener that enables none of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and "
    "OAUTHBEARER stops the start.",
    "sasl.oauthbearer.jwks.endpoint.url": "Setting it is enough to check signed tokens: Kafka "
    "also needs its OAuthBearerValidatorCallbackHandler named as the listener's server callback "
    "handler (odradek ignores that setting). A file: or https: URL.",
    "sasl.mechanism.inter.broker.protocol": "Kafka's default is GSSAPI; unset here means the "
    "inter-broker listener's first enabled mechanism.",
    "ssl.keystore.type": "Only PEM; Kafka's default is JKS (JKS and PKCS12 stores are refused).",
    "ssl.truststore.type": "Only PEM; Kafka's default is JKS (JKS and PKCS12 stores are refused).",
    "ssl.principal.mapping.rules": "Only DEFAULT: other rules are refused.",
    "metrics.listener": "odradek's own: Kafka exposes JMX MBeans instead; the metric names are "
    "those the Prometheus JMX exporter gives Kafka's MBeans.",
    "console.enabled": "odradek's own (the web console).",
    "console.bootstrap.servers": "odradek's own (the web console).",
    "console.allowed.hosts": "odradek's own (the web console).",
    "console.client.config": "odradek's own (the web console).",
    "schema.registry.listener": "odradek's own: Kafka has no schema registry; Confluent Schema "
    "Registry's REST API, served by the broker, its schemas in the _schemas topic as Confluent's "
    "registry keeps them.",
    "schema.registry.authentication.method": "Confluent Schema Registry's name; odradek's "
    "users are the broker's own.",
    "iceberg.mode": "odradek's own (Redpanda's name and values): Kafka has no Iceberg tables.",
    "iceberg.namespace": "odradek's own: Kafka has no Iceberg tables.",
    "iceberg.partition.spec": "odradek's own (Redpanda's syntax): Kafka has no Iceberg tables.",
    "iceberg.commit.interval.ms": "odradek's own (a topic setting; Redpanda's is a cluster "
    "setting, iceberg_target_lag_ms): Kafka has no Iceberg tables.",
    "iceberg.catalog.type": "odradek's own: Kafka has no Iceberg tables.",
    "iceberg.catalog.uri": "odradek's own: Kafka has no Iceberg tables.",
    "iceberg.warehouse": "odradek's own: Kafka has no Iceberg tables.",
    "zookeeper.connect": "Kafka 3.9's (Kafka 4 has no ZooKeeper mode): unset, odradek runs as a "
    "lone broker with its metadata in a local file.",
    "zookeeper.session.timeout.ms": "Kafka 3.9's (Kafka 4 has no ZooKeeper mode).",
    "zookeeper.connection.timeout.ms": "Kafka 3.9's (Kafka 4 has no ZooKeeper mode). A broker "
    "that cannot reach ZooKeeper in time at start exits with status 1.",
    "leader.imbalance.per.broker.percentage": "Kafka 3.9's; Kafka 4 no longer has it.",
    "min.incremental.fetch.session.eviction.ms": "A setting here; a fixed value (120000) in Kafka.",
    "leader.replication.throttled.rate": "A dynamic broker config in Kafka (kafka-configs "
    "--entity-type brokers), as here: set it with IncrementalAlterConfigs, or statically.",
    "follower.replication.throttled.rate": "A dynamic broker config in Kafka (kafka-configs "
    "--entity-type brokers), as here: set it with IncrementalAlterConfigs, or statically.",
    "replica.alter.log.dirs.io.max.bytes.per.second": "Accepted for Kafka's tools, no effect: "
    "replicas never move between the log dirs of one broker here.",
    "log.flush.scheduler.interval.ms": "Accepted, not read: flush.ms is checked every 0.5 s.",
    "segment.jitter.ms": "Accepted, not applied: no jitter is added to segment rolls.",
    "offsets.topic.replication.factor": "Fewer replicas while fewer brokers are live (Kafka "
    "refuses to create the topic until enough are).",
    "transaction.state.log.replication.factor": "Fewer replicas while fewer brokers are live "
    "(Kafka refuses to create the topic until enough are).",
    "share.coordinator.state.topic.replication.factor": "Fewer replicas while fewer brokers "
    "are live (Kafka refuses to create the topic until enough are).",
    "group.consumer.heartbeat.interval.ms": "While a group settles (a member is still to revoke "
    "or receive partitions) the broker asks for heartbeats every 200 ms instead, so a group "
    "is stable in well under a second.",
    "file.delete.delay.ms": "A segment that leaves the log has its files removed at once; its "
    "open file is kept this long for reads already under way (Kafka renames the files to "
    ".deleted and removes them after the delay).",
    "authorizer.class.name": "Any of Kafka's authorizer class names means Kafka's ACL rules "
    "(StandardAuthorizer's); another class stops the start.",
    "replica.selector.class": "Only Kafka's RackAwareReplicaSelector (or unset: the leader).",
}


def parse_properties(text: str) -> dict[str, str]:
    """Java-style properties: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments."""
    props: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        while stripped.endswith("\\"):
            stripped = stripped[:-1] + next(lines, "").strip()
        sep = min((i for i in (stripped.find("="), stripped.find(":")) if i >= 0), default=-1)
        if sep < 0:
            props[stripped] = ""
        else:
            props[stripped[:sep].strip()] = stripped[sep + 1 :].strip()
    return props


def _host_port(listener: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` or ``host:port`` → (host, port)."""
    address = listener.split("://", 1)[-1]
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ConfigError(f"listener {listener!r} has no port")
    return host.strip("[]") or "0.0.0.0", int(port)


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """One entry of ``listeners`` (or ``advertised.listeners``): ``NAME://host:port`` with the
    security protocol ``listener.security.protocol.map`` gives the name."""

    name: str
    protocol: str
    host: str
    port: int

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def _listener_specs(entries: list[str], protocols: Mapping[str, str]) -> list[ListenerSpec]:
    specs: list[ListenerSpec] = []
    for entry in entries:
        # A bare host:port (the form of older odradek configs) is a PLAINTEXT listener.
        name = entry.split("://", 1)[0].upper() if "://" in entry else "PLAINTEXT"
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError(
                f"listener {name} has no security protocol in listener.security.protocol.map"
            )
        if any(s.name == name for s in specs):
            raise ConfigError(f"listener name {name} appears twice")
        specs.append(ListenerSpec(name, protocol, *_host_port(entry)))
    return specs


class BrokerConfig:
    """The broker's settings: the properties given, over Kafka's defaults."""

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self.props: dict[str, str] = {}
        # Parsed values by name: settings are read on every partition hosted and on request
        # paths, and a config never changes (a dynamic change makes a new one). Lists are parsed
        # afresh each time, since a caller may change the one it gets.
        self._parsed: dict[str, object] = {}
        for name, raw in (props or {}).items():
            definition = BROKER_CONFIGS.get(name)
            if definition is not None:
                definition.parse(raw)  # fail at start, not on first use
            self.props[name] = raw
        if self.raw("iceberg.catalog.type") == "rest" and not self.raw("iceberg.catalog.uri"):
            raise ConfigError("iceberg.catalog.type=rest needs iceberg.catalog.uri (its URL)")

    @classmethod
    def load(cls, path: Path | None, overrides: Iterable[str] = ()) -> BrokerConfig:
        props = parse_properties(path.read_text()) if path else {}
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"override {item!r} is not key=value")
            props[key.strip()] = value.strip()
        return cls(props)

    def raw(self, name: str) -> str | None:
        if name in self.props:
            return self.props[name]
        definition = BROKER_CONFIGS.get(name)
        return definition.default if definition else None

    def get(self, name: str) -> object:
        if name in self._parsed:
            return self._parsed[name]
        raw = self.raw(name)
        value = None if raw is None else BROKER_CONFIGS[name].parse(raw)
        if not isinstance(value, list):
            self._parsed[name] = value
        return value

    def get_int(self, name: str) -> int:
        value = self.get(name)
        assert isinstance(value, int), name
        return value

    def get_bool(self, name: str) -> bool:
        return bool(self.get(name))

    @property
    def node_id(self) -> int:
        broker_id = self.get("broker.id")
        return (
            broker_id if isinstance(broker_id, int) and broker_id >= 0 else self.get_int("node.id")
        )

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        """Kafka's fallback: the session timeout when no connection timeout is set."""
        value = self.get("zookeeper.connection.timeout.ms")
        return value if isinstance(value, int) else self.get_int("zookeeper.session.timeout.ms")

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.get("log.dirs")
        if isinstance(dirs, list) and dirs:
            return [Path(d) for d in dirs]
        return [Path(str(self.get("log.dir")))]

    @property
    def listener(self) -> tuple[str, int]:
        listeners = self.get("listeners")
        assert isinstance(listeners, list) and listeners, "listeners is empty"
        return _host_port(listeners[0])

    @property
    def metrics_listener(self) -> tuple[str, int] | None:
        """Where ``/metrics`` is served, or None when metrics are off."""
        raw = self.raw("metrics.listener")
        return _host_port(_without_scheme(raw)) if raw else None

    @property
    def metrics_tls(self) -> bool:
        """Whether ``metrics.listener`` is ``https://``."""
        return (self.raw("metrics.listener") or "").startswith("https://")

    @property
    def schema_registry_listener(self) -> tuple[str, int] | None:
        """Where the schema registry's HTTP API is served, or None when it is off."""
        raw = self.raw("schema.registry.listener")
        if not raw:
            return None
        return _host_port(_without_scheme(raw))

    @property
    def schema_registry_tls(self) -> bool:
        """Whether the schema registry's listener is ``https://``."""
        return (self.raw("schema.registry.listener") or "").startswith("https://")

    def iceberg_catalog(self) -> dict[str, str]:
        """pyiceberg's catalog properties from the iceberg.* settings (others given as
        ``iceberg.catalog.<property>`` pass through, e.g. s3.endpoint)."""
        properties = {
            name.removeprefix("iceberg.catalog."): value
            for name, value in self.props.items()
            if name.startswith("iceberg.catalog.")
            and name not in ("iceberg.catalog.type", "iceberg.catalog.uri")
        }
        kind = str(self.get("iceberg.catalog.type"))
        uri, warehouse = self.raw("iceberg.catalog.uri"), self.raw("iceberg.warehouse")
        if kind == "rest":
            # The REST catalog decides where tables live; a warehouse, when given, is passed
            # to it (its name or location, as that catalog reads it).
            assert uri, "checked by __init__"
            properties.update({"type": kind, "uri": uri})
            if warehouse:
                properties["warehouse"] = warehouse
            return properties
        data_dir = self.log_dirs[0].absolute() / "iceberg"
        properties.update(
            {
                "type": kind,
                "uri": uri or f"sqlite:///{data_dir / 'catalog.db'}",
                "warehouse": warehouse or f"file://{data_dir / 'warehouse'}",
            }
        )
        return properties

    def advertised(self, bound: tuple[str, int]) -> tuple[str, int]:
        """The address clients are told to use; ``bound`` is where the socket really listens."""
        advertised = self.get("advertised.listeners")
        if isinstance(advertised, list) and advertised:
            return _host_port(advertised[0])
        host, port = bound
        return ("127.0.0.1" if host in ("0.0.0.0", "", "::") else host), port

    def security_protocol_map(self) -> dict[str, str]:
        protocols: dict[str, str] = {}
        for pair in str(self.get("listener.security.protocol.map")).split(","):
            name, sep, protocol = pair.strip().partition(":")
            protocol = protocol.strip().upper()
            if not sep or protocol not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"listener.security.protocol.map: {pair.strip()!r} is not "
                    f"NAME:{'|'.join(SECURITY_PROTOCOLS)}"
                )
            protocols[name.strip().upper()] = protocol
        return protocols

    def listener_specs(self) -> list[ListenerSpec]:
        """Every entry of ``listeners``, first the one the broker was started with first."""
        listeners = self.get("listeners")
        assert isinstance(listeners, list) and listeners, "listeners is empty"
        return _listener_specs(listeners, self.security_protocol_map())

    def advertised_specs(self) -> dict[str, tuple[str, int]]:
        """``advertised.listeners`` by listener name (listeners not named advertise where they
        are bound)."""
        advertised = self.get("advertised.listeners")
        if not isinstance(advertised, list):
            return {}
        known = {s.name for s in self.listener_specs()}
        # An advertised name must be a listener (Kafka refuses the config otherwise); a bare
        # host:port advertises the first listener.
        first = self.listener_specs()[0].name
        found: dict[str, tuple[str, int]] = {}
        for entry in advertised:
            name = entry.split("://", 1)[0].upper() if "://" in entry else first
            if name not in known:
                raise ConfigError(f"advertised.listeners names {name}, which is not a listener")
            found[name] = _host_port(entry)
        return found

    def inter_broker_listener(self) -> str:
        """The listener brokers of a cluster register as theirs (the first unless named)."""
        specs = self.listener_specs()
        name = self.raw("inter.broker.listener.name")
        if name is None:
            return specs[0].name
        if not any(s.name == name.upper() for s in specs):
            raise ConfigError(f"inter.broker.listener.name {name} is not a listener")
        return name.upper()

    def listener_setting(self, listener: str, name: str) -> str | None:
        """A setting as ``listener.name.<listener>.<name>`` gives it, else as ``name`` does."""
        prefixed = f"listener.name.{listener.lower()}.{name}"
        if prefixed in self.props:
            return self.props[prefixed]
        return self.raw(name)

    def topic_default(self, name: str) -> str:
        """A topic config's value where the topic does not set it: its broker synonym's."""
        definition, synonym = TOPIC_CONFIGS[name]
        if synonym is not None and synonym in self.props:
            return self.props[synonym]
        # Kafka derives these from coarser broker settings when the ms form is not given.
        if name == "retention.ms":
            if "log.retention.minutes" in self.props:
                return str(int(self.props["log.retention.minutes"]) * 60_000)
            if "log.retention.hours" in self.props:
                return str(int(self.props["log.retention.hours"]) * 3_600_000)
        if name == "segment.ms" and "log.roll.hours" in self.props:
            return str(int(self.props["log.roll.hours"]) * 3_600_000)
        assert definition.default is not None
        return definition.default

    def topic_source(self, name: str) -> str:
        """``static`` when the broker's properties set this config's synonym, else ``default``."""
        _, synonym = TOPIC_CONFIGS[name]
        return "static" if synonym is not None and synonym in self.props else "default"


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check names and values a client sends for a topic; returns the non-null ones."""
    valid: dict[str, str] = {}
    for name, raw in configs.items():
        if name not in TOPIC_CONFIGS:
            raise ConfigError(f"unknown topic config {name!r}")
        if raw is None:
            continue
        TOPIC_CONFIGS[name][0].parse(raw)
        valid[name] = raw
    return valid


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's effective settings, typed."""

    values: Mapping[str, str]
    # Parsed once: the produce path reads several of these per request.
    parsed: Mapping[str, object]

    @classmethod
    def resolve(cls, broker: BrokerConfig, overrides: Mapping[str, str]) -> TopicConfig:
        values = {name: overrides.get(name, broker.topic_default(name)) for name in TOPIC_CONFIGS}
        parsed = {name: TOPIC_CONFIGS[name][0].parse(raw) for name, raw in values.items()}
        return cls(values, parsed)

    def get(self, name: str) -> object:
        return self.parsed[name]

    def get_int(self, name: str) -> int:
        value = self.get(name)
        assert isinstance(value, int)
        return value

    def optional_long(self, name: str) -> int | None:
        """A LONG where Kafka's Long.MAX_VALUE means 'never'."""
        value = self.get_int(name)
        return None if value >= LONG_MAX else value
