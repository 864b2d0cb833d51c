"""What transaction version 2 (KIP-890 part 2) costs beside version 1: the same short
transactions driven over the wire with the project's own client, one transactional id after
another, against a fresh broker process (``odradek serve``), run after run in alternating order.

Each transaction writes one batch of ``--records`` records of ``--record-size`` bytes to each of
``--partitions`` partitions (acks=all) and commits. Version 1 is what Kafka 3 clients send:
AddPartitionsToTxn v3, Produce v11, EndTxn v4 (CONCURRENT_TRANSACTIONS while the previous
transaction's markers are written is retried after 5 ms, as the Java client's backoff starts).
Version 2 is what Kafka 4 clients send: Produce v12 (the partition leader adds the partitions),
EndTxn v5 (the epoch bumped, the next transaction's sequences start at 0). Prints transactions
per second, the median time of one, and the broker's CPU (user + system from /proc) per
transaction, each run and the medians.

    python benchmarks/transactions_v2.py --rounds 3 --transactions 300
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from odradek.bench.scenarios import cpu_seconds
from odradek.client.aio import AsyncConnection
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import encode_batch
from odradek.testing import BrokerProcess

INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN, PRODUCE = 22, 24, 26, 0
RETRY_S = 0.005


async def _add_v1(
    connection: AsyncConnection, tid: str, pid: int, epoch: int, topic: str, partitions: list[int]
) -> None:
    """AddPartitionsToTxn v3, retried while the previous transaction ends."""
    while True:
        added = await connection.request(
            ADD_PARTITIONS,
            {
                "v3_and_below_transactional_id": tid,
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": partitions}],
            },
            version=3,
        )
        codes = {
            p.partition_error_code
            for t in added.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }
        if codes == {ErrorCode.none}:
            return
        assert codes == {ErrorCode.concurrent_transactions}, codes
        await asyncio.sleep(RETRY_S)


async def _end(
    connection: AsyncConnection, tid: str, pid: int, epoch: int, version: int
) -> tuple[int, int]:
    """EndTxn (commit), retried while it is refused as concurrent; the producer id and epoch
    of the next transaction."""
    while True:
        ended = await connection.request(
            END_TXN,
            {
                "transactional_id": tid,
                "producer_id": pid,
                "producer_epoch": epoch,
                "committed": True,
            },
            version=4 if version == 1 else 5,
        )
        if ended.error_code != ErrorCode.concurrent_transactions:
            break
        await asyncio.sleep(RETRY_S)
    assert ended.error_code == ErrorCode.none, ended
    if version == 1:
        return pid, epoch
    return int(ended.producer_id), int(ended.producer_epoch)


async def run(bootstrap: str, topic: str, version: int, args: argparse.Namespace) -> list[float]:
    """Seconds each transaction took, from its first request to its EndTxn answer."""
    connection = await AsyncConnection.open(bootstrap, client_id=f"bench-tv{version}")
    tid = f"bench-tv{version}-{topic}"
    try:
        init = await connection.request(
            INIT_PRODUCER_ID,
            {
                "transactional_id": tid,
                "transaction_timeout": 60_000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
            version=5,
        )
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        sequence = 0
        partitions = list(range(args.partitions))
        value = b"x" * args.record_size
        took = []
        for _ in range(args.transactions):
            start = time.perf_counter()
            if version == 1:
                await _add_v1(connection, tid, pid, epoch, topic, partitions)
            batch = encode_batch(
                [(None, value, (), None)] * args.records,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=sequence,
                transactional=True,
                now_ms=int(time.time() * 1000),
            )
            while True:
                produced = await connection.request(
                    PRODUCE,
                    {
                        "transactional_id": tid,
                        "acks": -1,
                        "timeout": 30_000,
                        "topic_data": [
                            {
                                "name": topic,
                                "partition_data": [
                                    {"index": p, "records": batch} for p in partitions
                                ],
                            }
                        ],
                    },
                    version=11 if version == 1 else 12,
                )
                codes = {p.error_code for r in produced.responses for p in r.partition_responses}
                if codes == {ErrorCode.none}:
                    break
                # v2: the previous transaction's markers are still being written
                assert codes <= {ErrorCode.none, ErrorCode.not_enough_replicas}, codes
                await asyncio.sleep(RETRY_S)
            sequence += args.records
            next_pid, next_epoch = await _end(connection, tid, pid, epoch, version)
            if (next_pid, next_epoch) != (pid, epoch):
                pid, epoch, sequence = next_pid, next_epoch, 0
            took.append(time.perf_counter() - start)
        return took
    finally:
        await connection.close()


def cpu_s(broker: BrokerProcess) -> float:
    assert broker.process is not None
    seconds = cpu_seconds(broker.process.pid)
    assert seconds is not None, "the broker process is gone"
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--records", type=int, default=10)
    parser.add_argument("--record-size", type=int, default=100)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="txn-v2-bench-") as directory:
        broker = BrokerProcess(Path(directory)).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            rates: dict[int, list[float]] = {}
            medians: dict[int, list[float]] = {}
            cpus: dict[int, list[float]] = {}
            for round_ in range(args.rounds):
                order = [1, 2] if round_ % 2 == 0 else [2, 1]
                for version in order:
                    topic = f"tv{version}-{round_}"
                    admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
                    time.sleep(0.5)
                    before = cpu_s(broker)
                    start = time.perf_counter()
                    took = asyncio.run(run(broker.bootstrap, topic, version, args))
                    seconds = time.perf_counter() - start
                    cpu = cpu_s(broker) - before
                    rates.setdefault(version, []).append(len(took) / seconds)
                    medians.setdefault(version, []).append(statistics.median(took) * 1000)
                    cpus.setdefault(version, []).append(cpu / len(took) * 1000)
                    print(
                        f"transaction version {version}: {len(took) / seconds:8.1f} txn/s  "
                        f"median {statistics.median(took) * 1000:6.2f} ms  "
                        f"broker CPU {cpu / len(took) * 1000:6.2f} ms/txn",
                        flush=True,
                    )
            for version in (1, 2):
                print(
                    f"median transaction version {version}: "
                    f"{statistics.median(rates[version]):8.1f} txn/s  "
                    f"{statistics.median(medians[version]):6.2f} ms  "
                    f"{statistics.median(cpus[version]):6.2f} broker CPU ms/txn"
                )
            ratio = statistics.median(rates[2]) / statistics.median(rates[1])
            print(f"version 2 / version 1 transactions per second = {ratio:.2f}")
        finally:
            broker.terminate()


if __name__ == "__main__":
    main()
