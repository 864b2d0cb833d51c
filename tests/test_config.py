from pathlib import Path

import pytest

from odradek.config import (
    BrokerConfig,
    ConfigError,
    TopicConfig,
    parse_properties,
    validate_topic_configs,
)


def test_properties_file_syntax() -> None:
    text = "# comment\n! also\nlog.dirs = /a,/b\nnum.partitions: 3\nlong=one\\\n  two\nempty=\n"
    assert parse_properties(text) == {
        "log.dirs": "/a,/b",
        "num.partitions": "3",
        "long": "onetwo",
        "empty": "",
    }


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=2\nlisteners=PLAINTEXT://0.0.0.0:9999\n")
    config = BrokerConfig.load(props, ["num.partitions=5"])
    assert config.get_int("num.partitions") == 5
    assert config.listener == ("0.0.0.0", 9999)
    assert config.advertised(("0.0.0.0", 9999)) == ("127.0.0.1", 9999)


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config.listener == ("127.0.0.1", 9092)
    assert config.log_dirs == [Path("./odradek-data")]
    assert config.get_int("socket.request.max.bytes") == 104857600
    assert config.get_bool("auto.create.topics.enable") is True


def test_bad_values_fail_at_start() -> None:
    with pytest.raises(ConfigError, match=r"num\.partitions"):
        BrokerConfig({"num.partitions": "0"})
    with pytest.raises(ConfigError, match="not a valid int"):
        BrokerConfig({"num.partitions": "abc"})
    with pytest.raises(ConfigError, match="key=value"):
        BrokerConfig.load(None, ["novalue"])


def test_topic_configs_default_to_broker_synonyms() -> None:
    broker = BrokerConfig({"log.segment.bytes": "2048", "log.retention.hours": "1"})
    topic = TopicConfig.resolve(broker, {"retention.bytes": "100"})
    assert topic.get_int("segment.bytes") == 2048
    assert topic.get_int("retention.ms") == 3_600_000
    assert topic.get_int("retention.bytes") == 100
    assert topic.optional_long("flush.messages") is None
    assert broker.topic_source("segment.bytes") == "static"
    assert broker.topic_source("cleanup.policy") == "default"


def test_topic_config_validation() -> None:
    assert validate_topic_configs({"cleanup.policy": "compact,delete"}) == {
        "cleanup.policy": "compact,delete"
    }
    with pytest.raises(ConfigError, match="unknown topic config"):
        validate_topic_configs({"no.such.config": "1"})
    with pytest.raises(ConfigError, match=r"cleanup\.policy"):
        validate_topic_configs({"cleanup.policy": "shred"})
    with pytest.raises(ConfigError, match=r"message\.timestamp\.type"):
        validate_topic_configs({"message.timestamp.type": "Now"})


def test_metrics_listener_is_off_unless_set_and_must_be_host_port() -> None:
    assert BrokerConfig().metrics_listener is None
    assert BrokerConfig({"metrics.listener": "0.0.0.0:9404"}).metrics_listener == ("0.0.0.0", 9404)
    with pytest.raises(ConfigError, match=r"metrics\.listener"):
        BrokerConfig({"metrics.listener": "9404"})


def test_console_client_config_must_be_a_readable_client_config(tmp_path: Path) -> None:
    good = tmp_path / "console.properties"
    good.write_text("security.protocol=SASL_PLAINTEXT\nsasl.username=a\nsasl.password=b\n")
    assert BrokerConfig({"console.client.config": str(good)}).get("console.enabled") is True
    with pytest.raises(ConfigError, match=r"console\.client\.config: cannot read it"):
        BrokerConfig({"console.client.config": str(tmp_path / "missing")})
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_PLAINTEXT\n")
    with pytest.raises(ConfigError, match="SASL needs a username and password"):
        BrokerConfig({"console.client.config": str(bad)})


def test_iceberg_topic_configs_are_checked() -> None:
    from odradek.config import parse_partition_spec, validate_topic_configs

    assert validate_topic_configs({"iceberg.mode": "key_value"}) == {"iceberg.mode": "key_value"}
    with pytest.raises(ConfigError):
        validate_topic_configs({"iceberg.mode": "json"})
    with pytest.raises(ConfigError):
        validate_topic_configs({"iceberg.partition.spec": "hour(kafka.timestamp)"})
    with pytest.raises(ConfigError):
        validate_topic_configs({"iceberg.commit.interval.ms": "0"})
    assert parse_partition_spec("(day(kafka.timestamp), bucket[8](key), kafka.partition)") == [
        ("day", "kafka.timestamp", None),
        ("bucket", "key", 8),
        ("identity", "kafka.partition", None),
    ]
    assert parse_partition_spec("()") == []


def test_iceberg_catalog_defaults_to_sqlite_in_the_data_dir(tmp_path: Path) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path), "iceberg.catalog.s3.endpoint": "http://x"})
    assert config.iceberg_catalog() == {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/iceberg/catalog.db",
        "warehouse": f"file://{tmp_path}/iceberg/warehouse",
        "s3.endpoint": "http://x",
    }


def test_a_rest_iceberg_catalog_needs_its_url_and_gets_the_warehouse_only_if_set(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match=r"iceberg\.catalog\.uri"):
        BrokerConfig({"log.dirs": str(tmp_path), "iceberg.catalog.type": "rest"})
    rest = {"iceberg.catalog.type": "rest", "iceberg.catalog.uri": "http://catalog:8181"}
    config = BrokerConfig({"log.dirs": str(tmp_path), **rest, "iceberg.catalog.token": "t"})
    assert config.iceberg_catalog() == {"type": "rest", "uri": "http://catalog:8181", "token": "t"}
    named = BrokerConfig({"log.dirs": str(tmp_path), **rest, "iceberg.warehouse": "lake"})
    assert named.iceberg_catalog()["warehouse"] == "lake"
