"""Throughput and memory of compose.stream against a bare anyio memory object stream (the floor).

Usage: ``python benchmarks/bench_stream.py [--items N] [--capacity C] [--backend asyncio|trio|both]``

Every case moves N integers from a producer task to consumer(s) through a channel of the same capacity:

* ``anyio memory stream``: ``create_memory_object_stream(C)``, send/receive (the floor; both checkpoint on
  every item);
* ``anyio memory stream, nowait``: the same stream used at its fastest (``*_nowait``, waiting only when it
  would block): a stricter floor, since compose's pipe does not checkpoint while it has room or items;
* ``pipe``: ``pipe(C)``, ``send`` / ``recv``;
* ``copy(2), one consumer``: ``pipe(C).copy(2)``, one task reading both copies alternately;
* ``copy(2), two consumers``: the same, each copy read by its own task;
* ``x floor`` is the per-item cost relative to the first row (the goal: copy(2) within 3x).

Peak memory: tracemalloc's peak while 1,000,000 (and 100,000) items pass through ``copy(2)`` with both readers
keeping pace; flat means the peak does not grow with the item count.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Awaitable, Callable

import anyio

from compose.stream import StreamReader, StreamWriter, pipe


async def bench_floor(n: int, capacity: int) -> None:
    send, receive = anyio.create_memory_object_stream[int](capacity)

    async def produce() -> None:
        async with send:
            for i in range(n):
                await send.send(i)

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        async with receive:
            async for _ in receive:
                pass


async def bench_floor_nowait(n: int, capacity: int) -> None:
    """The memory stream used at its fastest: ``*_nowait`` first, waiting only when it would block."""
    send, receive = anyio.create_memory_object_stream[int](capacity)

    async def produce() -> None:
        async with send:
            for i in range(n):
                try:
                    send.send_nowait(i)
                except anyio.WouldBlock:
                    await send.send(i)

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        async with receive:
            while True:
                try:
                    receive.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        await receive.receive()
                    except anyio.EndOfStream:
                        break
                except anyio.EndOfStream:
                    break


async def _produce(writer: StreamWriter[int], n: int) -> None:
    async with writer:
        for i in range(n):
            await writer.send(i)


async def bench_pipe(n: int, capacity: int) -> None:
    reader: StreamReader[int]
    writer: StreamWriter[int]
    reader, writer = pipe(capacity)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_produce, writer, n)
        async with reader:
            async for _ in reader:
                pass


async def bench_copy_alternating(n: int, capacity: int) -> None:
    reader: StreamReader[int]
    writer: StreamWriter[int]
    reader, writer = pipe(capacity)
    a, b = reader.copy(2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_produce, writer, n)
        async with a, b:
            async for x in a:
                assert await b.recv() == x


async def bench_copy_concurrent(n: int, capacity: int) -> None:
    reader: StreamReader[int]
    writer: StreamWriter[int]
    reader, writer = pipe(capacity)

    async def consume(r: StreamReader[int]) -> None:
        async with r:
            async for _ in r:
                pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(_produce, writer, n)
        for r in reader.copy(2):
            tg.start_soon(consume, r)


Case = Callable[[int, int], Awaitable[None]]
CASES: list[tuple[str, Case]] = [
    ("anyio memory stream (floor)", bench_floor),
    ("anyio memory stream, nowait", bench_floor_nowait),
    ("pipe", bench_pipe),
    ("copy(2), one consumer", bench_copy_alternating),
    ("copy(2), two consumers", bench_copy_concurrent),
]


def _timed(backend: str, case: Case, n: int, capacity: int, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        anyio.run(case, n, capacity, backend=backend)
        best = min(best, time.perf_counter() - start)
    return best


def _peak_bytes(backend: str, n: int, capacity: int) -> int:
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    anyio.run(bench_copy_alternating, n, capacity, backend=backend)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--capacity", type=int, default=64, help="0 means a rendezvous channel")
    parser.add_argument("--backend", choices=["asyncio", "trio", "both"], default="both")
    parser.add_argument("--memory-items", type=int, default=1_000_000)
    args = parser.parse_args()
    backends = ["asyncio", "trio"] if args.backend == "both" else [args.backend]

    print(f"{args.items:,} items per case, capacity {args.capacity}, best of 3\n")
    print(f"{'case':<30} {'backend':<8} {'items/s':>12} {'us/item':>8} {'x floor':>8}")
    for backend in backends:
        floor = None
        for name, case in CASES:
            seconds = _timed(backend, case, args.items, args.capacity)
            per_item = seconds / args.items
            floor = floor or per_item
            print(
                f"{name:<30} {backend:<8} {args.items / seconds:>12,.0f} {per_item * 1e6:>8.2f} "
                f"{per_item / floor:>8.2f}"
            )

    print(f"\npeak traced memory through copy(2), both copies read (capacity {args.capacity})")
    print(f"{'backend':<8} {'items':>10} {'peak KiB':>10}")
    for backend in backends:
        for n in (args.memory_items // 10, args.memory_items):
            print(f"{backend:<8} {n:>10,} {_peak_bytes(backend, n, args.capacity) / 1024:>10.1f}")


if __name__ == "__main__":
    main()
