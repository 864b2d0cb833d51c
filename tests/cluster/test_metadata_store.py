import json
import uuid
from pathlib import Path

from odradek.cluster.metadata_store import FILE_NAME, LocalMetadataStore, TopicMetadata


def test_topics_survive_reopen(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path)
    topic_id = uuid.uuid4()
    store.put(TopicMetadata("orders", topic_id, 3, {"retention.ms": "1000"}))
    store.set_partitions("orders", 5)
    store.put(TopicMetadata("gone", uuid.uuid4(), 1))
    store.remove("gone")

    reopened = LocalMetadataStore(tmp_path)
    assert reopened.cluster_id == store.cluster_id
    assert reopened.topics == {
        "orders": TopicMetadata("orders", topic_id, 5, {"retention.ms": "1000"})
    }


def test_cluster_id_is_kafka_shaped_and_kept(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path)
    assert len(store.cluster_id) == 22
    assert LocalMetadataStore(tmp_path, cluster_id="other").cluster_id == store.cluster_id


def test_file_is_replaced_whole(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path)
    store.put(TopicMetadata("a", uuid.uuid4(), 1))
    state = json.loads((tmp_path / FILE_NAME).read_text())
    assert list(state["topics"]) == ["a"]
    assert not (tmp_path / (FILE_NAME + ".tmp")).exists()
