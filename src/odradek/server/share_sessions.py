"""Share sessions (KIP-932): the partitions a share group member fetches from this broker, named
once and then changed by difference, as ShareFetch and ShareAcknowledge carry them.

A session is the member's, one per (group, member id). Epoch 0 opens one (replacing the member's
old one, whose held records are released) from the request's partitions; a request with epoch
``n > 0`` must carry the epoch the session expects next (INVALID_SHARE_SESSION_EPOCH otherwise,
SHARE_SESSION_NOT_FOUND without a session), adds its partitions and drops the forgotten ones;
epoch -1 is the member's last request: the session closes after it and the records the member
holds are released. A ShareAcknowledge opens nothing (epoch 0 is INVALID_SHARE_SESSION_EPOCH).

At most ``group.share.max.share.sessions`` sessions are kept; when that many exist a new one
takes the place of the least recently used one idle for ``group.share.session.timeout.ms``, else
it is refused with SHARE_SESSION_LIMIT_REACHED. Pure bookkeeping with an injected clock; the
handlers call it on the event loop.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.clock import Clock
from odradek.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

SharePartitionKey = tuple[uuid.UUID, int]  # topic id, partition
SessionKey = tuple[str, str]  # group, member


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)
    last_used_ms: int = 0


@dataclass(frozen=True, slots=True)
class SessionOutcome:
    """A request's session: ``error`` (NONE: go on), the session (None for an error), whether
    the response lists every partition (a new session) and whether the session closed (epoch
    -1), and the session that this one replaced (its member's held records to release)."""

    error: ErrorCode
    session: ShareSession | None = None
    full: bool = False
    closed: bool = False
    replaced: ShareSession | None = None


class ShareSessionCache:
    def __init__(self, clock: Clock, max_sessions: int, idle_eviction_ms: int) -> None:
        self.clock = clock
        self.max_sessions = max_sessions
        self.idle_eviction_ms = idle_eviction_ms
        self._sessions: OrderedDict[SessionKey, ShareSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[SharePartitionKey],
        forgotten: Iterable[SharePartitionKey],
    ) -> SessionOutcome:
        """A ShareFetch's session."""
        key = (group_id, member_id)
        now = self.clock.monotonic_ms()
        if epoch == INITIAL_EPOCH:
            replaced = self._sessions.pop(key, None)
            if len(self._sessions) >= self.max_sessions and not self._evict(now):
                return SessionOutcome(ErrorCode.share_session_limit_reached, replaced=replaced)
            session = ShareSession(group_id, member_id, 1, dict.fromkeys(added), now)
            self._sessions[key] = session
            return SessionOutcome(ErrorCode.none, session, full=True, replaced=replaced)
        outcome = self._continue(key, epoch, now)
        if outcome.session is not None:
            # Added, then forgotten: a request acknowledging what it forgets names it in both.
            for partition in added:
                outcome.session.partitions[partition] = None
            for partition in forgotten:
                outcome.session.partitions.pop(partition, None)
        return outcome

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> SessionOutcome:
        """A ShareAcknowledge's session."""
        if epoch == INITIAL_EPOCH:
            return SessionOutcome(ErrorCode.invalid_share_session_epoch)
        return self._continue((group_id, member_id), epoch, self.clock.monotonic_ms())

    def _continue(self, key: SessionKey, epoch: int, now: int) -> SessionOutcome:
        session = self._sessions.get(key)
        if session is None:
            return SessionOutcome(ErrorCode.share_session_not_found)
        if epoch == FINAL_EPOCH:
            del self._sessions[key]
            return SessionOutcome(ErrorCode.none, session, closed=True)
        if epoch != session.epoch:
            return SessionOutcome(ErrorCode.invalid_share_session_epoch)
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        session.last_used_ms = now
        self._sessions.move_to_end(key)
        return SessionOutcome(ErrorCode.none, session)

    def _evict(self, now: int) -> bool:
        key, oldest = next(iter(self._sessions.items()))
        if now - oldest.last_used_ms < self.idle_eviction_ms:
            return False
        del self._sessions[key]
        return True
