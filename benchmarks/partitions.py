"""Many partitions on one broker: creation, start, clean stop, recovery and RSS.

Per count in ``--counts`` (1000,5000; add 20000 for the issue's size), a fresh broker
(``odradek serve`` in a child process under an RLIMIT_NOFILE of ``--nofile``, 20,000 by default),
single, with the local metadata store:

- **create**: topics of ``--per-topic`` (100) partitions each, in CreateTopics requests of
  ``--topics-per-request`` (10) topics one after the other (confluent-kafka's AdminClient), timed
  until every topic is answered;
- **produce**: one record to every partition (librdkafka, acks=1), timed until every delivery
  report has come; librdkafka sends a Produce request per partition;
- **produce_raw**: then one more record to every partition from the project's wire client, one
  Produce request per topic (every partition of it), acks=1, one request after the other: the
  broker's own cost per partition, without librdkafka's;
- **stop**: SIGTERM, timed until the process exits (the stop watchdog is 45 s);
- **start**: a restart over the cleanly stopped logs, timed from the spawn to "listening";
- **recovery**: ``kill -9``, then a restart, timed the same way (every log recovers);
- **start0**: the first start, over no partitions (what the process itself costs to start,
  which the start and recovery times include);
- **RSS**: the broker's VmRSS after the records are produced, and after the clean restart;
- **fds**: how many descriptors the broker holds after the records are produced.

Numbers are printed, never asserted::

    python benchmarks/partitions.py [--counts 1000,5000,20000] [--nofile 20000]
        [--topics-per-request 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.bench.wire import PRODUCE_VERSION, make_batch
from odradek.client.blocking import BlockingConnection
from odradek.client.core import PRODUCE
from odradek.testing import BrokerProcess

TIMEOUT_S = 600
# CreateTopics requests of 10 topics by default, one after the other: the broker creates a
# request's logs before it answers, and librdkafka gives up on a request after socket.timeout.ms
# (5 min at most).
TOPICS_PER_REQUEST = 10


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def start(data_dir: Path, nofile: int, port: int = 0) -> tuple[BrokerProcess, float]:
    broker = BrokerProcess(data_dir, port=port, nofile=nofile)
    broker.start_timeout_s = TIMEOUT_S
    began = time.monotonic()
    broker.start()
    return broker, time.monotonic() - began


def create(
    bootstrap: str, count: int, per_topic: int, per_request: int = TOPICS_PER_REQUEST
) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    topics = [
        NewTopic(f"t{i:05d}", num_partitions=min(per_topic, count - i * per_topic))
        for i in range((count + per_topic - 1) // per_topic)
    ]
    began = time.monotonic()
    failed = 0
    for start in range(0, len(topics), per_request):
        futures = admin.create_topics(
            topics[start : start + per_request],
            operation_timeout=TIMEOUT_S,
            request_timeout=TIMEOUT_S,
        )
        for future in futures.values():
            try:
                future.result(TIMEOUT_S)
            except KafkaException as e:
                failed += 1
                if failed == 1:
                    print(f"    create failed: {e}")
    if failed:
        print(f"    {failed} topics not created")
    return time.monotonic() - began


def produce(bootstrap: str, count: int, per_topic: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 50,
            "message.timeout.ms": TIMEOUT_S * 1000,
        }
    )
    errors: list[object] = []
    began = time.monotonic()
    for n in range(count):
        topic, partition = f"t{n // per_topic:05d}", n % per_topic
        while True:
            try:
                producer.produce(
                    topic,
                    b"v",
                    partition=partition,
                    on_delivery=lambda err, _m: errors.append(err) if err else None,
                )
                break
            except BufferError:
                producer.poll(0.1)
    left = producer.flush(TIMEOUT_S)
    if left or errors:
        print(f"    {left} records undelivered, {len(errors)} errors: {errors[:1]}")
    return time.monotonic() - began


def produce_raw(bootstrap: str, count: int, per_topic: int) -> float:
    batch = make_batch(1, 1)
    failed = 0
    began = time.monotonic()
    with BlockingConnection.open(bootstrap, timeout_s=TIMEOUT_S) as connection:
        for first in range(0, count, per_topic):
            topic = f"t{first // per_topic:05d}"
            partitions = range(min(per_topic, count - first))
            response = connection.request(
                PRODUCE,
                {
                    "transactional_id": None,
                    "acks": 1,
                    "timeout": TIMEOUT_S * 1000,
                    "topic_data": [
                        {
                            "name": topic,
                            "partition_data": [{"index": p, "records": batch} for p in partitions],
                        }
                    ],
                },
                version=PRODUCE_VERSION,
            )
            failed += sum(
                1 for t in response.responses for p in t.partition_responses if p.error_code != 0
            )
    if failed:
        print(f"    raw produce: {failed} partitions failed")
    return time.monotonic() - began


def stop(broker: BrokerProcess) -> float:
    began = time.monotonic()
    code = broker.terminate(TIMEOUT_S)
    elapsed = time.monotonic() - began
    if code != 0:
        print(f"    broker exited with {code}")
    return elapsed


def run(
    count: int, per_topic: int, nofile: int, work: Path, per_request: int = TOPICS_PER_REQUEST
) -> dict[str, float]:
    data = work / f"p{count}"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    result: dict[str, float] = {}
    broker, result["start0_s"] = start(data, nofile)
    try:
        result["create_s"] = create(broker.bootstrap, count, per_topic, per_request)
        result["produce_s"] = produce(broker.bootstrap, count, per_topic)
        result["produce_raw_s"] = produce_raw(broker.bootstrap, count, per_topic)
        assert broker.process is not None
        result["rss_mb"] = rss_mb(broker.process.pid)
        result["fds"] = fd_count(broker.process.pid)
        result["stop_s"] = stop(broker)
        port = broker.port
        broker, result["start_s"] = start(data, nofile, port)
        assert broker.process is not None
        result["rss_restart_mb"] = rss_mb(broker.process.pid)
        broker.kill()
        broker, result["recovery_s"] = start(data, nofile, port)
        result["stop2_s"] = stop(broker)
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.kill()
        shutil.rmtree(data, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="1000,5000")
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--nofile", type=int, default=20_000)
    parser.add_argument("--topics-per-request", type=int, default=TOPICS_PER_REQUEST)
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="odradek-partitions-"))
    columns = ("start0_s", "create_s", "produce_s", "produce_raw_s", "stop_s", "start_s")
    columns += ("recovery_s", "rss_mb")
    columns += ("rss_restart_mb", "fds")
    print(
        f"RLIMIT_NOFILE {args.nofile}, {args.per_topic} partitions a topic, "
        f"{args.topics_per_request} topics a CreateTopics request"
    )
    print(f"{'partitions':>10} " + " ".join(f"{c:>14}" for c in columns))
    for count in (int(c) for c in args.counts.split(",")):
        try:
            result = run(count, args.per_topic, args.nofile, work, args.topics_per_request)
        except Exception as e:  # a failed count is reported, and the next one runs
            print(f"{count:>10} failed: {type(e).__name__}: {str(e)[-2000:]}")
            continue
        print(
            f"{count:>10} " + " ".join(f"{result.get(c, float('nan')):>14.1f}" for c in columns),
            flush=True,
        )
    if args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
