"""Java clients older than Kafka 4 (kafka-clients 2.8 and 3.9, each with a program compiled
against it) know transactions version 1 only, and keep working against a broker that finalizes
version 2: a transactional producer commits some records and aborts others, a second producer
with its transactional id fences it, and a read_committed consumer sees exactly the committed
records. That they used version 1 shows twice: in the requests (seen through a recording proxy:
AddPartitionsToTxn, EndTxn below v5) and in the log (one producer epoch for every transaction,
where version 2 bumps it at each transaction's end)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing import RunningBroker
from tests.e2e.recording_proxy import RecordingProxy, proxied_broker

from . import jars
from .support import (
    classpath,
    client_requests,
    create_topic,
    legacy_client_classpath,
    run_java,
    transactional_epochs,
)

ADD_PARTITIONS_TO_TXN, END_TXN = 24, 26


@pytest.fixture(scope="module")
def proxied(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RecordingProxy, RunningBroker]]:
    classpath()
    with proxied_broker(tmp_path_factory.mktemp("txn-legacy")) as both:
        yield both


@pytest.mark.parametrize("version", sorted(jars.LEGACY_CLIENT_POMS))
def test_an_old_client_commits_and_aborts_with_transactions_v1(proxied, version):
    cp = legacy_client_classpath(version)
    proxy, broker = proxied
    topic = f"legacy-{version}"
    create_topic(proxy.address, topic, 3)
    proxy.clear()
    out = run_java("LegacyTransactions", proxy.address, topic, f"legacy-{version}", "20", cp=cp)
    lines = out.splitlines()
    assert lines[:4] == ["committed", "aborted", "committed", "fenced"]
    assert lines[-1] == "done"
    read = [line.removeprefix("record ") for line in lines[4:-1]]
    assert sorted(read) == sorted([f"c{i}" for i in range(20)] + ["last"])
    sent = client_requests(proxy)
    assert ADD_PARTITIONS_TO_TXN in sent
    assert max(sent[END_TXN]) <= 4
    data_epochs, marker_epochs = transactional_epochs(broker, topic)
    assert len(data_epochs) == 1
    # The commit, abort and commit markers carry that epoch; the zombie's abort, written when
    # the second producer took over, the bumped one.
    assert marker_epochs == {*data_epochs, max(data_epochs) + 1}
