"""Checkpoint cost: envelope encode/decode, and save/load time and size in each store.

Run: ``.venv/bin/python benchmarks/bench_checkpoint.py [--runs N] [--backend asyncio|trio]``.

The payload stands in for the snapshot of a 50-round agent run: a system prompt, the user's question, then 50
rounds of an assistant message (reasoning, one tool call) and the tool's answer (~100 messages, ~120 KB of
JSON), plus graph state and per-call tool results. The lead re-runs this with real run snapshots once the
engine writes them. Prints, per store,

- ``save`` / ``load``: median time of ``set`` / ``get`` of the encoded checkpoint,
- ``resume``: median time of one resume's store traffic (claim, get, delete),
- ``retention``: storage after ``--runs`` runs that each interrupt once and then complete (the engine's
  default deletes the checkpoint on completion), against the same runs with nothing deleted.

PostgreSQL uses ``$PYEINO_TEST_PG_DSN`` or a throwaway server from ``.ci/postgres.sh`` (skipped if neither).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from compose.checkpoint import (
    ClaimableCheckPointStore,
    InMemoryCheckPointStore,
    PostgresCheckPointStore,
    SQLiteCheckPointStore,
    claim_checkpoint,
    decode_checkpoint,
    encode_checkpoint,
)
from compose.schema import (
    FunctionCall,
    Message,
    ToolCall,
    assistant_message,
    system_message,
    tool_message,
    user_message,
)

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 50


class AgentRunSnapshot(BaseModel):
    step: int
    messages: list[Message]
    state: dict[str, Any]
    pending_calls: list[ToolCall]
    tool_results: dict[str, str]


def agent_run_snapshot(rounds: int = ROUNDS) -> AgentRunSnapshot:
    # pseudo-words drawn at random: text that compresses about as well as real prose (PostgreSQL's TOAST
    # compresses large values, so a repetitive payload would understate its size there)
    rng = random.Random(0)
    vocabulary = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(3000)]

    def text(n: int, seed: int) -> str:
        return " ".join(rng.choices(vocabulary, k=n))

    messages = [system_message(text(150, 0)), user_message(text(40, 1))]
    results: dict[str, str] = {}
    for r in range(rounds):
        call = ToolCall(
            id=f"call_{r:03d}",
            function=FunctionCall(name="search", arguments=f'{{"query": "{text(8, r)}", "top_k": 5}}'),
        )
        answer = assistant_message(text(25, r), tool_calls=[call])
        answer.reasoning_content = text(40, r + 3)
        messages.append(answer)
        result = text(200, r + 5)
        messages.append(tool_message(result, call.id, "search"))
        results[call.id] = result
    return AgentRunSnapshot(
        step=2 * rounds + 1,
        messages=messages,
        state={"session": {"user": "u-42", "turn": rounds}, "scratch": [text(10, i) for i in range(20)]},
        pending_calls=[ToolCall(id="call_final", function=FunctionCall(name="approve", arguments="{}"))],
        tool_results=results,
    )


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


async def _timed(fn: Callable[[], Awaitable[object]], repeats: int) -> float:
    for _ in range(3):
        await fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return _median_ms(samples)


def _envelope_figures(snapshot: AgentRunSnapshot, repeats: int) -> tuple[bytes, float, float]:
    data = encode_checkpoint(snapshot, kind="agent-run", fingerprint="bench")
    enc, dec = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        data = encode_checkpoint(snapshot, kind="agent-run", fingerprint="bench")
        enc.append(time.perf_counter() - start)
        start = time.perf_counter()
        decode_checkpoint(data, AgentRunSnapshot, kind="agent-run", fingerprint="bench")
        dec.append(time.perf_counter() - start)
    return data, _median_ms(enc), _median_ms(dec)


async def _store_figures(
    name: str, store: ClaimableCheckPointStore, data: bytes, runs: int, size: Callable[[], Awaitable[str]]
) -> None:
    save = await _timed(lambda: store.set("bench/one", data), 30)
    load = await _timed(lambda: store.get("bench/one"), 30)

    async def resume_cycle() -> None:
        await store.set("bench/resume", data)  # the interrupt
        start = time.perf_counter()
        assert await claim_checkpoint(store, "bench/resume", "worker") == data
        await store.delete("bench/resume")  # the run completed
        resume_samples.append(time.perf_counter() - start)

    resume_samples: list[float] = []
    for _ in range(30):
        await resume_cycle()
    await store.delete("bench/one")

    for i in range(runs):  # default retention: each run's checkpoint is deleted when the run completes
        await store.set(f"run/{i}", data)
        assert await claim_checkpoint(store, f"run/{i}", f"w{i}") is not None
        await store.delete(f"run/{i}")
    left = len(await store.list())
    retained = await size()
    for i in range(runs):  # nothing deleted
        await store.set(f"kept/{i}", data)
    grown = await size()
    print(
        f"  {name:10} save {save:7.2f} ms   load {load:7.2f} ms   resume {_median_ms(resume_samples):7.2f} ms\n"
        f"  {'':10} after {runs} completed runs: {left} checkpoints, {retained}; "
        f"without deleting: {grown}"
    )


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


async def _bench(runs: int, pg_dsn: str | None) -> None:
    snapshot = agent_run_snapshot()
    data, enc, dec = _envelope_figures(snapshot, 50)
    print(f"payload: {len(snapshot.messages)} messages, checkpoint {len(data) / 1e3:.1f} KB")
    print(f"envelope: encode {enc:.2f} ms, decode (digest + validation) {dec:.2f} ms")

    memory = InMemoryCheckPointStore()

    async def memory_size() -> str:
        total = 0
        for k in await memory.list():
            total += len(await memory.get(k) or b"")
        return f"{_mb(total)} held"

    await _store_figures("memory", memory, data, runs, memory_size)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cp.db"
        async with SQLiteCheckPointStore(path) as sqlite:

            async def sqlite_size() -> str:
                wal = path.with_name(path.name + "-wal")
                wal_size = wal.stat().st_size if wal.exists() else 0
                return f"file {_mb(path.stat().st_size)} + WAL {_mb(wal_size)}"

            await _store_figures("sqlite", sqlite, data, runs, sqlite_size)

    if pg_dsn is None:
        print("  postgres   skipped: no server ($PYEINO_TEST_PG_DSN unset and .ci/postgres.sh failed)")
        return
    table = f"bench_{os.getpid()}"
    async with PostgresCheckPointStore(pg_dsn, table=table) as pg:

        async def pg_size() -> str:
            def query() -> str:
                import psycopg

                with psycopg.connect(pg_dsn, autocommit=True) as conn:
                    before = conn.execute("SELECT pg_total_relation_size(%s)", (table,)).fetchone()
                    conn.execute(f"VACUUM {table}")
                    after = conn.execute("SELECT pg_total_relation_size(%s)", (table,)).fetchone()
                assert before is not None and after is not None
                return f"table {_mb(before[0])} ({_mb(after[0])} after VACUUM)"

            return await anyio.to_thread.run_sync(query)

        try:
            await _store_figures("postgres", pg, data, runs, pg_size)
        finally:

            def drop() -> None:
                import psycopg

                with psycopg.connect(pg_dsn, autocommit=True) as conn:
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
                    conn.execute(f"DROP SEQUENCE IF EXISTS {table}_seq")

            await anyio.to_thread.run_sync(drop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    dsn = os.environ.get("PYEINO_TEST_PG_DSN")
    state_dir = None
    if dsn is None:
        state_dir = tempfile.mkdtemp(prefix="pyeino-pg-bench-")
        env = {**os.environ, "PYEINO_PG_DIR": state_dir}
        script = str(ROOT / ".ci" / "postgres.sh")
        out = subprocess.run(["bash", script, "start"], env=env, capture_output=True, text=True, check=False)
        line = next((x for x in out.stdout.splitlines() if x.startswith("export PYEINO_TEST_PG_DSN=")), None)
        dsn = None if line is None else line.split("=", 1)[1]
        if dsn is None:
            print(out.stderr, file=sys.stderr)
    try:
        print(f"backend: {args.backend}")
        anyio.run(_bench, args.runs, dsn, backend=args.backend)
    finally:
        if state_dir is not None:
            env = {**os.environ, "PYEINO_PG_DIR": state_dir}
            subprocess.run(
                ["bash", str(ROOT / ".ci" / "postgres.sh"), "stop"], env=env, capture_output=True, check=False
            )


if __name__ == "__main__":
    main()
