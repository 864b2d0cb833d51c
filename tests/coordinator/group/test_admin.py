"""ListGroups, DescribeGroups, DeleteGroups, and request validation."""

from __future__ import annotations

from odradek.coordinator.group.messages import JoinResult
from odradek.protocol.errors import ErrorCode

from .support import Harness, assignment, form_group


def join_error(h: Harness, request: object) -> ErrorCode:
    replies: list[object] = []
    h.coordinator.join_group(request, replies.append)  # type: ignore[arg-type]
    (result,) = replies
    assert isinstance(result, JoinResult)
    return result.error


def test_list_and_describe() -> None:
    h = Harness()
    a, b = h.member(client_id="alpha"), h.member(client_id="beta")
    form_group(h, a, b)
    other = h.member(group="other")
    other.join()
    listed = {
        g.group_id: (g.state, g.protocol_type, g.group_type) for g in h.coordinator.list_groups()
    }
    assert listed == {
        "g": ("Stable", "consumer", "classic"),
        "other": ("CompletingRebalance", "consumer", "classic"),
    }
    assert [g.group_id for g in h.coordinator.list_groups(states=["stable"])] == ["g"]
    assert h.coordinator.list_groups(types=["consumer"]) == []

    described = h.coordinator.describe_group("g")
    assert described.error == ErrorCode.none
    assert (described.state, described.protocol_type, described.protocol_name) == (
        "Stable",
        "consumer",
        "range",
    )
    members = {m.client_id: m for m in described.members}
    assert set(members) == {"alpha", "beta"}
    assert members["alpha"].assignment == assignment({"t": [0]})
    assert members["alpha"].client_host == "/127.0.0.1"
    assert members["alpha"].metadata.startswith(b"\x00\x00")

    rebalancing = h.coordinator.describe_group("other")
    assert rebalancing.protocol_name == "" and rebalancing.members[0].assignment == b""
    assert h.coordinator.describe_group("nope").error == ErrorCode.group_id_not_found


def test_delete_groups() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    a.commit({("t", 0): 1})
    assert h.coordinator.delete_groups(["g", "nope"]) == {
        "g": ErrorCode.non_empty_group,
        "nope": ErrorCode.group_id_not_found,
    }
    a.leave()
    assert h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    assert h.coordinator.offsets.fetch_offsets("g", None).offsets == ()
    assert h.coordinator.list_groups() == []


def test_join_validation() -> None:
    h = Harness(min_session_timeout_ms=1000, max_session_timeout_ms=5000, max_group_size=2)
    a = h.member(session_ms=999)
    assert join_error(h, a.join_request()) == ErrorCode.invalid_session_timeout
    a.session_ms = 5001
    assert join_error(h, a.join_request()) == ErrorCode.invalid_session_timeout
    a.session_ms = 3000
    a.group = ""
    assert join_error(h, a.join_request()) == ErrorCode.invalid_group_id
    a.group = "g"
    assert join_error(h, a.join_request(member_id="made-up")) == ErrorCode.unknown_member_id
    assert h.coordinator.groups == {}, "refused joins leave no group behind"

    b, c = h.member(session_ms=3000), h.member(session_ms=3000)
    form_group(h, a, b)
    assert join_error(h, c.join_request()) == ErrorCode.group_max_size_reached
    assert a.heartbeat() == ErrorCode.none and b.heartbeat() == ErrorCode.none


def test_sync_validation() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    b = h.member()
    box_b = b.send_join()
    assert a.sync().error == ErrorCode.rebalance_in_progress
    a.join()
    b.joined(box_b)
    wrong = a.last_join
    assert wrong is not None
    a.generation += 1
    assert a.sync().error == ErrorCode.illegal_generation
    a.generation -= 1
    a.group = ""
    assert a.sync().error == ErrorCode.invalid_group_id
    a.group = "g"
    assert a.heartbeat() == ErrorCode.none
