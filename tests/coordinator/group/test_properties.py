"""Random conversations between a few members and the coordinator, on a manual clock: whatever
they do, the group stays consistent, every request gets exactly one answer, and when everyone
falls silent the group empties and no request is left waiting."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.group.group import GroupState
from odradek.coordinator.group.messages import JoinResult, MemberIdentity, SyncResult
from odradek.protocol.errors import ErrorCode

from .support import REBALANCE_MS, SESSION_MS, Box, Consumer, Harness, assignment

MEMBERS = 4


@dataclass
class Client:
    """What a client remembers between requests."""

    consumer: Consumer
    join: Box | None = None
    sync: Box | None = None
    boxes: list[Box] = field(default_factory=list)
    synced_generation: int = -1
    rejoin: bool = True

    def act(self) -> None:
        """The next step of a well-behaved consumer."""
        c = self.consumer
        if self.join is not None or self.sync is not None:
            return
        if self.rejoin:
            self.join = c.send_join()
            self.boxes.append(self.join)
        elif self.synced_generation != c.generation and c.last_join is not None:
            given = {}
            if c.is_leader:
                given = {
                    m.member_id: assignment({"t": [i]}) for i, m in enumerate(c.last_join.members)
                }
            self.sync = c.send_sync(given)
            self.boxes.append(self.sync)
        else:
            error = c.heartbeat()
            if error == ErrorCode.unknown_member_id or error == ErrorCode.fenced_instance_id:
                c.member_id, c.generation = "", -1
            if error != ErrorCode.none:
                self.rejoin = True

    def settle(self) -> None:
        """React to answers as a client would."""
        c = self.consumer
        if self.join is not None and self.join.done:
            result = self.join.results[0]
            assert isinstance(result, JoinResult)
            if result.error == ErrorCode.none:
                c.member_id, c.generation, c.last_join = (
                    result.member_id,
                    result.generation_id,
                    result,
                )
                self.rejoin = False
            elif result.error in (ErrorCode.unknown_member_id, ErrorCode.fenced_instance_id):
                c.member_id, c.generation = "", -1
            self.join = None
        if self.sync is not None and self.sync.done:
            result = self.sync.results[0]
            assert isinstance(result, SyncResult)
            if result.error == ErrorCode.none:
                self.synced_generation = self.consumer.generation
            else:
                self.rejoin = True
            self.sync = None


operations = st.one_of(
    st.tuples(st.just("act"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("act"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("act"), st.integers(0, MEMBERS - 1)),
    st.tuples(
        st.sampled_from(["join", "sync", "heartbeat", "leave", "commit"]),
        st.integers(0, MEMBERS - 1),
    ),
    st.tuples(st.just("advance"), st.sampled_from([50, 1000, 4000, SESSION_MS, REBALANCE_MS])),
    st.tuples(st.just("restart"), st.just(0)),
)


def check_group(h: Harness, generations: list[int]) -> None:
    group = h.coordinator.groups.get("g")
    if group is None:
        return
    members = group.members
    if members:
        assert group.leader_id in members
    elif not group.pending_members:
        assert group.state is GroupState.EMPTY, group.state
    assert group.generation >= (generations[-1] if generations else 0)
    generations.append(group.generation)
    assert {i: m for i, m in group.static_members.items()} == {
        m.group_instance_id: m.member_id for m in members.values() if m.group_instance_id
    }
    if group.state is GroupState.STABLE:
        assert not any(m.awaiting_join or m.sync_reply for m in members.values())
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        assert group.protocol_name is not None
        assert all(group.protocol_name in m.protocol_names for m in members.values())
    sessions = {key[2] for key in h.coordinator.timers._entries if key[0] == "session"}
    assert sessions <= set(members) | group.pending_members, "a timer outlived its member"


def run(h: Harness, clients: list[Client], steps: list[tuple[str, int]]) -> Harness:
    generations: list[int] = []
    for op, arg in steps:
        if op == "advance":
            h.run_for(arg)
        elif op == "restart":
            h.coordinator.shutdown()
            h = h.restarted()
            for client in clients:
                client.consumer.h = h
                client.join = client.sync = None  # the connections dropped
            # A generation never stored (no SyncGroup finished it) is forgotten by a restart.
            generations.clear()
        else:
            client = clients[arg]
            c = client.consumer
            if op == "act":
                client.act()
            elif op == "join" and client.join is None:
                client.join = c.send_join()
                client.boxes.append(client.join)
            elif op == "sync" and client.sync is None and c.last_join is not None:
                given = {}
                if c.is_leader:
                    given = {
                        m.member_id: assignment({"t": [i]})
                        for i, m in enumerate(c.last_join.members)
                    }
                client.sync = c.send_sync(given)
                client.boxes.append(client.sync)
            elif op == "heartbeat" and c.member_id:
                c.heartbeat()
            elif op == "leave" and c.member_id:
                h.coordinator.leave_group("g", [MemberIdentity(c.member_id, c.instance_id)])
                c.member_id, c.generation, client.rejoin = "", -1, True
            elif op == "commit":
                c.commit({("t", 0): len(generations)})
        for client in clients:
            client.settle()
        check_group(h, generations)
    return h


@settings(max_examples=200, deadline=None)
@given(
    st.lists(operations, max_size=80), st.lists(st.booleans(), min_size=MEMBERS, max_size=MEMBERS)
)
def test_any_conversation_keeps_the_group_consistent(
    steps: list[tuple[str, int]], static: list[bool]
) -> None:
    h = Harness()
    clients = [
        Client(h.member(instance_id=f"i{i}" if static[i] else None, client_id=f"c{i}"))
        for i in range(MEMBERS)
    ]
    h = run(h, clients, steps)
    # Everyone falls silent: sessions and rebalances time out.
    for _ in range(4):
        h.run_for(REBALANCE_MS + SESSION_MS)
    for client in clients:
        for box in client.boxes:
            assert len(box.results) <= 1, f"two answers to one request: {box.results}"
        for box in client.boxes:
            assert box.done, "a request was never answered"
            result = box.results[0]
            assert isinstance(result, JoinResult | SyncResult)
    group = h.coordinator.groups.get("g")
    assert group is None or (group.state is GroupState.EMPTY and not group.members)
