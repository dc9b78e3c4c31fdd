"""Behaviour of compose.stream: one test (at least) per rule of eino-semantics 3.1-3.3 and the issue text."""

from __future__ import annotations

import gc
import weakref
from collections.abc import AsyncIterator
from typing import Any, assert_type

import anyio
import pytest
from anyio.lowlevel import checkpoint

from compose import stream
from compose.errors import ConcatError, EmptyStreamError, StreamEnd, StreamError
from compose.schema import Message, assistant_message, tool_message
from compose.stream import (
    SKIP,
    SkipType,
    SourceEOF,
    StreamReader,
    StreamWriter,
    concat,
    concat_items,
    merge_named_streams,
    merge_streams,
    pipe,
    register_concat,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("task_leak_check")]




class Boom(Exception):
    """An error item that compares by value, so whole streams can be compared with ==."""

    def __eq__(self, other: object) -> bool:
        return type(other) is Boom and other.args == self.args

    def __hash__(self) -> int:
        return hash(self.args)


async def collect(reader: StreamReader[Any]) -> list[Any]:
    """Read to StreamEnd, keeping error items in place; does not close the reader."""
    out: list[Any] = []
    while True:
        try:
            out.append(await reader.recv())
        except StreamEnd:
            return out
        except Boom as exc:
            out.append(exc)


def int_pipe(capacity: int = 0) -> tuple[StreamReader[int], StreamWriter[int]]:
    """``pipe(capacity)`` of ints."""
    return pipe(capacity)


async def filled_pipe(items: list[Any], capacity: int | None = None) -> StreamReader[Any]:
    """A pipe reader whose writer already sent ``items`` (Boom instances as error items) and closed."""
    reader: StreamReader[Any]
    writer: StreamWriter[Any]
    reader, writer = pipe(len(items) if capacity is None else capacity)
    for item in items:
        if isinstance(item, Exception):
            assert await writer.send_error(item) is False
        else:
            assert await writer.send(item) is False
    await writer.aclose()
    return reader


class Closing:
    """An async iterator that counts its aclose() calls."""

    def __init__(self, items: list[Any]) -> None:
        self.items = list(items)
        self.closes = 0

    def __aiter__(self) -> Closing:
        return self

    async def __anext__(self) -> Any:
        await checkpoint()
        if not self.items:
            raise StopAsyncIteration
        return self.items.pop(0)

    async def aclose(self) -> None:
        self.closes += 1


# ----------------------------------------------------------------------------------------------------------
# pipe


async def test_pipe_delivers_in_order_and_end_repeats() -> None:
    reader = await filled_pipe([1, 2, 3])
    assert [await reader.recv() for _ in range(3)] == [1, 2, 3]
    for _ in range(3):
        with pytest.raises(StreamEnd):
            await reader.recv()
    assert isinstance(StreamEnd(), EOFError)
    assert "ended" in repr(reader)
    await reader.aclose()


async def test_error_item_is_raised_and_stream_continues() -> None:
    reader = await filled_pipe([1, Boom("x"), 2])
    assert await reader.recv() == 1
    with pytest.raises(Boom, match="x"):
        await reader.recv()
    assert await reader.recv() == 2
    with pytest.raises(StreamEnd):
        await reader.recv()
    await reader.aclose()


async def test_async_for_stops_at_end_and_error_propagates() -> None:
    async with await filled_pipe([1, 2]) as reader:
        assert [x async for x in reader] == [1, 2]
    async with await filled_pipe([1, Boom("b"), 3]) as reader:
        seen = []
        with pytest.raises(Boom):
            async for x in reader:
                seen.append(x)
        assert seen == [1]
        assert [x async for x in reader] == [3]
    assert reader.closed


async def test_send_reports_reader_closed() -> None:
    reader, writer = int_pipe(1)
    assert await writer.send(1) is False
    await reader.aclose()
    assert await writer.send(2) is True
    assert await writer.send_error(Boom()) is True
    assert repr(writer) == "<StreamWriter open reader-closed buffered=0 capacity=1>"
    await writer.aclose()
    assert repr(writer) == "<StreamWriter closed reader-closed buffered=0 capacity=1>"


async def test_blocked_send_wakes_when_reader_closes() -> None:
    reader, writer = int_pipe(1)
    results: list[bool] = []

    async def produce() -> None:
        for i in range(5):
            if await writer.send(i):
                results.append(True)
                return
            results.append(False)

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        await anyio.wait_all_tasks_blocked()
        assert results == [False]  # the second send waits: capacity 1
        assert await reader.recv() == 0
        await anyio.wait_all_tasks_blocked()
        assert results == [False, False]
        await reader.aclose()
    assert results == [False, False, True]
    await writer.aclose()


async def test_blocked_send_wakes_when_reader_is_garbage_collected() -> None:
    reader, writer = int_pipe(0)
    outcome: list[bool] = []

    async def produce() -> None:
        outcome.append(await writer.send(1))

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        await anyio.wait_all_tasks_blocked()
        assert outcome == []
        del reader
        gc.collect()
    assert outcome == [True]
    report = stream._open_reader_report()
    assert len(report) == 1 and "garbage-collected while open" in report[0] and "pipe" in report[0]
    stream._reset_leak_tracking()
    await writer.aclose()


async def test_capacity_zero_send_waits_until_taken() -> None:
    reader: StreamReader[str]
    writer: StreamWriter[str]
    reader, writer = pipe()
    done: list[str] = []

    async def produce() -> None:
        await writer.send("a")
        done.append("a")
        await writer.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        await anyio.wait_all_tasks_blocked()
        assert done == []
        assert "waiting_senders=1" in repr(reader)
        assert await reader.recv() == "a"
        await anyio.wait_all_tasks_blocked()
        assert done == ["a"]
    with pytest.raises(StreamEnd):
        await reader.recv()
    await reader.aclose()


async def test_capacity_bounds_sends_ahead() -> None:
    reader, writer = int_pipe(3)
    sent: list[int] = []

    async def produce() -> None:
        async with writer:
            for i in range(6):
                await writer.send(i)
                sent.append(i)

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        await anyio.wait_all_tasks_blocked()
        assert sent == [0, 1, 2]
        assert repr(reader) == "<StreamReader pipe open buffered=3 capacity=3 waiting_senders=1>"
        assert await collect(reader) == [0, 1, 2, 3, 4, 5]
    await reader.aclose()


async def test_recv_with_buffered_item_does_not_suspend() -> None:
    reader = await filled_pipe([1, 2])
    with anyio.CancelScope() as scope:
        scope.cancel()
        assert await reader.recv() == 1  # no checkpoint: the cancellation is not delivered
        assert await reader.recv() == 2
    await reader.aclose()


async def test_cancelled_recv_loses_nothing() -> None:
    reader, writer = int_pipe(1)
    assert reader.cancel_safe
    async with anyio.create_task_group() as tg:
        tg.start_soon(reader.recv)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    await writer.send(7)
    await writer.aclose()
    assert await collect(reader) == [7]
    await reader.aclose()


async def test_cancelled_blocked_send_does_not_deliver() -> None:
    reader, writer = int_pipe(0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.send, 1)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    await writer.aclose()
    assert await collect(reader) == []
    await reader.aclose()


async def test_close_is_idempotent_and_recv_after_close_raises() -> None:
    reader = await filled_pipe([1])
    await reader.aclose()
    await reader.aclose()
    assert reader.closed
    assert "closed" in repr(reader)
    with pytest.raises(StreamError, match="closed"):
        await reader.recv()


async def test_writer_close_is_idempotent_and_send_after_close_raises() -> None:
    reader, writer = int_pipe(1)
    await writer.aclose()
    await writer.aclose()
    assert writer.closed
    with pytest.raises(StreamError, match="closed stream writer"):
        await writer.send(1)
    await reader.aclose()


async def test_send_error_needs_an_exception() -> None:
    reader, writer = int_pipe(1)
    async with reader, writer:
        with pytest.raises(TypeError):
            await writer.send_error(KeyboardInterrupt())  # type: ignore[arg-type]


async def test_concurrent_recv_on_one_reader_is_an_error() -> None:
    reader, writer = int_pipe(1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(reader.recv)
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(StreamError, match="already receiving"):
            await reader.recv()
        tg.cancel_scope.cancel()
    await reader.aclose()
    await writer.aclose()


async def test_writer_garbage_collected_unclosed_ends_the_stream_with_an_error() -> None:
    reader: StreamReader[int]
    writer: StreamWriter[int] | None
    reader, writer = pipe(2)
    await writer.send(1)
    writer = None
    gc.collect()
    assert await reader.recv() == 1
    with pytest.raises(StreamError, match="garbage-collected"):
        await reader.recv()
    with pytest.raises(StreamEnd):
        await reader.recv()
    await reader.aclose()


async def test_reader_blocked_in_recv_wakes_when_writer_closes() -> None:
    reader, writer = int_pipe(0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(collect, reader)
        await anyio.wait_all_tasks_blocked()
        await writer.aclose()
    await reader.aclose()


# ----------------------------------------------------------------------------------------------------------
# from_iterable / from_async_iterator


async def test_from_iterable_reads_values_and_ends() -> None:
    reader = StreamReader.from_iterable(x for x in "abc")
    assert reader.cancel_safe
    assert repr(reader) == "<StreamReader iterable open remaining=3>"
    assert await collect(reader) == ["a", "b", "c"]
    with pytest.raises(StreamEnd):
        await reader.recv()
    assert repr(reader) == "<StreamReader iterable ended remaining=0>"


async def test_from_async_iterator_reads_and_closes_the_generator() -> None:
    log: list[str] = []

    async def gen() -> AsyncIterator[int]:
        try:
            for i in range(10):
                yield i
        finally:
            log.append("closed")

    reader = StreamReader.from_async_iterator(gen())
    assert not reader.cancel_safe
    assert await reader.recv() == 0
    assert await reader.recv() == 1
    await reader.aclose()
    assert log == ["closed"]


async def test_closing_in_a_cancelled_scope_runs_the_iterators_cleanup_to_its_end() -> None:
    """The one reader kind whose close suspends (it runs the iterator's ``aclose()``) shields it: a closer in a
    cancelled scope, through the copies and maps that own it, closes the generator and its cleanup completes;
    the cancellation is raised at the closer's next checkpoint."""
    log: list[str] = []

    async def gen() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            await checkpoint()  # cut off here if the close were not shielded
            log.append("cleaned up")

    a, b = StreamReader.from_async_iterator(gen()).map(lambda x: x * 10).copy(2)
    assert await a.recv() == 10
    with anyio.CancelScope() as scope:
        scope.cancel()
        await a.aclose()
        await b.aclose()  # the last copy: closes the map, which closes the generator
        log.append("closed")
        await checkpoint()
    assert scope.cancelled_caught
    assert log == ["cleaned up", "closed"]


async def test_from_async_iterator_error_is_delivered_once_then_end() -> None:
    async def gen() -> AsyncIterator[int]:
        yield 1
        raise Boom("gen")

    reader = StreamReader.from_async_iterator(gen())
    assert await collect(reader) == [1, Boom("gen")]
    with pytest.raises(StreamEnd):
        await reader.recv()
    await reader.aclose()


async def test_from_async_iterator_accepts_an_async_iterable() -> None:
    class Numbers:
        def __aiter__(self) -> AsyncIterator[int]:
            return self._gen()

        async def _gen(self) -> AsyncIterator[int]:
            for i in range(3):
                yield i

    async with StreamReader.from_async_iterator(Numbers()) as reader:
        assert await collect(reader) == [0, 1, 2]


async def test_from_async_iterator_cancelled_mid_item_raises_stream_error_later() -> None:
    started = anyio.Event()

    async def gen() -> AsyncIterator[int]:
        yield 1
        started.set()
        await anyio.sleep_forever()
        yield 2  # pragma: no cover

    reader = StreamReader.from_async_iterator(gen())
    assert await reader.recv() == 1
    async with anyio.create_task_group() as tg:
        tg.start_soon(reader.recv)
        await started.wait()
        tg.cancel_scope.cancel()
    assert "broken" in repr(reader)
    with pytest.raises(StreamError, match="cancelled while producing"):
        await reader.recv()
    with pytest.raises(StreamEnd):
        await reader.recv()
    await reader.aclose()


# ----------------------------------------------------------------------------------------------------------
# copy


async def test_copy_of_fewer_than_two_is_the_reader_itself() -> None:
    reader = await filled_pipe([1])
    assert reader.copy(1) == [reader]
    assert reader.copy(0) == [reader]
    await reader.aclose()


async def test_copies_see_every_item_and_error_once_in_order() -> None:
    items = [1, Boom("e"), 2, 3]
    reader = await filled_pipe(items)
    copies = reader.copy(3)
    for c in copies:
        assert await collect(c) == items
        with pytest.raises(StreamEnd):  # EOF repeats
            await c.recv()
    for c in copies:
        await c.aclose()


async def test_fastest_copy_drives_the_source_and_slow_copy_reads_the_buffer() -> None:
    reader, writer = int_pipe(1)
    fast, slow = reader.copy(2)

    async def produce() -> None:
        async with writer:
            for i in range(5):
                await writer.send(i)

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        assert await collect(fast) == [0, 1, 2, 3, 4]
    assert repr(slow) == "<StreamReader copy 2/2 open buffered=5>"
    assert await collect(slow) == [0, 1, 2, 3, 4]
    await fast.aclose()
    await slow.aclose()


async def test_using_the_original_after_copy_raises() -> None:
    reader = await filled_pipe([1])
    a, b = reader.copy(2)
    with pytest.raises(StreamError, match="copied"):
        await reader.recv()
    with pytest.raises(StreamError, match="copied"):
        reader.copy(2)
    await reader.aclose()  # a no-op: the copies own the source now
    assert await collect(a) == [1]
    await a.aclose()
    await b.aclose()


async def test_copy_or_map_of_a_closed_reader_raises() -> None:
    reader = await filled_pipe([])
    await reader.aclose()
    with pytest.raises(StreamError):
        reader.copy(2)
    with pytest.raises(StreamError):
        reader.map(str)


async def test_misused_stream_functions_raise_typed_errors_naming_the_argument() -> None:
    reader = StreamReader.from_iterable([1, 2])
    with pytest.raises(TypeError, match=r"copy\(n\) takes an int, got str"):
        reader.copy("2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"map\(fn\) takes a function, got int"):
        reader.map(3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"pipe\(capacity\) takes an int, got str"):
        pipe("a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="merge: source 1 is int, not a StreamReader"):
        merge_streams([reader, 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="merge: source 0 is str, not a StreamReader"):
        merge_streams(["x"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="merge: source 'b' is int, not a StreamReader"):
        merge_named_streams({"a": reader, "b": 3})  # type: ignore[dict-item]
    with pytest.raises(ConcatError, match="cannot concat a chunk of type str with number chunks"):
        concat_items([1, "a"])
    assert concat_items([1, 2.5, True]) is True  # numbers: the last value
    await reader.aclose()


async def test_iterable_copies_are_independent_cursors() -> None:
    reader = StreamReader.from_iterable([1, 2, 3])
    assert await reader.recv() == 1
    a, b = reader.copy(2)
    assert repr(a) == "<StreamReader iterable open remaining=2>"
    assert await collect(a) == [2, 3]
    assert await collect(b) == [2, 3]
    with pytest.raises(StreamError):
        await reader.recv()


async def test_copy_frees_items_passed_by_every_open_copy() -> None:
    class Item:
        pass

    items = [Item() for _ in range(3)]
    refs = [weakref.ref(x) for x in items]
    reader = await filled_pipe(items)
    del items
    a, b = reader.copy(2)
    assert await a.recv() is refs[0]()
    assert await a.recv() is refs[1]()
    gc.collect()
    assert all(r() is not None for r in refs)  # b still pins them (and the pipe holds the third)
    assert await b.recv() is refs[0]()
    gc.collect()
    assert refs[0]() is None
    assert refs[1]() is not None
    await b.aclose()  # a closed copy no longer pins memory
    gc.collect()
    assert refs[1]() is None
    assert await a.recv() is refs[2]()
    await a.aclose()
    gc.collect()
    assert refs[2]() is None


async def test_source_closes_exactly_when_the_last_copy_closes() -> None:
    source = Closing([1, 2, 3])
    copies = StreamReader.from_async_iterator(source).copy(3)
    assert await copies[0].recv() == 1
    await copies[0].aclose()
    await copies[1].aclose()
    assert source.closes == 0
    assert await collect(copies[2]) == [1, 2, 3]  # a closed copy does not affect the others
    assert source.closes == 0
    await copies[2].aclose()
    await copies[2].aclose()
    assert source.closes == 1


async def test_copies_of_copies() -> None:
    reader = await filled_pipe([1, Boom("x"), 2])
    a, b = reader.copy(2)
    a1, a2, a3 = a.copy(3)
    b1, b2 = b.copy(2)
    for c in (a1, a2, a3, b1, b2):
        assert await collect(c) == [1, Boom("x"), 2]
        await c.aclose()


async def test_recv_on_a_closed_copy_raises() -> None:
    a, b = (await filled_pipe([1])).copy(2)
    await a.aclose()
    with pytest.raises(StreamError, match="closed"):
        await a.recv()
    assert repr(a) == "<StreamReader copy 1/2 closed buffered=0>"
    await b.aclose()


async def test_copy_cancelled_while_pulling_loses_nothing() -> None:
    reader, writer = int_pipe(0)
    a, b = reader.copy(2)
    assert a.cancel_safe and b.cancel_safe
    got_b: list[int] = []

    async def read_b() -> None:
        got_b.append(await b.recv())

    async with anyio.create_task_group() as tg:
        async with anyio.create_task_group() as inner:
            inner.start_soon(a.recv)  # a becomes the puller
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(read_b)  # b waits for a's pull
            await anyio.wait_all_tasks_blocked()
            inner.cancel_scope.cancel()
        await anyio.wait_all_tasks_blocked()
        await writer.send(5)
    assert got_b == [5]
    await writer.aclose()
    assert await collect(a) == [5]
    assert await collect(b) == []
    await a.aclose()
    await b.aclose()


async def test_copy_of_non_cancel_safe_source_reports_the_broken_pull_to_every_copy() -> None:
    started = anyio.Event()

    async def gen() -> AsyncIterator[int]:
        yield 1
        started.set()
        await anyio.sleep_forever()
        yield 2  # pragma: no cover

    a, b = StreamReader.from_async_iterator(gen()).copy(2)
    assert not a.cancel_safe
    assert await a.recv() == 1
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.recv)
        await started.wait()
        tg.cancel_scope.cancel()
    for c in (a, b):
        rest: list[Any] = []
        with pytest.raises(StreamError, match="cancelled while producing"):
            rest.extend(await collect(c))
        assert await collect(c) == []
        await c.aclose()
    assert rest == []


async def test_two_concurrent_consumers_of_copies() -> None:
    reader, writer = int_pipe(2)
    copies = reader.copy(2)
    results: dict[int, list[int]] = {}

    async def consume(i: int) -> None:
        async with copies[i]:
            results[i] = await collect(copies[i])

    async def produce() -> None:
        async with writer:
            for i in range(100):
                await writer.send(i)

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume, 0)
        tg.start_soon(consume, 1)
        tg.start_soon(produce)
    assert results == {0: list(range(100)), 1: list(range(100))}


async def test_copy_garbage_collected_does_not_hang_the_writer() -> None:
    reader, writer = int_pipe(0)
    a, b = reader.copy(2)
    outcome: list[bool] = []

    async def produce() -> None:
        outcome.append(await writer.send(1))

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        await anyio.wait_all_tasks_blocked()
        await a.aclose()
        del b
        gc.collect()
    assert outcome == [True]
    assert any("copy 2/2" in r for r in stream._open_reader_report())
    stream._reset_leak_tracking()
    await writer.aclose()


# ----------------------------------------------------------------------------------------------------------
# map


async def test_map_sync_skip_and_errors() -> None:
    def fn(x: int) -> int:
        if x == 3:
            raise Boom("three")
        return x * 10

    reader = await filled_pipe([1, Boom("up"), 2, 3, 4])
    mapped = reader.map(lambda x: SKIP if x == 2 else fn(x))
    assert mapped.cancel_safe
    assert await collect(mapped) == [10, Boom("up"), Boom("three"), 40]
    assert "map(" in repr(mapped) and "ended" in repr(mapped)
    await mapped.aclose()
    assert reader.closed


async def test_map_async_fn() -> None:
    async def fn(x: int) -> str | Any:
        await checkpoint()
        if x == 0:
            return SKIP
        if x == 2:
            raise Boom("two")
        return str(x)

    mapped = StreamReader.from_iterable([0, 1, 2, 3]).map(fn)
    assert not mapped.cancel_safe
    assert await collect(mapped) == ["1", Boom("two"), "3"]
    await mapped.aclose()


async def test_map_closes_its_source() -> None:
    source = Closing([1, 2])
    mapped = StreamReader.from_async_iterator(source).map(lambda x: x + 1)
    assert await mapped.recv() == 2
    await mapped.aclose()
    assert source.closes == 1


async def test_map_over_a_pipe_is_cancel_safe() -> None:
    reader, writer = int_pipe(1)
    mapped = reader.map(lambda x: -x)
    async with anyio.create_task_group() as tg:
        tg.start_soon(mapped.recv)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    await writer.send(4)
    await writer.aclose()
    assert await collect(mapped) == [-4]
    await mapped.aclose()


async def test_async_map_cancelled_mid_item_reports_the_lost_item() -> None:
    started = anyio.Event()

    async def slow(x: int) -> int:
        if x == 1:
            started.set()
            await anyio.sleep_forever()
        return x

    mapped = StreamReader.from_iterable([1, 2]).map(slow)
    async with anyio.create_task_group() as tg:
        tg.start_soon(mapped.recv)
        await started.wait()
        tg.cancel_scope.cancel()
    with pytest.raises(StreamError, match="lost"):
        await mapped.recv()
    assert await collect(mapped) == [2]
    await mapped.aclose()


# ----------------------------------------------------------------------------------------------------------
# merge


async def test_merge_of_none_and_one() -> None:
    empty: StreamReader[int] = merge_streams([])
    assert await collect(empty) == []
    reader = await filled_pipe([1])
    assert merge_streams([reader]) is reader
    await reader.aclose()
    assert await collect(merge_named_streams({})) == []


async def test_merge_of_iterables_is_their_concatenation() -> None:
    a = StreamReader.from_iterable([1, 2])
    b = StreamReader.from_iterable([3])
    await a.recv()
    merged = merge_streams([a, b])
    assert repr(merged) == "<StreamReader iterable open remaining=2>"
    assert await collect(merged) == [2, 3]
    assert a.closed and b.closed


async def test_merge_preserves_order_per_source_and_forwards_errors() -> None:
    readers: list[StreamReader[Any]] = []
    writers: list[StreamWriter[Any]] = []
    for _ in range(3):
        r: StreamReader[Any]
        w: StreamWriter[Any]
        r, w = pipe(1)
        readers.append(r)
        writers.append(w)
    merged = merge_streams(readers)
    assert merged.cancel_safe

    async def produce(k: int) -> None:
        async with writers[k]:
            for i in range(20):
                await writers[k].send((k, i))
                if i == 10:
                    await writers[k].send_error(Boom(k))

    async with anyio.create_task_group() as tg:
        for k in range(3):
            tg.start_soon(produce, k)
        got = await collect(merged)
    for k in range(3):
        mine = [x for x in got if x == Boom(k) or (isinstance(x, tuple) and x[0] == k)]
        assert mine == [(k, i) for i in range(11)] + [Boom(k)] + [(k, i) for i in range(11, 20)]
    assert len(got) == 63
    assert "merge" in repr(merged) and "ended" in repr(merged)
    await merged.aclose()
    assert all(r.closed for r in readers)


async def test_merge_close_closes_every_source() -> None:
    sources = [Closing([1]), Closing([2])]
    merged = merge_streams([StreamReader.from_async_iterator(s) for s in sources])
    assert not merged.cancel_safe
    assert await merged.recv() in (1, 2)
    await merged.aclose()
    assert [s.closes for s in sources] == [1, 1]


async def test_merge_named_reports_each_source_end_once() -> None:
    a = await filled_pipe(["a1", "a2"])
    b = StreamReader.from_iterable(["b1"])
    merged = merge_named_streams({"a": a, "b": b})
    got: list[Any] = []
    while True:
        try:
            got.append(await merged.recv())
        except SourceEOF as eof:
            got.append(f"eof:{eof.name}")
        except StreamEnd:
            break
    assert sorted(got) == ["a1", "a2", "b1", "eof:a", "eof:b"]
    assert got.index("eof:a") > got.index("a2")
    assert got.index("eof:b") > got.index("b1")
    with pytest.raises(StreamEnd):
        await merged.recv()
    await merged.aclose()


async def test_merge_named_of_one_source_still_reports_its_end() -> None:
    merged = merge_named_streams({"only": StreamReader.from_iterable([1])})
    assert await merged.recv() == 1
    with pytest.raises(SourceEOF) as info:
        await merged.recv()
    assert info.value.name == "only"
    with pytest.raises(StreamEnd):
        await merged.recv()
    await merged.aclose()


async def test_merge_waits_for_items_from_any_source() -> None:
    ra: StreamReader[str]
    wa: StreamWriter[str]
    rb: StreamReader[str]
    wb: StreamWriter[str]
    ra, wa = pipe(0)
    rb, wb = pipe(0)
    merged = merge_streams([ra, rb])
    got: list[str] = []

    async def consume() -> None:
        got.extend(await collect(merged))

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await anyio.wait_all_tasks_blocked()
        await wb.send("b")
        await anyio.wait_all_tasks_blocked()
        assert got == []  # collect keeps reading; check the order at the end
        await wa.send("a")
        await wb.aclose()
        await wa.aclose()
    assert got == ["b", "a"]
    await merged.aclose()


async def test_merge_cancelled_while_racing_loses_nothing() -> None:
    ra: StreamReader[int]
    wa: StreamWriter[int]
    ra, wa = pipe(0)
    inner_a, inner_b = (await filled_pipe([])).copy(2)
    merged = merge_streams([ra, merge_streams([inner_a, StreamReader.from_iterable([])])])
    async with anyio.create_task_group() as tg:
        tg.start_soon(merged.recv)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    async with anyio.create_task_group() as tg:
        tg.start_soon(wa.send, 1)
        assert await merged.recv() == 1
    await wa.aclose()
    assert await collect(merged) == []
    await merged.aclose()
    await inner_b.aclose()


async def test_merge_of_async_generator_and_pipe() -> None:
    async def gen() -> AsyncIterator[str]:
        for i in range(3):
            await checkpoint()
            yield f"g{i}"

    r: StreamReader[str]
    w: StreamWriter[str]
    r, w = pipe(1)
    merged = merge_streams([StreamReader.from_async_iterator(gen()), r])

    async def produce() -> None:
        async with w:
            for i in range(3):
                await w.send(f"p{i}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        got = await collect(merged)
    assert [x for x in got if x[0] == "g"] == ["g0", "g1", "g2"]
    assert [x for x in got if x[0] == "p"] == ["p0", "p1", "p2"]
    await merged.aclose()


async def test_merge_rejects_the_same_reader_twice_and_closed_readers() -> None:
    reader = await filled_pipe([1])
    with pytest.raises(StreamError, match="twice"):
        merge_streams([reader, reader])
    await reader.aclose()
    other: StreamReader[int] = StreamReader.from_iterable([])
    with pytest.raises(StreamError, match="closed"):
        merge_streams([reader, other])
    await other.aclose()  # a failed merge takes no ownership


# ----------------------------------------------------------------------------------------------------------
# concat


async def test_concat_rules() -> None:
    assert await concat(StreamReader.from_iterable(["a", "b", "c"])) == "abc"
    assert await concat(StreamReader.from_iterable([b"a", b"b"])) == b"ab"
    assert await concat(StreamReader.from_iterable([1, 5, 2])) == 2
    assert await concat(StreamReader.from_iterable([1.5, 0.5])) == 0.5
    assert await concat(StreamReader.from_iterable([True, False])) is False
    assert await concat(StreamReader.from_iterable([{"a": "x", "n": 1, "d": {"k": "p"}}, {"a": "y", "n": 2}])) == {
        "a": "xy",
        "n": 2,
        "d": {"k": "p"},
    }
    assert await concat(StreamReader.from_iterable([{"d": {"k": "p"}}, {"d": {"k": "q", "j": 1}}])) == {
        "d": {"k": "pq", "j": 1}
    }


async def test_concat_one_chunk_is_that_chunk_and_empty_is_an_error() -> None:
    chunk = object()
    assert await concat(StreamReader.from_iterable([chunk])) is chunk
    with pytest.raises(EmptyStreamError, match=r"^stream reader is empty, concat fail$"):
        await concat(StreamReader.from_iterable([]))


async def test_concat_messages_and_message_lists() -> None:
    msg = await concat(StreamReader.from_iterable([assistant_message("Hel"), assistant_message("lo")]))
    assert isinstance(msg, Message) and msg.content == "Hello" and msg.role == "assistant"
    a1, a2 = tool_message("4", "c1"), tool_message("2", "c1")
    merged = await concat(StreamReader.from_iterable([[a1, None], [a2, None]]))
    assert [m.content if m else None for m in merged] == ["42", None]


async def test_concat_fallback() -> None:
    class Box:
        def __init__(self, v: int = 0) -> None:
            self.v = v

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Box) and other.v == self.v

        def __hash__(self) -> int:
            return self.v

    assert await concat(StreamReader.from_iterable([Box(), Box(3), None])) == Box(3)
    empty = Box()
    assert await concat(StreamReader.from_iterable([empty, Box(), None])) is empty
    with pytest.raises(ConcatError, match=r"cannot concat multiple non-zero value of type .*Box"):
        await concat(StreamReader.from_iterable([Box(1), Box(2)]))
    with pytest.raises(ConcatError):
        await concat(StreamReader.from_iterable([["x"], ["y"]]))
    with pytest.raises(ConcatError, match="int"):
        await concat(StreamReader.from_iterable(["a", 1]))


async def test_register_concat_exact_type_then_mro() -> None:
    class Base:
        def __init__(self, s: str) -> None:
            self.s = s

    class Child(Base):
        pass

    register_concat(Base, lambda xs: Base("+".join(x.s for x in xs)))
    assert (await concat(StreamReader.from_iterable([Child("a"), Child("b")]))).s == "a+b"
    register_concat(Child, lambda xs: Child("".join(x.s for x in xs)))
    merged = concat_items([Child("a"), Child("b")])
    assert type(merged) is Child and merged.s == "ab"


async def test_concat_skips_source_eof_and_raises_other_errors_after_closing() -> None:
    sources = {"a": StreamReader.from_iterable("x"), "b": StreamReader.from_iterable("y")}
    merged = merge_named_streams(sources)
    assert await concat(merged) in ("xy", "yx")
    assert merged.closed
    reader = await filled_pipe(["a", Boom("bad"), "b"])
    with pytest.raises(Boom):
        await concat(reader)
    assert reader.closed


async def test_concat_items() -> None:
    assert concat_items(["a", "b"]) == "ab"
    assert concat_items([None, None]) is None
    with pytest.raises(EmptyStreamError):
        concat_items([])


# ----------------------------------------------------------------------------------------------------------
# leak tracking and reprs


async def test_leak_report_lists_open_readers_only() -> None:
    open_one = await filled_pipe([1])
    ended = await filled_pipe([])
    await collect(ended)
    closed = await filled_pipe([1])
    await closed.aclose()
    assert stream._open_reader_report() == [repr(open_one)]
    await open_one.aclose()
    assert stream._open_reader_report() == []


async def test_leak_tracking_is_off_outside_tests_and_records_nothing() -> None:
    """Off (the default in a service), abandoned readers are released without a trace; assert_no_leaks turns it
    on for its block only."""
    import gc

    from compose.testing import assert_no_leaks

    stream._reset_leak_tracking(enabled=False)
    try:
        for _ in range(3):
            await filled_pipe([1])  # abandoned open, collected
        gc.collect()
        assert stream._open_reader_report() == []
        with pytest.raises(AssertionError, match="stream readers left open"):
            async with assert_no_leaks():
                kept = await filled_pipe([1])
        await kept.aclose()
        await filled_pipe([1])  # tracking is off again after the block
        gc.collect()
        assert stream._open_reader_report() == []
    finally:
        stream._reset_leak_tracking()


async def test_reprs_show_kind_and_state() -> None:
    r: StreamReader[int]
    w: StreamWriter[int]
    r, w = pipe(2)
    await w.send(1)
    assert repr(r) == "<StreamReader pipe open buffered=1 capacity=2>"
    assert repr(w) == "<StreamWriter open buffered=1 capacity=2>"
    await w.aclose()
    assert repr(r) == "<StreamReader pipe open buffered=1 capacity=2 writer_closed>"
    await r.aclose()
    assert repr(r) == "<StreamReader pipe closed buffered=0 capacity=2 writer_closed>"

    async def gen() -> AsyncIterator[int]:
        yield 1

    g = StreamReader.from_async_iterator(gen())
    assert repr(g) == "<StreamReader async-iterator open>"
    await g.aclose()
    assert repr(g) == "<StreamReader async-iterator closed>"


async def test_static_types() -> None:
    """Checked by mypy: map infers the new chunk type from sync and async functions, with or without SKIP."""

    def label(x: int) -> str | SkipType:
        return SKIP if x == 1 else f"#{x}"

    async def half(x: int) -> float:
        return x / 2

    reader = StreamReader.from_iterable([1, 2])
    assert_type(reader, StreamReader[int])
    a, b = reader.copy(2)
    assert_type(a, StreamReader[int])
    labels = a.map(label)
    assert_type(labels, StreamReader[str])
    halves = b.map(half)
    assert_type(halves, StreamReader[float])
    assert_type(await concat(labels), str)
    assert await concat(halves) == 1.0
    assert labels.closed and halves.closed


async def test_copies_of_a_reader_its_maker_hands_over_read_it_as_it_is() -> None:
    """``copies_of_own`` (``copy`` for a reader nobody else holds, as a model's checked stream): the copies see
    every chunk and error item in order, the reader closes with the last copy, and a closed one is refused."""
    from compose.stream._core import MapReader, copies_of_own

    closed: list[bool] = []

    async def source() -> AsyncIterator[int]:
        try:
            for i in (1, 2, 3):
                yield i
        finally:
            closed.append(True)

    def check(x: int) -> int:
        if x == 2:
            raise ValueError("two")
        return x

    reader = MapReader(StreamReader.from_async_iterator(source()), check, is_async=False)
    a, b = copies_of_own(reader, 2)
    assert a.cancel_safe is b.cancel_safe is False  # the source's
    assert await a.recv() == 1
    with pytest.raises(ValueError, match="two"):
        await a.recv()
    assert await b.recv() == 1
    with pytest.raises(ValueError, match="two"):
        await b.recv()
    assert [await b.recv(), await a.recv()] == [3, 3]
    await a.aclose()
    assert not reader.closed and closed == []
    await b.aclose()
    assert reader.closed and closed == [True]
    with pytest.raises(StreamError, match="closed"):
        copies_of_own(reader, 2)
    one = StreamReader.from_iterable(["x"])
    assert await concat(one) == "x" and one.closed
