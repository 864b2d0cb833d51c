"""The console's JSON API over HTTP, against a real broker serving it on ``metrics.listener``:
answers as the cluster has them, bad input refused with 400 and a message that says what is
wrong, unknown paths and methods with 404 and 405, and nothing that crashes the server."""

from __future__ import annotations

import base64
import gzip
import json
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.client.core import ClientError, ConnectionFailed, RequestTimeout
from odradek.client.data import DataClient
from odradek.console.api import ApiError, ConsoleApi, _status_of
from odradek.testing import RunningBroker

from .support import BASE_TIMESTAMP_MS, commit, committed, http, produce_records

TOPIC = "api-topic"


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = RunningBroker(
        tmp_path_factory.mktemp("console-api"),
        {"metrics.listener": "127.0.0.1:0", "num.partitions": "1"},
    ).start()
    try:
        assert broker.broker is not None and broker.broker.metrics is not None
        base = f"http://127.0.0.1:{broker.broker.metrics.bound[1]}"
        assert http(base, "POST", "/api/topics", {"name": TOPIC, "partitions": 2}).status == 200
        with DataClient(broker.bootstrap) as client:
            produce_records(client, TOPIC, 1, 5)
        commit(broker.bootstrap, "api-group", {(TOPIC, 1): 2})
        yield base
    finally:
        broker.stop()


def test_cluster_and_topics(console: str) -> None:
    cluster = http(console, "GET", "/api/cluster")
    assert cluster.status == 200
    assert cluster.body["controller"] == 1
    assert [b["id"] for b in cluster.body["brokers"]] == [1]
    topics = {t["name"]: t for t in http(console, "GET", "/api/topics").body}
    assert topics[TOPIC]["partitions"] == 2
    assert topics[TOPIC]["replication_factor"] == 1
    assert topics[TOPIC]["size"] > 0
    topic = http(console, "GET", f"/api/topics/{TOPIC}").body
    assert [
        (p["partition"], p["leader"], p["isr"], p["end_offset"]) for p in topic["partitions"]
    ] == [
        (0, 1, [1], 0),
        (1, 1, [1], 5),
    ]
    assert {c["name"] for c in topic["configs"]} >= {"retention.ms", "cleanup.policy"}
    configs = http(console, "GET", "/api/brokers/1/configs").body
    assert any(c["name"] == "log.dirs" for c in configs)


def test_records_as_produced(console: str) -> None:
    answer = http(console, "GET", f"/api/topics/{TOPIC}/records?partition=1&offset=1&limit=2")
    assert answer.status == 200
    records = answer.body["records"]
    assert [r["offset"] for r in records] == [1, 2]
    assert base64.b64decode(records[0]["key"]) == b"k1"
    assert json.loads(base64.b64decode(records[1]["value"])) == {"n": 2, "name": "record 2"}
    assert records[0]["headers"] == [
        {"key": "source", "value": base64.b64encode(b"console-test").decode()}
    ]
    since = http(
        console,
        "GET",
        f"/api/topics/{TOPIC}/records?partition=1&timestamp={BASE_TIMESTAMP_MS + 3000}",
    ).body
    assert [r["offset"] for r in since["records"]] == [3, 4]
    last = http(console, "GET", f"/api/topics/{TOPIC}/records?partition=1&limit=1").body
    assert [r["offset"] for r in last["records"]] == [4]


def test_group_and_a_dry_run_reset(console: str) -> None:
    group = http(console, "GET", "/api/groups/api-group").body
    assert group["state"] == "Empty"
    assert [
        (p["topic"], p["partition"], p["committed"], p["lag"]) for p in group["partitions"]
    ] == [(TOPIC, 1, 2, 3)]
    plan = http(
        console, "POST", "/api/groups/api-group/reset-offsets", {"to": "latest", "dry_run": True}
    ).body
    assert plan["offsets"] == [{"topic": TOPIC, "partition": 1, "offset": 5, "was": 2}]
    assert http(console, "GET", "/api/groups/api-group").body["partitions"][0]["committed"] == 2


@pytest.mark.parametrize(
    ("method", "path", "body", "message"),
    [
        ("POST", "/api/topics", {"name": "bad name"}, "is not a topic name"),
        (
            "POST",
            "/api/topics",
            {"name": "t", "partitions": "many"},
            "partitions must be an integer",
        ),
        (
            "POST",
            "/api/topics",
            {"name": "t", "partitions": 0},
            "partitions and replication_factor",
        ),
        ("POST", "/api/topics", {"name": "t", "colour": "red"}, "unknown field(s) colour"),
        ("POST", "/api/topics", {"name": "t", "configs": {"a": 1}}, "configs must be an object"),
        ("POST", "/api/topics", [1, 2], "must be a JSON object"),
        ("POST", f"/api/topics/{TOPIC}/configs", {}, "nothing to change"),
        ("POST", f"/api/topics/{TOPIC}/configs", {"delete": "x"}, "delete must be a list"),
        (
            "POST",
            f"/api/topics/{TOPIC}/configs",
            {"set": {"retention.ms": "soon"}},
            "invalid_config",
        ),
        ("POST", f"/api/topics/{TOPIC}/delete-records", {"partition": 0}, "partition and before"),
        ("POST", f"/api/topics/{TOPIC}/delete-records", {"partition": -1, "before": 0}, "at least"),
        ("GET", f"/api/topics/{TOPIC}/records?partition=x", None, "partition must be an integer"),
        ("GET", f"/api/topics/{TOPIC}/records?limit=0", None, "limit must be at least 1"),
        ("GET", f"/api/topics/{TOPIC}/records?limit=100000", None, "limit must be at most"),
        ("GET", f"/api/topics/{TOPIC}/records?offset=1&timestamp=2", None, "not both"),
        ("GET", f"/api/topics/{TOPIC}/records?colour=red", None, "unknown parameter(s): colour"),
        ("GET", f"/api/topics/{TOPIC}/records?partition=7", None, "has no partition 7"),
        ("POST", "/api/groups/api-group/reset-offsets", {"to": "tomorrow"}, "to must be one of"),
        ("POST", "/api/groups/api-group/reset-offsets", {"to": "offset"}, "needs a value"),
        (
            "POST",
            "/api/groups/api-group/reset-offsets",
            {"to": "earliest", "topic": "other"},
            "no committed offsets for topic 'other'",
        ),
    ],
)
def test_bad_input_is_refused_with_a_reason(
    console: str, method: str, path: str, body: object, message: str
) -> None:
    answer = http(console, method, path, body)
    assert answer.status == 400, answer.body
    assert message in answer.body["error"]


def test_a_body_that_is_not_json(console: str) -> None:
    answer = http(console, "POST", "/api/topics", raw=b"{name: ")
    assert answer.status == 400
    assert "not JSON" in answer.body["error"]


def test_changes_from_another_site_are_refused(console: str) -> None:
    body = {"name": "csrf-made"}
    elsewhere = http(console, "POST", "/api/topics", body, headers={"Origin": "http://evil.test"})
    assert elsewhere.status == 403
    assert "from another site" in elsewhere.body["error"]
    as_text = http(console, "POST", "/api/topics", body, headers={"Content-Type": "text/plain"})
    assert as_text.status == 415
    deleted = http(console, "DELETE", f"/api/topics/{TOPIC}", headers={"Origin": "null"})
    assert deleted.status == 403
    names = {t["name"] for t in http(console, "GET", "/api/topics").body}
    assert TOPIC in names
    assert "csrf-made" not in names
    host = console.removeprefix("http://")
    same = http(console, "POST", "/api/topics", body, headers={"Origin": f"http://{host}"})
    assert same.status == 200


def test_unknown_paths_methods_and_things(console: str) -> None:
    assert http(console, "GET", "/api/nothing").status == 404
    assert http(console, "GET", "/static/nothing.js").status == 404
    wrong = http(console, "DELETE", "/api/cluster")
    assert wrong.status == 405
    assert "only GET" in wrong.body["error"]
    missing = http(console, "GET", "/api/topics/no-such-topic")
    assert missing.status == 404
    assert "unknown_topic_or_partition" in missing.body["error"]
    assert http(console, "GET", "/api/groups/no-such-group").status == 404
    assert http(console, "GET", "/api/topics/no-such-topic/records").status == 404
    exists = http(console, "POST", "/api/topics", {"name": TOPIC})
    assert exists.status == 409
    assert "topic_already_exists" in exists.body["error"]
    gone = http(console, "DELETE", "/api/topics/no-such-topic")
    assert gone.status == 404
    assert "unknown_topic_or_partition" in gone.body["error"]
    # The server still answers after all of that.
    assert http(console, "GET", "/api/cluster").status == 200


def test_a_reset_and_a_delete_are_done(console: str) -> None:
    http(console, "POST", "/api/topics", {"name": "api-doomed", "partitions": 1})
    done = http(console, "DELETE", "/api/topics/api-doomed")
    assert done.status == 200
    names = {t["name"] for t in http(console, "GET", "/api/topics").body}
    assert "api-doomed" not in names
    group = http(console, "GET", "/api/cluster").body["bootstrap"]
    reset = http(
        console, "POST", "/api/groups/api-group/reset-offsets", {"to": "shift", "value": 1}
    )
    assert reset.status == 200
    assert committed(group, "api-group") == {(TOPIC, 1): 3}


def test_the_page_and_metrics_on_one_listener(console: str) -> None:
    page = http(console, "GET", "/")
    assert page.status == 200
    assert b'<script type="module" src="/static/app.js">' in page.body
    script = http(console, "GET", "/static/app.js")
    assert script.headers["Content-Type"].startswith("text/javascript")
    metrics = http(console, "GET", "/metrics")
    assert metrics.status == 200
    assert b"kafka_server_replicamanager_partitioncount" in metrics.body
    static = Path(__file__).parents[2] / "src" / "odradek" / "console" / "static" / "app.js"
    request = urllib.request.Request(
        console + "/static/app.js", headers={"Accept-Encoding": "gzip"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Encoding"] == "gzip"
        assert gzip.decompress(response.read()) == static.read_bytes()


def test_no_console_when_disabled(tmp_path: Path) -> None:
    broker = RunningBroker(
        tmp_path, {"metrics.listener": "127.0.0.1:0", "console.enabled": "false"}
    ).start()
    try:
        assert broker.broker is not None and broker.broker.metrics is not None
        base = f"http://127.0.0.1:{broker.broker.metrics.bound[1]}"
        assert http(base, "GET", "/metrics").status == 200
        assert http(base, "GET", "/api/cluster").status == 404
        assert http(base, "GET", "/").status == 404
    finally:
        broker.stop()


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ClientError("deleting 't': topic_authorization_failed"), 403),
        (ClientError("deleting 't': unknown_topic_or_partition"), 404),
        (ClientError("no coordinator for group 'g': coordinator_not_available"), 503),
        (ClientError("altering 't': not_controller"), 503),
        (ClientError("creating 't': invalid_replication_factor"), 400),
        (ClientError("creating 't': topic_already_exists"), 409),
        (ConnectionFailed("connection refused"), 503),
        (RequestTimeout("no answer in 15 s"), 504),
    ],
)
def test_cluster_errors_as_http_statuses(error: ClientError, status: int) -> None:
    assert _status_of(error) == status


def test_a_cluster_that_does_not_answer_is_a_504() -> None:
    # A listener that takes connections and never answers: the admin client would wait its
    # whole timeout_s; the page's request gives up after call_timeout_s.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        api = ConsoleApi(f"127.0.0.1:{port}", timeout_s=60.0, call_timeout_s=0.2)
        api.start()
        try:
            with pytest.raises(ApiError) as refused:
                api.handle("GET", "/api/cluster", {}, b"")
            assert refused.value.status == 504
            assert "did not answer" in refused.value.message
        finally:
            api.close()
