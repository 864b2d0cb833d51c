"""Which partitions of a coordinator's internal topic this broker serves, and their loading
(Kafka's ``CoordinatorRuntime`` load and unload operations), for every coordinator alike.

A coordinator's state is the replay of its internal topic (``__consumer_offsets``,
``__transaction_state``), partition by partition. A lone broker replays every partition before
it serves (:meth:`ShardLoader.replay_all`, synchronously). In a cluster a coordinator serves the
partitions this broker leads: those led at start are replayed before the broker serves, and the
replica manager's leadership listeners bring the rest as leadership moves here — replayed in a
task that yields to the event loop between reads (requests for them meanwhile get
COORDINATOR_LOAD_IN_PROGRESS from the coordinator) — and take them away when it leaves.

A leadership heard again in an epoch the coordinator has already loaded (or is loading) changes
nothing: the replica manager tells its listeners after every state applied. What counts as
"already loaded" is the coordinator's to say (:meth:`Shard.is_loaded`): the group coordinator
keeps a loaded partition across epochs, the transaction coordinator loads again in a new one,
because its coordinator epoch fences markers.

Crash: nothing of its own; the state is the log's. Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Protocol

from odradek.cluster.replication.partition import Partition
from odradek.coordinator.common.internal_topic import InternalTopic

log = logging.getLogger(__name__)


class Shard(Protocol):
    """What a coordinator tells its loader, for one partition ``index`` of its topic."""

    def is_loaded(self, index: int, epoch: int) -> bool:
        """Whether a leadership in ``epoch`` needs no new load (owned or loading already)."""
        ...

    def begin_loading(self, index: int, epoch: int) -> None: ...

    def replay_from(self, partition: Partition, offset: int) -> tuple[int, int | None]:
        """Replay one read from ``offset``: how many records, and where the next read starts
        (None: the log end was reached)."""
        ...

    def finish_loading(self, index: int) -> None: ...

    def unload(self, index: int) -> None:
        """Stop serving ``index`` (also when it is not loaded: then nothing happens)."""
        ...


class ShardLoader:
    """Loads and unloads the partitions of ``topic`` into ``shard`` (see the module doc)."""

    def __init__(self, topic: InternalTopic, shard: Shard, what: str) -> None:
        self.topic = topic
        self._shard = shard
        self._what = what  # for the log: "groups", "transactions"
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._stopping = False

    def replay_all(self, partition: Partition) -> int:
        """Replay the whole of ``partition`` now, synchronously (a lone broker, before it
        serves); how many records."""
        offset: int | None = partition.log.log_start_offset
        count = 0
        while offset is not None:
            replayed, offset = self._shard.replay_from(partition, offset)
            count += replayed
        return count

    def load_led(self) -> None:
        """In a cluster, at start: load what this broker leads now, at once (the broker is not
        serving yet); the rest comes through :meth:`leadership_changed`."""
        for index in range(self.topic.partitions):
            partition = self.topic.partition(index)
            if partition is None or not partition.is_leader:
                continue
            self._shard.begin_loading(index, partition.leader_epoch)
            count = self.replay_all(partition)
            self._shard.finish_loading(index)
            log.info("%s: replayed %d records", partition.name, count)

    def leadership_changed(self, partition: Partition, leader: bool) -> None:
        """A partition state was applied (called again for the same role: idempotent)."""
        if partition.topic != self.topic.name or self._stopping:
            return
        index = partition.index
        if leader:
            if self._shard.is_loaded(index, partition.leader_epoch):
                return
            self._cancel(index)
            self._shard.begin_loading(index, partition.leader_epoch)
            self._loads[index] = asyncio.create_task(
                self._load(partition), name=f"load-{partition.name}"
            )
            return
        self._cancel(index)
        self._shard.unload(index)

    def unload_all(self, indexes: Iterable[int]) -> None:
        """The topic is gone (deleted in a cluster): stop every load, serve none of ``indexes``."""
        for task in self._loads.values():
            task.cancel()
        self._loads.clear()
        for index in list(indexes):
            self._shard.unload(index)

    def stop(self) -> list[asyncio.Task[None]]:
        """Stop loading; the load tasks cancelled (for the caller to await)."""
        self._stopping = True
        tasks = list(self._loads.values())
        for task in tasks:
            task.cancel()
        self._loads.clear()
        return tasks

    def _cancel(self, index: int) -> None:
        task = self._loads.pop(index, None)
        if task is not None:
            task.cancel()

    async def _load(self, partition: Partition) -> None:
        index = partition.index
        offset: int | None = partition.log.log_start_offset
        count = 0
        try:
            while offset is not None:
                replayed, offset = self._shard.replay_from(partition, offset)
                count += replayed
                if offset is not None:
                    await asyncio.sleep(0)
            self._shard.finish_loading(index)
            log.info("%s: loaded as its leader, %d records replayed", partition.name, count)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading the %s of %s failed", self._what, partition.name)
            self._shard.unload(index)
        finally:
            if self._loads.get(index) is asyncio.current_task():
                del self._loads[index]
