"""The controller's decisions, event by event, against Kafka's documented behaviour.

``Znodes`` stands in for the partition-state znodes with ZooKeeper's compare-and-set by version,
so each test applies the controller's writes the way the ZooKeeper shell will.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.client.data import TopicPartition
from odradek.clock import ManualClock
from odradek.cluster.controller.state import (
    NO_LEADER,
    AssignmentWrite,
    ControllerState,
    PartitionStateWrite,
    Reason,
    Reassignment,
)
from odradek.cluster.metadata.store import PartitionState
from odradek.protocol.errors import ErrorCode, KafkaError

T0 = TopicPartition("t", 0)


class Znodes:
    """Partition-state znodes: create fails if present, set only at the expected version."""

    def __init__(self) -> None:
        self.data: dict[TopicPartition, PartitionState] = {}

    def apply(self, controller: ControllerState, writes: list[PartitionStateWrite]) -> None:
        pending = list(writes)
        for _ in range(10):
            retries: list[PartitionStateWrite] = []
            for write in pending:
                current = self.data.get(write.partition)
                if write.expected_version is None:
                    ok = current is None
                else:
                    ok = current is not None and current.version == write.expected_version
                if ok:
                    version = 0 if current is None else current.version + 1
                    assert write.state.version == version
                    self.data[write.partition] = write.state
                    controller.write_applied(write, version)
                else:
                    retries += controller.write_conflicted(write, current)
            if not retries:
                return
            pending = retries
        raise AssertionError("writes kept conflicting")

    def set_by_leader(self, tp: TopicPartition, isr: tuple[int, ...]) -> None:
        """A write the controller does not know of yet (a leader's ISR change)."""
        state = self.data[tp]
        self.data[tp] = replace(state, isr=isr, version=state.version + 1)


def cluster(
    brokers: tuple[int, ...] = (1, 2, 3),
    assignment: Mapping[int, Sequence[int]] | None = None,
    **settings: Any,
) -> tuple[ControllerState, Znodes, ManualClock]:
    clock = ManualClock()
    controller, writes = ControllerState.elected(
        0,
        clock,
        live_brokers=brokers,
        assignments={},
        states={},
        **settings,
    )
    assert writes == []
    zk = Znodes()
    zk.apply(controller, controller.add_topic("t", assignment or {0: (1, 2, 3)}))
    return controller, zk, clock


def check_cache(controller: ControllerState, zk: Znodes) -> None:
    for tp, state in zk.data.items():
        assert controller.state(tp) == state


# -- new topics and partitions -------------------------------------------------------------


def test_a_new_partition_is_led_by_its_first_replica_with_every_live_replica_in_sync() -> None:
    controller, zk, _ = cluster()
    assert controller.controller_epoch == 1
    assert zk.data[T0] == PartitionState(1, 0, (1, 2, 3), 1, version=0)
    check_cache(controller, zk)


def test_rf3_over_3_brokers_every_broker_leads_a_third() -> None:
    from random import Random

    from odradek.cluster.controller.assignment import BrokerMetadata, assign_replicas

    layout = assign_replicas([BrokerMetadata(b) for b in (1, 2, 3)], 9, 3, Random(4))
    _, zk, _ = cluster(assignment=layout)
    assert Counter(s.leader for s in zk.data.values()) == {1: 3, 2: 3, 3: 3}
    assert all(s.isr == layout[tp.partition] for tp, s in zk.data.items())


def test_a_dead_replica_is_left_out_of_the_first_state() -> None:
    _, zk, _ = cluster(brokers=(2, 3))
    assert zk.data[T0] == PartitionState(2, 0, (2, 3), 1, version=0)


def test_a_partition_with_no_live_replica_waits_offline_until_one_registers() -> None:
    controller, zk, _ = cluster(brokers=(9,))
    assert zk.data == {} and controller.state(T0) is None
    assert controller.offline_partitions() == {T0}
    writes = controller.brokers_started([3])
    assert [(w.expected_version, w.reason) for w in writes] == [(None, Reason.NEW_PARTITION)]
    zk.apply(controller, writes)
    assert zk.data[T0] == PartitionState(3, 0, (3,), 1, version=0)


def test_added_partitions_get_states_and_existing_ones_are_untouched() -> None:
    controller, zk, _ = cluster()
    writes = controller.add_partitions("t", {1: (2, 3, 1), 2: (3, 1, 2)})
    assert {w.partition.partition for w in writes} == {1, 2}
    zk.apply(controller, writes)
    assert [zk.data[TopicPartition("t", p)].leader for p in range(3)] == [1, 2, 3]
    with pytest.raises(ValueError):
        controller.add_partitions("t", {0: (1,)})


# -- broker failure ----------------------------------------------------------------------


def test_killing_the_leader_elects_the_next_in_sync_replica_with_the_epoch_bumped() -> None:
    controller, zk, _ = cluster()
    zk.apply(controller, controller.brokers_failed([1]))
    assert zk.data[T0] == PartitionState(2, 1, (2, 3), 1, version=1)
    check_cache(controller, zk)


def test_a_dead_follower_leaves_the_isr_and_the_epoch_moves() -> None:
    controller, zk, _ = cluster()
    zk.apply(controller, controller.brokers_failed([3]))
    assert zk.data[T0] == PartitionState(1, 1, (1, 2), 1, version=1)


def test_killing_two_of_three_leaves_the_last_isr_member_leading() -> None:
    controller, zk, _ = cluster()
    zk.apply(controller, controller.brokers_failed([1]))
    zk.apply(controller, controller.brokers_failed([2]))
    assert zk.data[T0] == PartitionState(3, 2, (3,), 1, version=2)


def test_killing_all_goes_offline_and_the_isr_keeps_the_last_member() -> None:
    controller, zk, _ = cluster()
    for broker in (1, 2, 3):
        zk.apply(controller, controller.brokers_failed([broker]))
    assert zk.data[T0] == PartitionState(NO_LEADER, 3, (3,), 1, version=3)
    assert controller.offline_partitions() == {T0}
    # Nothing more to write while it stays that way.
    assert controller.brokers_failed([3]) == []


def test_a_failed_log_dir_moves_its_leaderships_and_takes_its_replicas_out_of_the_isrs() -> None:
    layout = {0: (1, 2, 3), 1: (2, 1, 3), 2: (1, 3)}
    controller, zk, _ = cluster(assignment=layout)
    t1, t2 = TopicPartition("t", 1), TopicPartition("t", 2)
    # Broker 1's dir held partitions 0 and 1, not 2.
    writes = controller.log_dir_failed(1, [T0, t1])
    assert {w.reason for w in writes} == {Reason.LOG_DIR_FAILURE}
    zk.apply(controller, writes)
    assert zk.data[T0] == PartitionState(2, 1, (2, 3), 1, version=1)
    assert zk.data[t1] == PartitionState(2, 1, (2, 3), 1, version=1)
    assert zk.data[t2] == PartitionState(1, 0, (1, 3), 1, version=0)
    assert controller.offline_replicas(T0) == {1}
    # Until it restarts, broker 1 neither leads nor rejoins those ISRs.
    assert controller.elect_preferred([T0]).writes == []
    refused = controller.alter_partition(2, T0, 1, (2, 3, 1), 1)
    assert refused.error == ErrorCode.ineligible_replica
    zk.apply(controller, controller.brokers_failed([2]))
    assert zk.data[T0].leader == 3
    # Registered again (restarted), its replicas are eligible again.
    zk.apply(controller, controller.brokers_changed(controller.live_brokers, bounced=[1]))
    assert controller.offline_replicas(T0) == frozenset()
    state = zk.data[T0]
    joined = controller.alter_partition(3, T0, state.leader_epoch, (3, 1), state.version)
    assert joined.error == ErrorCode.none and joined.write is not None
    zk.apply(controller, [joined.write])
    assert zk.data[T0].isr == (3, 1)
    check_cache(controller, zk)


def test_a_failed_log_dir_holding_the_only_in_sync_replica_leaves_the_partition_offline() -> None:
    controller, zk, _ = cluster(assignment={0: (1, 2)})
    zk.apply(controller, controller.brokers_failed([2]))
    zk.apply(controller, controller.log_dir_failed(1, [T0]))
    assert zk.data[T0] == PartitionState(NO_LEADER, 2, (1,), 1, version=2)
    assert controller.offline_partitions() == {T0}
    # A replica back in a live broker does not lead: it is not in sync.
    zk.apply(controller, controller.brokers_started([2]))
    assert zk.data[T0].leader == NO_LEADER
    # Nor do failures of dirs that hold nothing of the partition, or of dead brokers.
    assert controller.log_dir_failed(3, [T0]) == []


def test_killing_all_at_once_keeps_the_last_leader_in_the_isr() -> None:
    controller, zk, _ = cluster()
    zk.apply(controller, controller.brokers_failed([1, 2, 3]))
    assert zk.data[T0] == PartitionState(NO_LEADER, 1, (1,), 1, version=1)


def test_unclean_disabled_stays_offline_with_only_an_out_of_sync_replica_alive() -> None:
    controller, zk, _ = cluster()
    zk.apply(controller, controller.brokers_failed([3]))  # ISR 1, 2
    zk.apply(controller, controller.brokers_failed([1, 2]))
    assert zk.data[T0].leader == NO_LEADER
    assert controller.brokers_started([3]) == []
    assert zk.data[T0] == PartitionState(NO_LEADER, 2, (1,), 1, version=2)


def test_unclean_election_when_the_topic_enables_it() -> None:
    controller, zk, _ = cluster()
    zk.apply(controller, controller.brokers_failed([3]))
    zk.apply(controller, controller.brokers_failed([1, 2]))
    zk.apply(controller, controller.brokers_started([3]))
    writes = controller.set_topic_configs("t", {"unclean.leader.election.enable": "true"})
    zk.apply(controller, writes)
    # The out-of-sync replica leads and is alone in sync with its own log.
    assert zk.data[T0] == PartitionState(3, 3, (3,), 1, version=3)


def test_the_topic_config_overrides_the_brokers_unclean_setting() -> None:
    controller, zk, _ = cluster(unclean_leader_election_enable=True)
    controller.set_topic_configs("t", {"unclean.leader.election.enable": "false"})
    zk.apply(controller, controller.brokers_failed([3]))
    zk.apply(controller, controller.brokers_failed([1, 2]))
    assert controller.brokers_started([3]) == []
    controller.set_topic_configs("t", {})  # back to the broker's: unclean
    assert controller.leader(T0) == 3


# -- broker start-up -----------------------------------------------------------------------


def test_a_returning_isr_member_leads_an_offline_partition() -> None:
    controller, zk, _ = cluster()
    for broker in (1, 2, 3):
        zk.apply(controller, controller.brokers_failed([broker]))
    assert controller.brokers_started([1, 2]) == []  # not in sync: unclean is off
    zk.apply(controller, controller.brokers_started([3]))
    assert zk.data[T0] == PartitionState(3, 4, (3,), 1, version=4)


def test_a_bounced_leader_loses_leadership_and_its_isr_place() -> None:
    controller, zk, _ = cluster()
    writes = controller.brokers_changed([1, 2, 3], bounced=[1])
    assert len(writes) == 1
    zk.apply(controller, writes)
    assert zk.data[T0] == PartitionState(2, 1, (2, 3), 1, version=1)


# -- preferred replica election ------------------------------------------------------------


def test_preferred_election_after_the_preferred_replica_returns_and_rejoins_the_isr() -> None:
    controller, zk, _ = cluster()
    zk.apply(controller, controller.brokers_failed([1]))
    zk.apply(controller, controller.brokers_started([1]))
    assert zk.data[T0].leader == 2 and zk.data[T0].isr == (2, 3)

    outcome = controller.elect_preferred([T0])
    assert outcome.results[T0].error == ErrorCode.preferred_leader_not_available
    assert outcome.writes == []

    state = zk.data[T0]
    accepted = controller.alter_partition(2, T0, state.leader_epoch, (2, 3, 1), state.version)
    assert accepted.error == ErrorCode.none and accepted.write is not None
    zk.apply(controller, [accepted.write])

    outcome = controller.elect_preferred([T0])
    assert outcome.results[T0].error == ErrorCode.none and outcome.results[T0].leader == 1
    zk.apply(controller, outcome.writes)
    assert zk.data[T0] == PartitionState(1, 2, (2, 3, 1), 1, version=3)

    again = controller.elect_preferred([T0, TopicPartition("t", 7), TopicPartition("x", 0)])
    assert again.results[T0].error == ErrorCode.election_not_needed
    assert again.results[TopicPartition("t", 7)].error == ErrorCode.unknown_topic_or_partition
    assert again.results[TopicPartition("x", 0)].error == ErrorCode.unknown_topic_or_partition
    assert again.writes == []


def imbalanced(**settings: Any) -> tuple[ControllerState, Znodes, ManualClock]:
    """Broker 1 prefers 3 partitions but, after a bounce, leads none of them."""
    controller, zk, clock = cluster(
        assignment={0: (1, 2, 3), 1: (1, 3, 2), 2: (1, 2, 3), 3: (2, 3, 1)}, **settings
    )
    zk.apply(controller, controller.brokers_failed([1]))
    zk.apply(controller, controller.brokers_started([1]))
    for p in range(4):
        tp = TopicPartition("t", p)
        state = zk.data[tp]
        outcome = controller.alter_partition(
            state.leader, tp, state.leader_epoch, (*state.isr, 1), state.version
        )
        assert outcome.write is not None
        zk.apply(controller, [outcome.write])
    return controller, zk, clock


def test_auto_rebalance_runs_on_the_clock_and_moves_leaders_back() -> None:
    controller, zk, clock = imbalanced(leader_imbalance_check_interval_seconds=300)
    assert controller.rebalance_if_due() == []  # Kafka's first check is 5 s after take-over
    clock.advance(5_000)
    writes = controller.rebalance_if_due()
    assert {w.partition.partition for w in writes} == {0, 1, 2}
    assert {w.reason for w in writes} == {Reason.PREFERRED_ELECTION}
    zk.apply(controller, writes)
    assert [zk.data[TopicPartition("t", p)].leader for p in range(4)] == [1, 1, 1, 2]
    assert controller.next_rebalance_check_ms == clock.monotonic_ms() + 300_000
    clock.advance(299_999)
    assert controller.rebalance_if_due() == []


def test_no_rebalance_below_the_imbalance_percentage_or_when_disabled() -> None:
    controller, _, clock = imbalanced(leader_imbalance_per_broker_percentage=100)
    clock.advance(5_000)
    assert controller.rebalance_if_due() == []  # 3/3 is not above 100 %
    controller, _, clock = imbalanced(auto_leader_rebalance_enable=False)
    clock.advance(5_000)
    assert controller.rebalance_if_due() == []
    assert len(controller.rebalance_leaders()) == 3  # the check itself still works on demand


# -- controlled shutdown -------------------------------------------------------------------


def test_controlled_shutdown_leaves_the_broker_leading_nothing() -> None:
    layout = {0: (1, 2, 3), 1: (2, 1, 3), 2: (3, 2, 1)}
    controller, zk, _ = cluster(assignment=layout)
    outcome = controller.controlled_shutdown(1)
    assert outcome.still_led == frozenset()
    zk.apply(controller, outcome.writes)
    assert zk.data[T0] == PartitionState(2, 1, (2, 3), 1, version=1)
    for p in (1, 2):
        state = zk.data[TopicPartition("t", p)]
        assert 1 not in state.isr and state.leader_epoch == 1
    assert controller.partitions_led_by(1) == frozenset()
    # The broker then stops: nothing left to move.
    assert controller.brokers_failed([1]) == []


def test_controlled_shutdown_keeps_what_has_no_other_isr_member() -> None:
    controller, zk, _ = cluster(assignment={0: (1, 2), 1: (1,)})
    zk.apply(controller, controller.brokers_failed([2]))
    outcome = controller.controlled_shutdown(1)
    assert outcome.writes == []
    # Neither can move: t-0's other replica is down, t-1 has none. The answer names neither
    # (Kafka names t-0, and its broker retries in vain).
    assert outcome.still_led == frozenset()
    assert controller.partitions_led_by(1) == {T0, TopicPartition("t", 1)}
    with pytest.raises(KafkaError) as e:
        controller.controlled_shutdown(2)
    assert e.value.code == ErrorCode.broker_not_available


def test_a_shutting_down_broker_may_not_rejoin_an_isr() -> None:
    controller, zk, _ = cluster()
    zk.apply(controller, controller.controlled_shutdown(3).writes)
    state = zk.data[T0]
    outcome = controller.alter_partition(1, T0, state.leader_epoch, (1, 2, 3), state.version)
    assert outcome.error == ErrorCode.ineligible_replica


# -- a leader's ISR changes ----------------------------------------------------------------


def test_a_leaders_isr_change_keeps_the_epoch_and_moves_the_version() -> None:
    controller, zk, _ = cluster()
    outcome = controller.alter_partition(1, T0, 0, (1, 2), 0)
    assert outcome.error == ErrorCode.none and outcome.write is not None
    assert outcome.write.expected_version == 0
    zk.apply(controller, [outcome.write])
    assert zk.data[T0] == PartitionState(1, 0, (1, 2), 1, version=1)
    # A retry of the same change after a lost answer succeeds without a write.
    retry = controller.alter_partition(1, T0, 0, (1, 2), 0)
    assert retry.error == ErrorCode.none and retry.write is None and retry.state == zk.data[T0]


@pytest.mark.parametrize(
    ("broker", "epoch", "isr", "version", "error"),
    [
        (1, 0, (1, 2), 0, ErrorCode.fenced_leader_epoch),  # the epoch moved on to 1
        (2, 1, (2,), 1, ErrorCode.not_leader_or_follower),
        (1, 2, (1,), 1, ErrorCode.not_controller),  # the leader knows more than we do
        (1, 1, (1,), 0, ErrorCode.invalid_update_version),
        (1, 1, (2, 3), 1, ErrorCode.invalid_request),  # the leader left out
        (1, 1, (1, 1), 1, ErrorCode.invalid_request),
        (1, 1, (1, 9), 1, ErrorCode.invalid_request),  # not a replica
    ],
)
def test_a_leaders_isr_change_is_checked(
    broker: int, epoch: int, isr: tuple[int, ...], version: int, error: ErrorCode
) -> None:
    controller, zk, _ = cluster(brokers=(1, 2, 3, 9))
    zk.apply(controller, controller.brokers_failed([3]))  # epoch 1, version 1, ISR 1, 2
    outcome = controller.alter_partition(broker, T0, epoch, isr, version)
    assert (outcome.error, outcome.write) == (error, None)


def test_a_dead_broker_cannot_join_the_isr_and_unknown_partitions_are_refused() -> None:
    controller, zk, _ = cluster()
    zk.apply(controller, controller.brokers_failed([3]))
    assert controller.alter_partition(1, T0, 1, (1, 2, 3), 1).error == ErrorCode.ineligible_replica
    missing = TopicPartition("t", 5)
    assert controller.alter_partition(1, missing, 0, (1,), 0).error == (
        ErrorCode.unknown_topic_or_partition
    )


# -- compare-and-set conflicts -------------------------------------------------------------


def test_a_conflicting_write_is_decided_again_on_the_state_read_back() -> None:
    controller, zk, _ = cluster(brokers=(1, 2, 3, 4), assignment={0: (1, 2, 3, 4)})
    # The leader shrinks the ISR (removing 4) before the controller hears of it...
    zk.set_by_leader(T0, (1, 2, 3))
    # ...and the controller, still thinking 4 is in sync, handles broker 1's death.
    writes = controller.brokers_failed([1])
    assert writes[0].expected_version == 0 and writes[0].state.isr == (2, 3, 4)
    zk.apply(controller, writes)
    assert zk.data[T0] == PartitionState(2, 1, (2, 3), 1, version=2)
    check_cache(controller, zk)


def test_a_state_read_after_a_leaders_own_write_keeps_the_next_write_free_of_conflict() -> None:
    controller, zk, _ = cluster()
    zk.set_by_leader(T0, (1, 2))
    controller.state_read(T0, zk.data[T0])
    assert controller.state(T0) == zk.data[T0]
    writes = controller.brokers_failed([1])
    assert writes[0].expected_version == 1
    zk.apply(controller, writes)
    assert zk.data[T0] == PartitionState(2, 1, (2,), 1, version=2)
    with pytest.raises(KafkaError) as e:
        controller.state_read(T0, replace(zk.data[T0], controller_epoch=2))
    assert e.value.code == ErrorCode.not_controller


def test_an_isr_change_that_loses_the_race_is_not_retried() -> None:
    controller, zk, _ = cluster()
    outcome = controller.alter_partition(1, T0, 0, (1, 2), 0)
    assert outcome.write is not None
    zk.set_by_leader(T0, (1, 3))
    assert controller.write_conflicted(outcome.write, zk.data[T0]) == []
    assert controller.state(T0) == zk.data[T0]


def test_a_newer_controller_epoch_in_the_znode_fences_this_controller() -> None:
    controller, zk, _ = cluster()
    writes = controller.brokers_failed([1])
    zk.data[T0] = replace(zk.data[T0], controller_epoch=2, version=5)
    with pytest.raises(KafkaError) as e:
        zk.apply(controller, writes)
    assert e.value.code == ErrorCode.not_controller


# -- topic deletion ------------------------------------------------------------------------


def test_deleting_a_topic_names_its_replicas_and_forgets_it() -> None:
    controller, _, _ = cluster(assignment={0: (1, 2), 1: (2, 3)})
    pending = controller.brokers_failed([2])
    deletion = controller.delete_topic("t")
    assert deletion.partitions == (T0, TopicPartition("t", 1))
    assert deletion.replicas == {
        1: (T0,),
        2: (T0, TopicPartition("t", 1)),
        3: (TopicPartition("t", 1),),
    }
    assert "t" not in controller.topics and controller.state(T0) is None
    # Writes decided before the deletion come to nothing.
    assert controller.write_conflicted(pending[0], None) == []
    with pytest.raises(KafkaError) as e:
        controller.delete_topic("t")
    assert e.value.code == ErrorCode.unknown_topic_or_partition


# -- controller failover -------------------------------------------------------------------


def test_a_new_controller_bumps_the_epoch_and_repairs_what_changed_while_none_was_active() -> None:
    _, zk, _ = cluster(assignment={0: (1, 2, 3), 1: (2, 3, 1)})
    # Broker 1 died while there was no controller; t-2 was added with no state yet.
    successor, writes = ControllerState.elected(
        1,
        ManualClock(),
        live_brokers=(2, 3),
        assignments={"t": {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}},
        states=dict(zk.data),
    )
    assert successor.controller_epoch == 2
    zk.apply(successor, writes)
    assert zk.data[T0] == PartitionState(2, 1, (2, 3), 2, version=1)
    assert zk.data[TopicPartition("t", 1)] == PartitionState(2, 1, (2, 3), 2, version=1)
    assert zk.data[TopicPartition("t", 2)] == PartitionState(3, 0, (3, 2), 2, version=0)
    check_cache(successor, zk)


def test_isr_members_that_registered_again_unseen_are_not_elected() -> None:
    # The state was written at zxid 500 with ISR (1, 2, 3), leader 1. Brokers 1 and 3 then
    # restarted while no controller was active (registrations at zxids 610 and 620): their logs
    # may have lost records, and nobody took them out of the ISR. Broker 2 registered before.
    written = PartitionState(1, 4, (1, 2, 3), 1, version=7, written_zxid=500)
    successor, writes = ControllerState.elected(
        1,
        ManualClock(),
        live_brokers=(1, 2, 3),
        assignments={"t": {0: (1, 2, 3)}},
        states={T0: written},
        broker_epochs={1: 610, 2: 100, 3: 620},
    )
    zk = Znodes()
    zk.data[T0] = written
    zk.apply(successor, writes)
    assert zk.data[T0] == PartitionState(2, 5, (2,), 2, version=8)


def test_a_restarted_member_is_kept_when_no_member_stayed_registered() -> None:
    # A whole cluster restarted: every member registered after the write. The ISR is still the
    # best there is (Kafka elects from it), so nothing changes.
    written = PartitionState(1, 4, (1, 2), 1, version=7, written_zxid=500)
    _, writes = ControllerState.elected(
        1,
        ManualClock(),
        live_brokers=(1, 2, 3),
        assignments={"t": {0: (1, 2, 3)}},
        states={T0: written},
        broker_epochs={1: 610, 2: 620, 3: 630},
    )
    assert writes == []
    # Registered before the write: in sync as ever.
    _, writes = ControllerState.elected(
        1,
        ManualClock(),
        live_brokers=(1, 2, 3),
        assignments={"t": {0: (1, 2, 3)}},
        states={T0: written},
        broker_epochs={1: 100, 2: 200, 3: 630},
    )
    assert writes == []


def test_a_controller_older_than_the_states_it_reads_refuses_to_start() -> None:
    with pytest.raises(KafkaError) as e:
        ControllerState.elected(
            0,
            ManualClock(),
            live_brokers=(1,),
            assignments={"t": {0: (1,)}},
            states={T0: PartitionState(1, 0, (1,), 3, version=0)},
        )
    assert e.value.code == ErrorCode.not_controller


# -- invariants ----------------------------------------------------------------------------

BROKERS = (1, 2, 3, 4)
events = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "fail",
                "start",
                "bounce",
                "shutdown",
                "preferred",
                "rebalance",
                "shrink",
                "expand",
                "unclean",
                "dir",
            ]
        ),
        st.sampled_from(BROKERS),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(events)
def test_leaders_are_in_sync_isrs_never_empty_and_epochs_never_go_back(
    history: list[tuple[str, int]],
) -> None:
    layout = {0: (1, 2, 3), 1: (2, 3, 4), 2: (3, 4, 1), 3: (4, 1), 4: (2,)}
    controller, zk, _ = cluster(brokers=BROKERS, assignment=layout)
    epochs = {tp: s.leader_epoch for tp, s in zk.data.items()}
    unclean = False
    for event, broker in history:
        if event == "fail":
            writes = controller.brokers_failed([broker])
        elif event == "start":
            writes = controller.brokers_started([broker])
        elif event == "bounce" and broker in controller.live_brokers:
            writes = controller.brokers_changed(controller.live_brokers, bounced=[broker])
        elif event == "shutdown" and broker in controller.live_brokers:
            writes = controller.controlled_shutdown(broker).writes
        elif event == "preferred":
            writes = controller.elect_preferred().writes
        elif event == "rebalance":
            writes = controller.rebalance_leaders()
        elif event == "dir":
            failed = [tp for tp in zk.data if broker in controller.assignment("t")[tp.partition]]
            writes = controller.log_dir_failed(broker, failed)
        elif event == "unclean":
            unclean = True
            writes = controller.set_topic_configs("t", {"unclean.leader.election.enable": "true"})
        elif event in ("shrink", "expand"):
            writes = []
            for tp, state in sorted(zk.data.items()):
                if state.leader != broker:
                    continue
                replicas = controller.assignment("t")[tp.partition]
                isr = (
                    (broker,)
                    if event == "shrink"
                    else tuple(r for r in replicas if r in controller.live_brokers)
                )
                outcome = controller.alter_partition(
                    broker, tp, state.leader_epoch, isr, state.version
                )
                if outcome.write is not None:
                    writes.append(outcome.write)
        else:
            writes = []
        zk.apply(controller, writes)
        check_cache(controller, zk)
        for tp, state in zk.data.items():
            assert state.isr, (tp, state)
            assert state.leader == NO_LEADER or state.leader in state.isr, (tp, state)
            assert state.leader == NO_LEADER or state.leader in controller.live_brokers
            assert state.leader not in controller.offline_replicas(tp)
            assert state.leader_epoch >= epochs.get(tp, 0)
            epochs[tp] = state.leader_epoch
        # Nothing stays offline that the controller could bring online.
        for p, replicas in layout.items():
            tp = TopicPartition("t", p)
            eligible = (
                controller.live_brokers - controller.shutting_down - controller.offline_replicas(tp)
            )
            found = zk.data.get(tp)
            if found is None:
                assert not eligible & set(replicas)
            elif found.leader == NO_LEADER:
                assert not eligible & set(found.isr)
                assert not (unclean and eligible & set(replicas))


# -- partition reassignment ----------------------------------------------------------------


class Assignments:
    """Topic znodes' partition entries, as the shell writes them, followed by each write's
    ISR change, as the shell applies it."""

    def __init__(self, zk: Znodes) -> None:
        self.zk = zk
        self.entries: dict[TopicPartition, AssignmentWrite] = {}

    def apply(self, controller: ControllerState, writes: Sequence[AssignmentWrite]) -> None:
        for write in writes:
            self.entries[write.partition] = write
            self.zk.apply(controller, controller.assignment_applied(write))

    def progress(self, controller: ControllerState) -> None:
        """The shell's loop: leaders into targets, then the final assignments."""
        for _ in range(5):
            steps = controller.reassignment_steps()
            if not steps.states and not steps.assignments:
                return
            self.zk.apply(controller, steps.states)
            self.apply(controller, steps.assignments)
        raise AssertionError("reassignment steps never ended")


def reassigning(
    brokers: tuple[int, ...] = (1, 2, 3),
    assignment: tuple[int, ...] = (1, 2),
) -> tuple[ControllerState, Znodes, Assignments]:
    controller, zk, _ = cluster(brokers, {0: assignment})
    return controller, zk, Assignments(zk)


def test_a_move_first_assigns_the_union_with_adding_and_removing_replicas() -> None:
    controller, zk, topic = reassigning()
    outcome = controller.reassign({T0: (2, 3)})
    assert outcome.results[T0].error == ErrorCode.none
    topic.apply(controller, outcome.assignments)
    assert topic.entries[T0] == AssignmentWrite(T0, (2, 3, 1), adding=(3,), removing=(1,))
    assert controller.assignment("t")[0] == (2, 3, 1)
    assert controller.reassignments[T0] == Reassignment((1, 2), (2, 3))
    # Nothing more until the new replica is in sync: the leader and ISR stay.
    topic.progress(controller)
    assert zk.data[T0] == PartitionState(1, 0, (1, 2), 1, version=0)
    assert T0 in controller.reassignments


def test_a_move_completes_when_the_target_is_in_sync_moving_the_leader_into_it() -> None:
    controller, zk, topic = reassigning()
    topic.apply(controller, controller.reassign({T0: (2, 3)}).assignments)
    zk.set_by_leader(T0, (1, 2, 3))  # the leader saw broker 3 catch up
    controller.state_read(T0, zk.data[T0])
    topic.progress(controller)
    # Leader 1 is leaving: broker 2 leads (epoch bumped), 1 out of the ISR, the move done.
    assert zk.data[T0].leader == 2 and zk.data[T0].leader_epoch == 1
    assert zk.data[T0].isr == (2, 3)
    assert topic.entries[T0] == AssignmentWrite(T0, (2, 3))
    assert controller.assignment("t")[0] == (2, 3)
    assert controller.reassignments == {}
    check_cache(controller, zk)


def test_a_move_keeping_the_leader_only_drops_the_removed_replica_from_the_isr() -> None:
    controller, zk, topic = reassigning(assignment=(2, 1))
    zk.apply(controller, controller.elect_preferred([T0]).writes)
    assert zk.data[T0].leader == 2
    topic.apply(controller, controller.reassign({T0: (2, 3)}).assignments)
    zk.set_by_leader(T0, (2, 1, 3))
    controller.state_read(T0, zk.data[T0])
    epoch = zk.data[T0].leader_epoch
    topic.progress(controller)
    assert topic.entries[T0] == AssignmentWrite(T0, (2, 3))
    assert zk.data[T0].leader == 2 and zk.data[T0].isr == (2, 3)
    assert zk.data[T0].leader_epoch == epoch + 1


def test_a_cancelled_move_goes_back_to_the_original_replicas_at_once() -> None:
    controller, zk, topic = reassigning()
    topic.apply(controller, controller.reassign({T0: (2, 3)}).assignments)
    zk.set_by_leader(T0, (1, 2))
    controller.state_read(T0, zk.data[T0])
    outcome = controller.reassign({T0: None})
    assert outcome.results[T0].error == ErrorCode.none
    topic.apply(controller, outcome.assignments)
    assert topic.entries[T0] == AssignmentWrite(T0, (1, 2))
    assert controller.reassignments == {}
    assert zk.data[T0].isr == (1, 2)


def test_cancelling_after_the_new_replica_joined_the_isr_takes_it_out() -> None:
    controller, zk, topic = reassigning(assignment=(1, 2, 3))
    topic.apply(controller, controller.reassign({T0: (1, 2)}).assignments)
    # Only removing: the target is in sync already, so the move is done at the next step.
    topic.progress(controller)
    assert topic.entries[T0] == AssignmentWrite(T0, (1, 2))
    assert zk.data[T0].isr == (1, 2)
    assert (
        controller.reassign({T0: None}).results[T0].error == ErrorCode.no_reassignment_in_progress
    )


def test_a_new_target_during_a_move_keeps_the_original_and_drops_the_other_new_replica() -> None:
    controller, zk, topic = reassigning(brokers=(1, 2, 3, 4))
    topic.apply(controller, controller.reassign({T0: (2, 3)}).assignments)
    zk.set_by_leader(T0, (1, 2))
    controller.state_read(T0, zk.data[T0])
    topic.apply(controller, controller.reassign({T0: (2, 4)}).assignments)
    assert controller.reassignments[T0] == Reassignment((1, 2), (2, 4))
    assert topic.entries[T0] == AssignmentWrite(T0, (2, 4, 1), adding=(4,), removing=(1,))


def test_bad_targets_are_refused_per_partition() -> None:
    controller, _, _ = reassigning()
    missing = TopicPartition("t", 7)
    outcome = controller.reassign({T0: (), missing: (1,), TopicPartition("nope", 0): (1,)})
    assert outcome.results[T0].error == ErrorCode.invalid_replica_assignment
    assert outcome.results[missing].error == ErrorCode.unknown_topic_or_partition
    assert outcome.assignments == []
    for target in ((2, 2), (2, 9)):
        assert controller.reassign({T0: target}).results[T0].error == (
            ErrorCode.invalid_replica_assignment
        )
    refused = controller.reassign({T0: (1, 2, 3)}, allow_replication_factor_change=False)
    assert refused.results[T0].error == ErrorCode.invalid_replication_factor
    assert controller.reassign({T0: (1, 2)}).assignments == []  # no change: nothing to write
    assert controller.reassignments == {}
    # A replica kept may be down; only those to add must be alive.
    controller.brokers_failed([1])
    assert controller.reassign({T0: (1, 3)}).results[T0].error == ErrorCode.none


def test_a_reordered_target_only_rewrites_the_assignment() -> None:
    controller, zk, topic = reassigning()
    outcome = controller.reassign({T0: (2, 1)})
    topic.apply(controller, outcome.assignments)
    assert topic.entries[T0] == AssignmentWrite(T0, (2, 1))
    assert controller.reassignments == {}
    assert zk.data[T0].leader == 1  # the preferred election moves it later


def test_a_new_controller_resumes_a_move_from_the_topic_znode() -> None:
    controller, zk, topic = reassigning()
    topic.apply(controller, controller.reassign({T0: (2, 3)}).assignments)
    zk.set_by_leader(T0, (1, 2, 3))
    entry = topic.entries[T0]
    successor, writes = ControllerState.elected(
        controller.controller_epoch,
        ManualClock(),
        live_brokers=(1, 2, 3),
        assignments={"t": {0: entry.replicas}},
        states=dict(zk.data),
        reassignments={
            T0: Reassignment.from_assignment(entry.replicas, entry.adding, entry.removing)
        },
    )
    assert writes == []
    # The znode keeps the original replicas' set, not their order (Kafka's neither).
    assert successor.reassignments == {T0: Reassignment((2, 1), (2, 3))}
    topic.progress(successor)
    assert topic.entries[T0] == AssignmentWrite(T0, (2, 3))
    assert zk.data[T0].leader == 2 and zk.data[T0].controller_epoch == 2


def test_a_move_waits_while_a_target_replica_is_down() -> None:
    controller, zk, topic = reassigning()
    topic.apply(controller, controller.reassign({T0: (2, 3)}).assignments)
    zk.apply(controller, controller.brokers_failed([3]))
    topic.progress(controller)
    assert T0 in controller.reassignments
    assert topic.entries[T0].adding == (3,)


def test_a_leader_change_conflicting_with_the_move_is_decided_again() -> None:
    controller, zk, topic = reassigning()
    topic.apply(controller, controller.reassign({T0: (2, 3)}).assignments)
    zk.set_by_leader(T0, (1, 2, 3))
    controller.state_read(T0, zk.data[T0])
    steps = controller.reassignment_steps()
    assert [w.reason for w in steps.states] == [Reason.REASSIGNMENT]
    zk.set_by_leader(T0, (1, 3))  # broker 2 fell behind before the write landed
    zk.apply(controller, steps.states)
    # Decided again on what the znode holds: the target is no longer in sync, nothing moves.
    assert zk.data[T0].leader == 1 and zk.data[T0].isr == (1, 3)
    assert T0 in controller.reassignments


# -- unclean election (KIP-460) ------------------------------------------------------------


def test_an_unclean_election_picks_a_live_replica_out_of_the_isr() -> None:
    controller, zk, _ = cluster()
    zk.set_by_leader(T0, (1,))
    controller.state_read(T0, zk.data[T0])
    zk.apply(controller, controller.brokers_failed([1]))
    assert zk.data[T0].leader == NO_LEADER
    outcome = controller.elect_unclean([T0, TopicPartition("t", 5)])
    assert outcome.results[T0].error == ErrorCode.none and outcome.results[T0].leader == 2
    assert outcome.results[TopicPartition("t", 5)].error == ErrorCode.unknown_topic_or_partition
    zk.apply(controller, outcome.writes)
    assert zk.data[T0].leader == 2 and zk.data[T0].isr == (2,)
    again = controller.elect_unclean([T0])
    assert again.results[T0].error == ErrorCode.election_not_needed


def test_an_unclean_election_with_no_live_replica_is_refused() -> None:
    controller, zk, _ = cluster(assignment={0: (1,)})
    zk.apply(controller, controller.brokers_failed([1]))
    outcome = controller.elect_unclean([T0])
    assert outcome.results[T0].error == ErrorCode.eligible_leaders_not_available
    assert outcome.writes == []


# -- eligible leader replicas (KIP-966) ----------------------------------------------------


def _lose_two_then_the_last(controller: ControllerState, zk: Znodes) -> None:
    zk.apply(controller, controller.brokers_failed([3]))  # ISR 1, 2: at min.insync.replicas
    assert zk.data[T0].elr == ()
    zk.apply(controller, controller.brokers_failed([2]))  # below it: 2 still has every commit
    assert zk.data[T0] == PartitionState(1, 2, (1,), 1, version=2, elr=(2,))
    zk.apply(controller, controller.brokers_failed([1]))
    assert (zk.data[T0].leader, zk.data[T0].isr, zk.data[T0].elr) == (NO_LEADER, (1,), (2,))


def test_an_eligible_leader_replica_leads_cleanly_where_only_the_last_isr_member_could() -> None:
    controller, zk, _ = cluster(eligible_leader_replicas=True, min_insync_replicas=2)
    _lose_two_then_the_last(controller, zk)
    # 3 left while the ISR was still at min.insync.replicas: it may have missed commits.
    assert controller.brokers_started([3]) == []
    zk.apply(controller, controller.brokers_started([2]))
    # 2 leads (a clean election); 1, the last ISR member, is eligible in its turn.
    assert zk.data[T0] == PartitionState(2, 4, (2,), 1, version=4, elr=(1,))
    check_cache(controller, zk)
    # The ISR back at min.insync.replicas: no replica needs to be eligible any more.
    outcome = controller.alter_partition(2, T0, 4, (2, 3), 4)
    assert outcome.error == ErrorCode.none and outcome.write is not None
    zk.apply(controller, [outcome.write])
    assert zk.data[T0].isr == (2, 3) and zk.data[T0].elr == ()


def test_without_eligible_leader_replicas_the_partition_stays_offline() -> None:
    controller, zk, _ = cluster(min_insync_replicas=2)
    zk.apply(controller, controller.brokers_failed([3]))
    zk.apply(controller, controller.brokers_failed([2]))
    zk.apply(controller, controller.brokers_failed([1]))
    assert zk.data[T0].elr == ()
    assert controller.brokers_started([2]) == []
    assert zk.data[T0].leader == NO_LEADER


def test_a_topics_min_insync_replicas_decides_who_is_eligible() -> None:
    controller, zk, _ = cluster(eligible_leader_replicas=True)  # the broker's: 1
    zk.apply(controller, controller.brokers_failed([3]))
    zk.apply(controller, controller.brokers_failed([2]))
    assert zk.data[T0].elr == ()  # an ISR of one is at min.insync.replicas=1
    controller.set_topic_configs("t", {"min.insync.replicas": "3"})
    zk.apply(controller, controller.brokers_failed([1]))
    assert zk.data[T0].elr == ()  # nobody left the ISR while it was below 3
