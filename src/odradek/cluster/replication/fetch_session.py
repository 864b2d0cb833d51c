"""A follower's incremental fetch session with its leader (KIP-227): the fetcher's side of
:mod:`odradek.server.fetch_sessions`.

The first fetch lists every partition with epoch 0, asking for a session; the leader answers
with its id. Each later fetch in the session carries the id and the next epoch and lists only
the partitions new to the session or whose fetch offset, log start offset, leader epoch or byte
limit moved; partitions the fetcher no longer wants are forgotten. The leader reads every
partition of the session and leaves out of its answer those with nothing new.

Any failure (an error answering the fetch, a lost connection) makes the next fetch a full one,
with the old session's id so that the leader frees it — unless the leader said it does not know
that id. A leader without room for a session answers with id 0: every fetch is then full.

Pure bookkeeping, no I/O: :class:`~odradek.cluster.replication.fetcher.FetcherCore` builds its
fetches with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode

NO_SESSION = 0
INITIAL_EPOCH = 0  # a full fetch, asking for a session
SESSIONLESS_EPOCH = -1  # a full fetch that neither uses nor asks for a session
_MAX_EPOCH = 2**31 - 1

TopicPartition = tuple[str, int]
# What a fetch asks of a partition: fetch offset, log start offset, current leader epoch,
# partition max bytes (compared whole: any change lists the partition again).
Asked = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class SessionFetch:
    """One fetch in the session: its id and epoch, the partitions it lists and those it
    forgets, and what it asks of every partition it wants (listed or not)."""

    session_id: int
    epoch: int
    listed: list[TopicPartition]
    forgotten: list[TopicPartition]
    wanted: dict[TopicPartition, Asked]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FollowerSession:
    """The session as this follower knows it (see the module doc). One fetch in the session
    is out at a time: epochs follow each other, and the leader reads every partition of the
    session for each."""

    def __init__(self) -> None:
        self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH  # of the next fetch
        # The partitions of the session at the leader, with what they were last asked.
        self._partitions: dict[TopicPartition, Asked] = {}
        self._out: SessionFetch | None = None

    @property
    def out(self) -> bool:
        """Whether a fetch in the session is out."""
        return self._out is not None

    def next_fetch(self, wanted: dict[TopicPartition, Asked]) -> SessionFetch:
        """The fetch for ``wanted``, which it does not change the session by until sent."""
        if self.epoch == INITIAL_EPOCH:
            return SessionFetch(self.session_id, INITIAL_EPOCH, list(wanted), [], wanted)
        known = self._partitions
        listed = [tp for tp, asked in wanted.items() if known.get(tp) != asked]
        forgotten = [tp for tp in known if tp not in wanted]
        return SessionFetch(self.session_id, self.epoch, listed, forgotten, wanted)

    def sent(self, fetch: SessionFetch) -> None:
        # Once the leader takes it, its session holds exactly what this fetch wants; were the
        # fetch refused or lost, the next one is full and replaces it all.
        self._partitions = fetch.wanted
        self._out = fetch

    def answered(self, fetch: SessionFetch, error_code: int, session_id: int) -> None:
        """The leader's answer to ``fetch``: its top-level error and session id."""
        if fetch is not self._out:
            return  # given up on already (see lost)
        self._out = None
        if error_code != ErrorCode.none:
            self._restart(keep_id=error_code != ErrorCode.fetch_session_id_not_found)
        elif session_id == NO_SESSION:
            # No room at the leader, or it closed the session: full fetches from now on.
            self._restart(keep_id=False)
        elif fetch.full:
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1

    def lost(self) -> None:
        """The fetches out will not be answered (the connection is gone; the leader may have
        restarted without the session)."""
        self._restart(keep_id=True)

    def _restart(self, keep_id: bool) -> None:
        if not keep_id:
            self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH
        self._partitions = {}
        self._out = None
