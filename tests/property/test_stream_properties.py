"""Properties of copy(n) and merge over arbitrary items, copy counts and interleavings (hypothesis)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compose import stream
from compose.errors import StreamEnd
from compose.stream import SourceEOF, StreamReader, StreamWriter, merge_named_streams, merge_streams, pipe

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("task_leak_check")]

PROPERTY = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)




@dataclass(frozen=True)
class Err:
    """Marks an error item in a drawn item list; the stream carries ``Boom(code)`` there."""

    code: int


class Boom(Exception):
    pass


items_st = st.lists(st.one_of(st.integers(0, 50), st.builds(Err, st.integers(0, 5))), max_size=12)


def expected(items: list[Any]) -> list[Any]:
    return [("err", x.code) if isinstance(x, Err) else x for x in items]


def as_error(x: Any) -> Any:
    if isinstance(x, Err):
        raise Boom(x.code)
    return x


async def recv_one(reader: StreamReader[Any]) -> Any:
    """The next item as a value, ``("err", code)`` for an error item, or ``StreamEnd`` at the end."""
    try:
        return await reader.recv()
    except Boom as exc:
        return ("err", exc.args[0])
    except StreamEnd:
        return StreamEnd


class CountingSource:
    """An async iterator over drawn items that counts its aclose() calls."""

    def __init__(self, items: list[Any]) -> None:
        self.items = list(items)
        self.closes = 0

    def __aiter__(self) -> CountingSource:
        return self

    async def __anext__(self) -> Any:
        if not self.items:
            raise StopAsyncIteration
        return self.items.pop(0)

    async def aclose(self) -> None:
        self.closes += 1


# ----------------------------------------------------------------------------------------------------------
# copy: one task, any schedule of reads and early closes


@PROPERTY
@given(
    items=items_st,
    n=st.integers(1, 4),
    nested=st.integers(0, 3),
    source_kind=st.sampled_from(["pipe", "async-iterator"]),
    schedule=st.lists(st.tuples(st.integers(0, 9), st.sampled_from(["read"] * 4 + ["close"])), max_size=60),
)
async def test_copies_yield_the_source_sequence_under_any_schedule(
    items: list[Any], n: int, nested: int, source_kind: str, schedule: list[tuple[int, str]]
) -> None:
    writer: StreamWriter[Any] | None = None
    counter: CountingSource | None = None
    if source_kind == "pipe":
        reader: StreamReader[Any]
        reader, writer = pipe(len(items))
        for x in items:
            if isinstance(x, Err):
                await writer.send_error(Boom(x.code))
            else:
                await writer.send(x)
        await writer.aclose()
    else:
        counter = CountingSource(items)
        reader = StreamReader.from_async_iterator(counter).map(as_error)

    leaves = reader.copy(n)
    if nested and len(leaves) > 1:  # copies of copies: split the first copy again
        leaves = leaves[0].copy(nested + 1) + leaves[1:]
    got: list[list[Any]] = [[] for _ in leaves]
    closed = [False] * len(leaves)

    def source_closed() -> bool:
        if writer is not None:
            return "reader-closed" in repr(writer)
        assert counter is not None
        assert counter.closes <= 1
        return counter.closes == 1

    for index, action in schedule:
        i = index % len(leaves)
        if action == "close":
            await leaves[i].aclose()
            closed[i] = True
        elif not closed[i]:
            x = await recv_one(leaves[i])
            if x is StreamEnd:
                assert got[i] == expected(items)
            else:
                got[i].append(x)
        assert source_closed() == all(closed)

    want = expected(items)
    for i, leaf in enumerate(leaves):
        assert got[i] == want[: len(got[i])]
        if not closed[i]:
            while (x := await recv_one(leaf)) is not StreamEnd:
                got[i].append(x)
            assert got[i] == want
            assert await recv_one(leaf) is StreamEnd  # the end repeats
            assert not source_closed()
            await leaf.aclose()
            closed[i] = True
    assert source_closed()
    if counter is not None:
        assert counter.closes == 1
    assert stream._open_reader_report() == []


# ----------------------------------------------------------------------------------------------------------
# copy: concurrent consumers, a producer, early closes and cancelled receives


@PROPERTY
@given(
    items=items_st,
    capacity=st.integers(0, 3),
    plans=st.lists(st.tuples(st.none() | st.integers(0, 12), st.integers(0, 3), st.booleans()), min_size=1, max_size=4),
)
async def test_concurrent_copies_each_get_the_source_sequence(
    items: list[Any], capacity: int, plans: list[tuple[int | None, int, bool]]
) -> None:
    """Each consumer reads ``limit`` items (None: all), yielding ``pauses`` times between reads and, if
    ``cancel_prone``, receiving under an immediately expiring deadline (retrying when cancelled)."""
    reader: StreamReader[Any]
    writer: StreamWriter[Any]
    reader, writer = pipe(capacity)
    copies = reader.copy(len(plans))
    got: list[list[Any]] = [[] for _ in plans]
    stopped_early: list[bool] = []

    async def produce() -> None:
        async with writer:
            for x in items:
                dropped = await (writer.send_error(Boom(x.code)) if isinstance(x, Err) else writer.send(x))
                if dropped:
                    stopped_early.append(True)
                    return

    async def consume(i: int, limit: int | None, pauses: int, cancel_prone: bool) -> None:
        async with copies[i]:
            while limit is None or len(got[i]) < limit:
                for _ in range(pauses):
                    await checkpoint()
                x: Any = None
                while True:
                    with anyio.move_on_after(0 if cancel_prone else None) as scope:
                        x = await recv_one(copies[i])
                    if not scope.cancelled_caught:
                        break
                    cancel_prone = False  # one cancelled receive per item is enough; then wait for it
                if x is StreamEnd:
                    return
                got[i].append(x)
                cancel_prone = plans[i][2]

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        for i, (limit, pauses, cancel_prone) in enumerate(plans):
            tg.start_soon(consume, i, limit, pauses, cancel_prone)

    want = expected(items)
    for i, (limit, _, _) in enumerate(plans):
        assert got[i] == (want if limit is None else want[:limit])
    if stopped_early:  # the producer only stops early when every copy closed before the end
        assert all(limit is not None and limit < len(items) for limit, _, _ in plans)
    assert stream._open_reader_report() == []


# ----------------------------------------------------------------------------------------------------------
# merge


@dataclass(frozen=True)
class SourcePlan:
    items: list[Any]
    kind: str  # "iterable", "pipe" (fed by a producer task), "copy" (one copy of a fed pipe) or "generator"
    capacity: int


source_plan_st = st.builds(
    SourcePlan,
    items=items_st,
    kind=st.sampled_from(["iterable", "pipe", "copy", "generator"]),
    capacity=st.integers(0, 2),
)


@PROPERTY
@given(
    plans=st.lists(source_plan_st, max_size=4),
    named=st.booleans(),
    cancel_prone=st.booleans(),
)
async def test_merge_preserves_each_source_order_and_the_multiset(
    plans: list[SourcePlan], named: bool, cancel_prone: bool
) -> None:
    tagged = [[(k, x) for x in plan.items] for k, plan in enumerate(plans)]
    sources: list[StreamReader[Any]] = []
    feeds: list[tuple[StreamWriter[Any], list[Any]]] = []
    spare: list[StreamReader[Any]] = []
    for k, plan in enumerate(plans):
        values = tagged[k]
        if plan.kind == "iterable" and not any(isinstance(x[1], Err) for x in values):
            sources.append(StreamReader.from_iterable(values))
        elif plan.kind == "generator" and not any(isinstance(x[1], Err) for x in values):

            async def gen(values: list[Any] = values) -> AsyncIterator[Any]:
                for x in values:
                    await checkpoint()
                    yield x

            sources.append(StreamReader.from_async_iterator(gen()))
        else:
            r: StreamReader[Any]
            w: StreamWriter[Any]
            r, w = pipe(plan.capacity)
            feeds.append((w, values))
            if plan.kind == "copy":
                mine, other = r.copy(2)
                sources.append(mine)
                spare.append(other)
            else:
                sources.append(r)

    merged = merge_named_streams({f"s{k}": s for k, s in enumerate(sources)}) if named else merge_streams(sources)
    got: list[Any] = []
    cancel_prone = cancel_prone and merged.cancel_safe  # cancelling a generator's recv breaks it, by design

    async def produce(writer: StreamWriter[Any], values: list[Any]) -> None:
        async with writer:
            for k, x in values:
                if isinstance(x, Err):
                    await writer.send_error(Boom((k, x.code)))
                else:
                    await writer.send((k, x))

    async def consume() -> None:
        async with merged:
            while True:
                try:
                    with anyio.move_on_after(0 if cancel_prone else None) as scope:
                        got.append(await merged.recv())
                    if scope.cancelled_caught:
                        await checkpoint()
                except Boom as exc:
                    k, code = exc.args[0]
                    got.append((k, Err(code)))
                except SourceEOF as eof:
                    got.append(("eof", eof.name))
                except StreamEnd:
                    return

    async with anyio.create_task_group() as tg:
        for writer, values in feeds:
            tg.start_soon(produce, writer, values)
        tg.start_soon(consume)
    for other in spare:
        await other.aclose()

    for k in range(len(plans)):
        from_k = [x for x in got if x[0] == k]
        assert from_k == tagged[k]
        if named:
            eof_at = got.index(("eof", f"s{k}"))
            assert all(i < eof_at for i, x in enumerate(got) if x[0] == k)
    eofs = [f"s{k}" for k in range(len(plans))] if named and len(plans) > 0 else []
    assert Counter(got) == Counter([x for t in tagged for x in t] + [("eof", name) for name in eofs])
    assert all(s.closed or len(plans) == 1 for s in sources)
    assert stream._open_reader_report() == []
