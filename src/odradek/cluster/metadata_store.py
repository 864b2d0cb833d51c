"""The single broker's cluster metadata: which topics exist, their ids, partitions and configs.

File format: ``odradek-metadata.json`` in the first log dir, a JSON object ``{"version": 1,
"cluster_id": str, "next_producer_id_block": int, "topics": {name: {"id": uuid, "partitions": n,
"configs": {}}}}``.
It is rewritten whole (temp file, fsync, rename) on every change, so a crash leaves the old or the
new state, never a mix. Kafka keeps the same facts in ZooKeeper or KRaft; the ZooKeeper-backed
store for clusters comes with the cluster issue. Called only from the broker's event loop.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

FILE_NAME = "odradek-metadata.json"


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


def new_cluster_id() -> str:
    """Kafka's format: a random UUID as 22 URL-safe base64 characters."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class LocalMetadataStore:
    """Topics of a single-broker cluster, kept in one JSON file."""

    def __init__(self, directory: Path, cluster_id: str | None = None) -> None:
        self.path = directory / FILE_NAME
        self.topics: dict[str, TopicMetadata] = {}
        self.cluster_id = cluster_id or new_cluster_id()
        self.next_producer_id_block = 0
        if self.path.exists():
            self._load()
        else:
            directory.mkdir(parents=True, exist_ok=True)
            self._save()

    def _load(self) -> None:
        state = json.loads(self.path.read_text())
        self.cluster_id = state["cluster_id"]
        self.next_producer_id_block = int(state.get("next_producer_id_block", 0))
        self.topics = {
            name: TopicMetadata(name, uuid.UUID(t["id"]), int(t["partitions"]), dict(t["configs"]))
            for name, t in state["topics"].items()
        }

    def _save(self) -> None:
        state = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "next_producer_id_block": self.next_producer_id_block,
            "topics": {
                t.name: {"id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs}
                for t in self.topics.values()
            },
        }
        write_atomically(self.path, json.dumps(state, indent=1, sort_keys=True).encode())

    def reserve_producer_ids(self, count: int) -> int:
        """The first of ``count`` producer ids no other call, before or after a restart, gets."""
        first = self.next_producer_id_block
        self.next_producer_id_block = first + count
        self._save()
        return first

    def put(self, topic: TopicMetadata) -> None:
        self.topics[topic.name] = topic
        self._save()

    def remove(self, name: str) -> None:
        self.topics.pop(name, None)
        self._save()

    def set_partitions(self, name: str, count: int) -> TopicMetadata:
        topic = replace(self.topics[name], partitions=count)
        self.put(topic)
        return topic

    def set_configs(self, name: str, configs: dict[str, str]) -> TopicMetadata:
        topic = replace(self.topics[name], configs=dict(configs))
        self.put(topic)
        return topic
