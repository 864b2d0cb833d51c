"""The ids the broker validates records by: the registry's replay, read afresh, and replays on
demand shared by those who ask while one runs."""

from __future__ import annotations

import asyncio
import concurrent.futures

from odradek.registry.ids import KnownSchemaIds
from odradek.registry.schemas import SchemaContent
from odradek.registry.state import SchemaIdUse


class Replays:
    """A registry store thread's replays, each ended by the test (:meth:`finish`)."""

    def __init__(self) -> None:
        self.ids: dict[int, SchemaIdUse] = {}
        self.started: list[concurrent.futures.Future[None]] = []

    def start(self) -> concurrent.futures.Future[None]:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.started.append(future)
        return future

    def finish(self, ids: set[int], error: Exception | None = None) -> None:
        self.ids = {i: use(i) for i in ids}
        if error is not None:
            self.started[-1].set_exception(error)
        else:
            self.started[-1].set_result(None)


def use(schema_id: int) -> SchemaIdUse:
    return SchemaIdUse(frozenset({"s"}), SchemaContent("AVRO", f'"{schema_id}"'))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_ids_are_read_from_the_replay_as_it_is_now() -> None:
    replays = Replays()
    known = KnownSchemaIds(lambda: replays.ids, replays.start)
    assert 1 not in known
    replays.ids = {1: use(1)}
    assert 1 in known
    found = known.get(1)
    assert found is not None and found.subjects == {"s"}


async def test_askers_during_a_replay_share_the_next_one() -> None:
    replays = Replays()
    known = KnownSchemaIds(lambda: replays.ids, replays.start)
    first = known.refreshed()
    await settle()
    assert len(replays.started) == 1
    # Asked while the first runs: it may have begun before what they look for was written.
    second, third = known.refreshed(), known.refreshed()
    replays.finish({1})
    await settle()
    assert first.done() and not second.done()
    assert len(replays.started) == 2
    replays.finish({1, 2})
    await settle()
    assert second.done() and third.done()
    assert 2 in known
    await known.close()


async def test_a_failed_replay_answers_with_the_ids_as_they_were() -> None:
    replays = Replays()
    known = KnownSchemaIds(lambda: replays.ids, replays.start)
    asked = known.refreshed()
    await settle()
    replays.finish(set(), RuntimeError("cluster down"))
    await asyncio.wait_for(asked, 5)
    assert 1 not in known
    await known.close()


async def test_one_asker_giving_up_leaves_the_replay_to_the_others() -> None:
    replays = Replays()
    known = KnownSchemaIds(lambda: replays.ids, replays.start)
    impatient, patient = known.refreshed(), known.refreshed()
    await settle()
    impatient.cancel()
    replays.finish({3})
    await asyncio.wait_for(patient, 5)
    assert 3 in known
    await known.close()
