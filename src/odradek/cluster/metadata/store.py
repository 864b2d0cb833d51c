"""Cluster metadata behind one interface, and the single broker's engine for it.

:class:`MetadataStore` is what the broker needs of cluster metadata: the cluster id; topics (name,
topic id, partition count, each partition's replica assignment, config overrides) and their
creation, deletion, growth and config changes; user configs (Kafka's ``/config/users/<name>``:
SCRAM credentials, never passwords); ACLs (each resource pattern's access control entries);
delegation tokens (KIP-48: Kafka's ``/delegation_token/tokens/<tokenId>``, without the HMAC);
producer-id blocks (Kafka's
``/latest_producer_id_block``); each partition's state (leader, leader epoch, ISR, controller
epoch) read and written with a versioned compare-and-set; and change notifications, delivered on
the broker's event loop. Two engines implement it: :class:`LocalMetadataStore` here (a JSON
snapshot and a journal of changes, a single broker) and
``odradek.cluster.metadata.zookeeper.store.ZooKeeperMetadataStore`` (Kafka's ZooKeeper layout, a
cluster).

File format of the local store: a snapshot and a journal in the first log dir. The snapshot,
``odradek-metadata.json``, is a JSON object ``{"version": 3, "cluster_id": str, "journal_seq":
int, "next_producer_id_block": int, "topics": {name: {"id": uuid, "partitions": n, "replicas":
[[node], ...], "configs": {}}}, "partition_states": {"topic/p": {"leader", "leader_epoch",
"isr", "controller_epoch", "version"}}, "features": {"epoch": n, "levels": {name: level}},
"users": {name: {config: value}}, "quotas": {entity path: {config: value}}, "brokers": {id:
{config: value}}, "groups": {group: {config: value}}, "client_metrics": {subscription: {config:
value}}, "delegation_tokens": {token id: the token's znode JSON as Kafka writes it}, "acls":
[{"resource_type": "Topic", "name": str, "pattern_type": "LITERAL", "entries": {"version": 1,
"acls": [{"principal", "permissionType", "operation", "host"}]}}]}`` (entries as Kafka's
``/kafka-acl`` znodes; quotas of entities other than a user alone, by Kafka's entity path; files
without ``users``, ``quotas``, ``brokers``, ``delegation_tokens``, ``acls`` or ``features`` have
none; no ``features``: never finalized). The journal, ``odradek-metadata.journal`` (framing in
:mod:`odradek.cluster.metadata.journal`), holds the changes made since the snapshot, one record
each: a JSON object ``{"seq": n, ...}`` with the snapshot's keys that the change touches, each
holding only the entries changed (``null`` for an entry removed; an ACL record's ``entries``
``null`` for a pattern left without any), applied in order over the snapshot. Version 1 files (no
``replicas``, no ``partition_states``) and version 2 files (no ``journal_seq``, no journal) load:
in version 1, every partition is then assigned to this node. What happens on a crash: see
:class:`LocalMetadataStore`.

Threads: both engines are called from the broker's event loop and answer with coroutines. The
ZooKeeper engine's wait for ZooKeeper happens off the loop. The local store's coroutines never
suspend (``answers_at_once``): each change appends one small record to its journal and
fdatasyncs it before it returns (a compaction now and then rewrites the snapshot), so callers
that cannot await (a coordinator's first write, a producer id) may complete them at once with
:func:`result_now`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from odradek.cluster.features import FinalizedFeatures
from odradek.cluster.metadata import journal
from odradek.quotas.entities import (
    DEFAULT_NAME,
    QUOTA_KEYS,
    USER,
    QuotaEntity,
    entity_from_path,
    entity_path,
)
from odradek.security.acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    decode_entries,
    encode_entries,
    parse_enum,
    zk_name,
)
from odradek.security.delegation_tokens import TokenInformation
from odradek.storage.fileio import fsync_directory, write_file_atomically

T = TypeVar("T")

FILE_NAME = "odradek-metadata.json"
JOURNAL_NAME = "odradek-metadata.journal"
FORMAT_VERSION = 3
# A journal smaller than this is never compacted, however small the snapshot.
COMPACT_MIN_BYTES = 1 << 20

log = logging.getLogger(__name__)


class MetadataStoreError(Exception):
    """The metadata store could not do what was asked (other than a version conflict)."""


class TopicExistsError(MetadataStoreError):
    """A topic was to be created, and another writer (another broker) made it first."""


class StaleVersionError(MetadataStoreError):
    """A compare-and-set write named a version that is no longer the current one (or asked to
    create what already exists): someone else wrote first. Re-read and decide again."""


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic. ``replicas[p]`` is partition ``p``'s replica assignment (preferred leader first);
    empty when the caller leaves the assignment to the store (the local store assigns every
    partition to its own node). ``adding`` and ``removing`` name, for each partition being
    reassigned, the replicas of ``replicas[p]`` on their way in and out (Kafka's
    ``adding_replicas`` / ``removing_replicas``; only a cluster reassigns)."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    replicas: tuple[tuple[int, ...], ...] = ()
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def replicas_of(self, partition: int) -> tuple[int, ...]:
        return self.replicas[partition] if partition < len(self.replicas) else ()


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition's leadership as the controller last wrote it (Kafka's
    LeaderIsrAndControllerEpoch).

    ``version`` is the store's version of this record (ZooKeeper's znode version): pass it back
    to :meth:`MetadataStore.write_partition_state` so the write fails if anyone wrote since."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int = 0
    # ZooKeeper's transaction id of the write that made this state (the znode's mzxid), where
    # the reader knows it; -1 otherwise. Set by the controller's reads, so that it can tell ISR
    # members that registered again since (broker epochs are registration zxids).
    written_zxid: int = field(default=-1, compare=False)
    # KIP-966's eligible leader replicas: replicas that left an ISR already below
    # min.insync.replicas, so that they hold every committed record and may lead cleanly.
    elr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class MetadataChange:
    """What changed, as told to a change listener. ``kind`` is ``"topics"`` (a topic created,
    deleted, grown or reconfigured; ``topic`` names it, or is None when any may have),
    ``"partition_state"`` (``topic`` and ``partition`` name it, ``state`` is the state as the
    store saw it at the change, None when it is gone), ``"acls"`` (some ACLs),
    ``"broker_configs"`` (this broker's dynamic configs), ``"client_quotas"`` (some entity's
    configs), ``"delegation_tokens"`` (a delegation token made, changed or removed) or
    ``"features"`` (the finalized feature levels)."""

    kind: str
    topic: str | None = None
    partition: int | None = None
    state: PartitionState | None = None


ChangeListener = Callable[[MetadataChange], None]


class MetadataStore(Protocol):
    """Cluster metadata, read and written from the broker's event loop: every call that may
    wait for a disk or ZooKeeper is a coroutine, and the wait happens off the loop."""

    @property
    def cluster_id(self) -> str: ...

    @property
    def topics(self) -> Mapping[str, TopicMetadata]:
        """The topics as last read (kept current by the store; do not mutate)."""
        ...

    @property
    def answers_at_once(self) -> bool:
        """Whether every coroutine of the store completes without suspending (the local
        store), so that :func:`result_now` may complete it."""
        ...

    async def put(self, topic: TopicMetadata) -> None:
        """Create ``topic``; :class:`TopicExistsError` if another writer made it first (the
        local store, the only writer of its file, replaces it)."""
        ...

    async def remove(self, name: str) -> None:
        """Delete a topic, its configs and its partitions' states (no error if it is gone)."""
        ...

    async def set_partitions(
        self, name: str, count: int, new_replicas: Sequence[Sequence[int]] = ()
    ) -> TopicMetadata:
        """Grow a topic to ``count`` partitions; ``new_replicas`` assigns the new ones."""
        ...

    async def set_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        """Replace the topic's config overrides."""
        ...

    async def reserve_producer_ids(self, count: int) -> int:
        """The first of ``count`` producer ids no other call, on any broker, before or after a
        restart, gets."""
        ...

    async def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """The partition's state with its version, or None if none was written."""
        ...

    async def write_partition_state(
        self, topic: str, partition: int, state: PartitionState, expected_version: int | None
    ) -> PartitionState:
        """Write ``state`` if the stored version is ``expected_version`` (None: only if there is
        no state yet). Returns it with its new version; raises :class:`StaleVersionError`."""
        ...

    async def user_configs(self, name: str) -> dict[str, str]:
        """A user's configs (``SCRAM-SHA-512`` → Kafka's credential text, …); empty if none."""
        ...

    async def broker_configs(self, broker: int) -> dict[str, str]:
        """A broker's dynamic configs (the replication throttle rates); empty if none."""
        ...

    async def set_broker_configs(self, broker: int, configs: Mapping[str, str]) -> None:
        """Replace a broker's dynamic configs (a ``"broker_configs"`` change follows)."""
        ...

    async def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        """Every client metrics subscription's configs (KIP-714's CLIENT_METRICS resources)."""
        ...

    async def set_client_metrics_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace a subscription's configs (empty: remove it); a ``"client_metrics"`` change
        follows, on every broker."""
        ...

    async def user_names(self) -> list[str]:
        """Every user with configs, sorted."""
        ...

    async def group_configs(self, group: str) -> dict[str, str]:
        """A group's configs (``share.auto.offset.reset``, …); empty if none."""
        ...

    async def set_group_configs(self, group: str, configs: Mapping[str, str]) -> None:
        """Replace a group's configs; empty configs remove them."""
        ...

    async def set_user_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace a user's configs; empty configs remove the user."""
        ...

    async def quota_configs(self) -> dict[QuotaEntity, dict[str, str]]:
        """Every client quota entity's quota configs (users, client ids, both, IPs)."""
        ...

    async def set_quota_configs(self, entity: QuotaEntity, configs: Mapping[str, str]) -> None:
        """Replace an entity's quota configs (a user's other configs, its SCRAM credentials,
        stay); a ``"client_quotas"`` change follows, on every broker."""
        ...

    async def delegation_tokens(self) -> list[TokenInformation]:
        """Every delegation token stored, expired ones included until they are removed."""
        ...

    async def put_delegation_token(self, token: TokenInformation) -> None:
        """Create or replace a token; a ``"delegation_tokens"`` change follows, on every
        broker."""
        ...

    async def remove_delegation_token(self, token_id: str) -> None:
        """Remove a token (no error if it is gone); a ``"delegation_tokens"`` change follows."""
        ...

    @property
    def acls(self) -> Mapping[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every resource pattern's ACL entries as last read (kept current by the store)."""
        ...

    async def change_acls(
        self,
        pattern: ResourcePattern,
        add: Iterable[AccessControlEntry] = (),
        remove: Iterable[AccessControlEntry] = (),
    ) -> frozenset[AccessControlEntry]:
        """Add and remove entries of one resource pattern in one atomic read-modify-write (two
        brokers changing one resource both take effect); returns the entries now stored."""
        ...

    @property
    def finalized_features(self) -> FinalizedFeatures | None:
        """The cluster's finalized feature levels as last read (kept current by the store);
        None while nobody has finalized any (the cluster runs at the defaults)."""
        ...

    async def write_finalized_features(
        self, levels: Mapping[str, int], expected_epoch: int
    ) -> FinalizedFeatures:
        """Store ``levels`` (features above level 0) if the stored epoch is ``expected_epoch``
        (0: nothing stored yet); returns them with their new, higher epoch, or raises
        :class:`StaleVersionError`. A ``"features"`` change follows, on every broker."""
        ...

    def add_listener(self, loop: asyncio.AbstractEventLoop, listener: ChangeListener) -> None:
        """Call ``listener`` on ``loop`` (via ``call_soon_threadsafe``) after each change, the
        store's own writes included."""
        ...

    def close(self) -> None: ...


class WouldWaitError(Exception):
    """:func:`result_now` was given work that must wait (for ZooKeeper): it was not done."""


def result_now(work: Coroutine[Any, Any, T]) -> T:
    """The result of ``work``, a coroutine of a store that ``answers_at_once``, completed here
    without an event loop's turn; :class:`WouldWaitError` (and ``work`` cancelled) if it
    would suspend."""
    try:
        work.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    work.close()
    raise WouldWaitError("the metadata store must be awaited")


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: the 16 bytes as URL-safe base64 without padding (22
    characters), as Kafka shows topic and cluster ids."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def new_cluster_id() -> str:
    """Kafka's format: a random UUID as 22 URL-safe base64 characters."""
    return kafka_uuid(uuid.uuid4())


class ChangeListeners:
    """Listeners registered with a store, each called on its own loop (shared by both engines)."""

    def __init__(self) -> None:
        self._listeners: list[tuple[asyncio.AbstractEventLoop, ChangeListener]] = []

    def add(self, loop: asyncio.AbstractEventLoop, listener: ChangeListener) -> None:
        self._listeners.append((loop, listener))

    def notify(self, change: MetadataChange) -> None:
        """Safe from any thread: the listeners run later, on their loops."""
        for loop, listener in self._listeners:
            if not loop.is_closed():
                loop.call_soon_threadsafe(listener, change)


class LocalMetadataStore:
    """Topics, ACLs, producer-id blocks and partition states of a single-broker cluster: a
    snapshot file and a journal of the changes since (formats in the module doc and in
    :mod:`odradek.cluster.metadata.journal`).

    A change costs one record appended to the journal and one ``fdatasync``, whatever the size
    of the state (a topic of any partition count is one record), and is applied to memory only
    once it is on disk. When the journal outgrows the snapshot (and :data:`COMPACT_MIN_BYTES`),
    the state is compacted: written whole as a new snapshot naming the last record it holds
    (``journal_seq``), then the journal is emptied.

    Crash: the snapshot is replaced by atomic rename (temp file, fsync, rename, directory
    fsync), so it is the old or the new one. Opening reads the snapshot, then replays the
    journal's records whose ``seq`` is above the snapshot's ``journal_seq`` (those at or below
    it are already in the snapshot: a crash between a compaction's rename and the journal's
    truncation leaves them), up to the first torn record, where the journal is cut before
    anything is appended. A change is acknowledged only after its record's fdatasync, so a
    torn record is a change nobody was told of.

    Thread: the broker's event loop (see the module doc: its coroutines never suspend)."""

    def __init__(self, directory: Path, cluster_id: str | None = None, node_id: int = 1) -> None:
        self.path = directory / FILE_NAME
        self.journal_path = directory / JOURNAL_NAME
        self.node_id = node_id
        self._topics: dict[str, TopicMetadata] = {}
        self._states: dict[tuple[str, int], PartitionState] = {}
        self._users: dict[str, dict[str, str]] = {}
        # Quota entities other than a user alone (whose quotas are among its configs).
        self._quotas: dict[str, dict[str, str]] = {}
        self._brokers: dict[int, dict[str, str]] = {}
        self._client_metrics: dict[str, dict[str, str]] = {}
        self._groups: dict[str, dict[str, str]] = {}
        self._tokens: dict[str, TokenInformation] = {}
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._features: FinalizedFeatures | None = None
        self._cluster_id = cluster_id or new_cluster_id()
        self.next_producer_id_block = 0
        self._listeners = ChangeListeners()
        # The last record's seq, the snapshot's seq, and the sizes that decide a compaction.
        self._seq = 0
        self._snapshot_seq = 0
        self._snapshot_bytes = 0
        self._journal_bytes = 0
        if self.path.exists():
            self._journal = self._load()
        else:
            directory.mkdir(parents=True, exist_ok=True)
            self.journal_path.unlink(missing_ok=True)  # a store never made: left from nothing
            self._journal = journal.JournalFile(self.journal_path)
            self._write_snapshot()  # fsyncs the directory: the journal's entry too

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def topics(self) -> Mapping[str, TopicMetadata]:
        return self._topics

    def _own(self, count: int) -> tuple[tuple[int, ...], ...]:
        return ((self.node_id,),) * count

    # -- the files -----------------------------------------------------------------------------

    def _load(self) -> journal.JournalFile:
        data = self.path.read_bytes()
        self._snapshot_bytes = len(data)
        state = json.loads(data)
        self._cluster_id = state["cluster_id"]
        self._snapshot_seq = self._seq = int(state.get("journal_seq", 0))
        self._apply(state)
        contents = journal.read_records(self.journal_path)
        for payload in contents.payloads:
            record = json.loads(payload)
            seq = int(record["seq"])
            if seq > self._snapshot_seq:
                self._apply(record)
            self._seq = max(self._seq, seq)
        self._journal_bytes = contents.good_end
        existed = self.journal_path.exists()
        opened = journal.JournalFile(self.journal_path)
        if contents.torn:
            log.warning(
                "%s: dropping a torn record at byte %d (a change cut short by a crash)",
                self.journal_path,
                contents.good_end,
            )
            opened.truncate(contents.good_end)
        if not existed:  # a version 2 file's first journal
            fsync_directory(self.path.parent)
        return opened

    def _apply(self, change: Mapping[str, Any]) -> None:
        """Apply a journal record, or a whole snapshot, to memory (``None`` removes a key)."""
        if "next_producer_id_block" in change:
            self.next_producer_id_block = int(change["next_producer_id_block"])
        for name, t in change.get("topics", {}).items():
            if t is None:
                self._topics.pop(name, None)
                continue
            count = int(t["partitions"])
            replicas = t.get("replicas")  # absent before format version 2
            self._topics[name] = TopicMetadata(
                name,
                uuid.UUID(t["id"]),
                count,
                dict(t["configs"]),
                tuple(tuple(r) for r in replicas) if replicas else self._own(count),
            )
        for key, s in change.get("partition_states", {}).items():
            topic, _, partition = key.rpartition("/")
            if s is None:
                self._states.pop((topic, int(partition)), None)
            else:
                self._states[(topic, int(partition))] = PartitionState(
                    s["leader"],
                    s["leader_epoch"],
                    tuple(s["isr"]),
                    s["controller_epoch"],
                    s["version"],
                    elr=tuple(s.get("elr", ())),
                )
        for name, c in change.get("users", {}).items():
            if c is None:
                self._users.pop(name, None)
            else:
                self._users[name] = dict(c)
        for path, c in change.get("quotas", {}).items():
            if c is None:
                self._quotas.pop(path, None)
            else:
                self._quotas[path] = dict(c)
        for name, c in change.get("client_metrics", {}).items():
            if c is None:
                self._client_metrics.pop(name, None)
            else:
                self._client_metrics[name] = dict(c)
        for g, c in change.get("groups", {}).items():
            if c is None:
                self._groups.pop(g, None)
            else:
                self._groups[g] = dict(c)
        for b, c in change.get("brokers", {}).items():
            if c is None:
                self._brokers.pop(int(b), None)
            else:
                self._brokers[int(b)] = dict(c)
        for token_id, t in change.get("delegation_tokens", {}).items():
            if t is None:
                self._tokens.pop(token_id, None)
            else:
                self._tokens[token_id] = TokenInformation.from_json(json.dumps(t))
        features = change.get("features")
        if features is not None:
            self._features = FinalizedFeatures(
                {name: int(level) for name, level in features["levels"].items()},
                int(features["epoch"]),
            )
        for a in change.get("acls", []):
            pattern = ResourcePattern(
                parse_enum(ResourceType, a["resource_type"]),
                a["name"],
                parse_enum(PatternType, a["pattern_type"]),
            )
            if a["entries"] is None:
                self._acls.pop(pattern, None)
            else:
                self._acls[pattern] = decode_entries(a["entries"])

    def _commit(self, change: dict[str, Any]) -> None:
        """Make ``change`` durable in the journal, then apply it; compact when it is time.
        An ``OSError`` (a full or failing disk) is raised with nothing changed."""
        seq = self._seq + 1
        payload = json.dumps({"seq": seq, **change}, sort_keys=True, separators=(",", ":"))
        self._journal_bytes = self._journal.append(payload.encode())
        self._seq = seq
        self._apply(change)
        if self._journal_bytes > max(COMPACT_MIN_BYTES, self._snapshot_bytes):
            try:
                self.compact()
            except OSError:
                # The change is in the journal already; the next change tries again.
                log.exception("cannot compact %s", self.path)

    def compact(self) -> None:
        """Write the whole state as the snapshot, then empty the journal."""
        self._write_snapshot()
        self._journal.truncate(0)
        self._journal_bytes = 0

    def _write_snapshot(self) -> None:
        encoded = self._encoded()
        write_file_atomically(self.path, encoded)
        self._snapshot_seq = self._seq
        self._snapshot_bytes = len(encoded)

    @property
    def answers_at_once(self) -> bool:
        return True

    def _encoded(self) -> bytes:
        state: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "cluster_id": self._cluster_id,
            "journal_seq": self._seq,
            "next_producer_id_block": self.next_producer_id_block,
            "topics": {t.name: _topic_json(t) for t in self._topics.values()},
            "partition_states": {
                f"{topic}/{partition}": _state_json(s)
                for (topic, partition), s in self._states.items()
            },
            "users": self._users,
            "quotas": self._quotas,
            "brokers": {str(b): c for b, c in sorted(self._brokers.items())},
            "client_metrics": self._client_metrics,
            "groups": self._groups,
            "delegation_tokens": {
                token_id: json.loads(t.to_json()) for token_id, t in sorted(self._tokens.items())
            },
            "acls": [
                _acl_json(pattern, entries) for pattern, entries in sorted(self._acls.items())
            ],
        }
        if self._features is not None:
            state["features"] = _features_json(self._features)
        # Compact separators: the C encoder (an indent makes json use the Python one).
        return json.dumps(state, sort_keys=True, separators=(",", ":")).encode()

    # -- changes -------------------------------------------------------------------------------

    async def reserve_producer_ids(self, count: int) -> int:
        first = self.next_producer_id_block
        self._commit({"next_producer_id_block": first + count})
        return first

    async def put(self, topic: TopicMetadata) -> None:
        if len(topic.replicas) != topic.partitions:
            topic = replace(topic, replicas=self._own(topic.partitions))
        self._commit({"topics": {topic.name: _topic_json(topic)}})
        self._listeners.notify(MetadataChange("topics", topic.name))

    async def remove(self, name: str) -> None:
        states = {f"{t}/{p}": None for t, p in self._states if t == name}
        self._commit({"topics": {name: None}, "partition_states": states})
        self._listeners.notify(MetadataChange("topics", name))

    async def set_partitions(
        self, name: str, count: int, new_replicas: Sequence[Sequence[int]] = ()
    ) -> TopicMetadata:
        topic = self._topics[name]
        added = tuple(tuple(r) for r in new_replicas) or self._own(count - topic.partitions)
        updated = replace(topic, partitions=count, replicas=topic.replicas + added)
        await self.put(updated)
        return updated

    async def set_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        topic = replace(self._topics[name], configs=dict(configs))
        await self.put(topic)
        return topic

    async def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self._states.get((topic, partition))

    async def write_partition_state(
        self, topic: str, partition: int, state: PartitionState, expected_version: int | None
    ) -> PartitionState:
        current = self._states.get((topic, partition))
        current_version = None if current is None else current.version
        if current_version != expected_version:
            raise StaleVersionError(
                f"partition state of {topic}-{partition} is at version {current_version}, "
                f"not {expected_version}"
            )
        written = replace(state, version=0 if current is None else current.version + 1)
        self._commit({"partition_states": {f"{topic}/{partition}": _state_json(written)}})
        self._listeners.notify(MetadataChange("partition_state", topic, partition, written))
        return written

    async def user_configs(self, name: str) -> dict[str, str]:
        return self.user_configs_now(name)

    def user_configs_now(self, name: str) -> dict[str, str]:
        """:meth:`user_configs` from memory, for callers that are not coroutines."""
        return dict(self._users.get(name, {}))

    async def user_names(self) -> list[str]:
        return sorted(self._users)

    async def set_user_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self._commit({"users": {name: dict(configs) if configs else None}})

    async def quota_configs(self) -> dict[QuotaEntity, dict[str, str]]:
        found: dict[QuotaEntity, dict[str, str]] = {}
        for name, configs in self._users.items():
            values = {k: v for k, v in configs.items() if k in QUOTA_KEYS}
            if values:
                found[((USER, None if name == DEFAULT_NAME else name),)] = values
        for path, configs in self._quotas.items():
            found[entity_from_path(path)] = dict(configs)
        return found

    async def set_quota_configs(self, entity: QuotaEntity, configs: Mapping[str, str]) -> None:
        if len(entity) == 1 and entity[0][0] == USER:
            name = entity[0][1] or DEFAULT_NAME
            kept = {k: v for k, v in self._users.get(name, {}).items() if k not in QUOTA_KEYS}
            merged = {**kept, **configs}
            self._commit({"users": {name: merged or None}})
        else:
            self._commit({"quotas": {entity_path(entity): dict(configs) or None}})
        self._listeners.notify(MetadataChange("client_quotas"))

    async def broker_configs(self, broker: int) -> dict[str, str]:
        return dict(self._brokers.get(broker, {}))

    async def group_configs(self, group: str) -> dict[str, str]:
        return dict(self._groups.get(group, {}))

    async def set_group_configs(self, group: str, configs: Mapping[str, str]) -> None:
        self._commit({"groups": {group: dict(configs) if configs else None}})

    async def set_broker_configs(self, broker: int, configs: Mapping[str, str]) -> None:
        self._commit({"brokers": {str(broker): dict(configs) if configs else None}})
        self._listeners.notify(MetadataChange("broker_configs"))

    async def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        return {name: dict(c) for name, c in self._client_metrics.items()}

    async def set_client_metrics_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self._commit({"client_metrics": {name: dict(configs) if configs else None}})
        self._listeners.notify(MetadataChange("client_metrics"))

    async def delegation_tokens(self) -> list[TokenInformation]:
        return list(self._tokens.values())

    async def put_delegation_token(self, token: TokenInformation) -> None:
        self._commit({"delegation_tokens": {token.token_id: json.loads(token.to_json())}})
        self._listeners.notify(MetadataChange("delegation_tokens"))

    async def remove_delegation_token(self, token_id: str) -> None:
        if token_id in self._tokens:
            self._commit({"delegation_tokens": {token_id: None}})
        self._listeners.notify(MetadataChange("delegation_tokens"))

    @property
    def acls(self) -> Mapping[ResourcePattern, frozenset[AccessControlEntry]]:
        return self._acls

    async def change_acls(
        self,
        pattern: ResourcePattern,
        add: Iterable[AccessControlEntry] = (),
        remove: Iterable[AccessControlEntry] = (),
    ) -> frozenset[AccessControlEntry]:
        entries = (self._acls.get(pattern, frozenset()) | frozenset(add)) - frozenset(remove)
        self._commit({"acls": [_acl_json(pattern, entries or None)]})
        self._listeners.notify(MetadataChange("acls"))
        return entries

    @property
    def finalized_features(self) -> FinalizedFeatures | None:
        return self._features

    async def write_finalized_features(
        self, levels: Mapping[str, int], expected_epoch: int
    ) -> FinalizedFeatures:
        epoch = 0 if self._features is None else self._features.epoch
        if epoch != expected_epoch:
            raise StaleVersionError(f"features are at epoch {epoch}, not {expected_epoch}")
        written = FinalizedFeatures({n: v for n, v in sorted(levels.items()) if v > 0}, epoch + 1)
        self._commit({"features": _features_json(written)})
        self._listeners.notify(MetadataChange("features"))
        return written

    def add_listener(self, loop: asyncio.AbstractEventLoop, listener: ChangeListener) -> None:
        self._listeners.add(loop, listener)

    def close(self) -> None:
        """Let the journal go (every change is already on disk)."""
        self._journal.close()


def _topic_json(t: TopicMetadata) -> dict[str, Any]:
    return {
        "id": str(t.topic_id),
        "partitions": t.partitions,
        "replicas": [list(r) for r in t.replicas],
        "configs": t.configs,
    }


def _state_json(s: PartitionState) -> dict[str, Any]:
    return {
        "leader": s.leader,
        "leader_epoch": s.leader_epoch,
        "isr": list(s.isr),
        "controller_epoch": s.controller_epoch,
        "version": s.version,
        **({"elr": list(s.elr)} if s.elr else {}),
    }


def _features_json(f: FinalizedFeatures) -> dict[str, Any]:
    return {"epoch": f.epoch, "levels": dict(f.levels)}


def _acl_json(
    pattern: ResourcePattern, entries: frozenset[AccessControlEntry] | None
) -> dict[str, Any]:
    return {
        "resource_type": zk_name(pattern.resource_type),
        "name": pattern.name,
        "pattern_type": pattern.pattern_type.name,
        "entries": None if entries is None else encode_entries(entries),
    }
