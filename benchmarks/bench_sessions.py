"""Session store cost per turn: append and load latency, and how they grow with the length of the history.

Run: ``.venv/bin/python benchmarks/bench_sessions.py [--sizes 10,100,1000] [--samples N] [--backend asyncio|trio]``.

One turn is what a run appends: the user's question, an assistant tool call, the tool's result (~600 characters)
and the answer (~300 characters). For each store (memory; SQLite on a file in the temp dir; PostgreSQL) a session
is grown turn by turn; when it holds each of ``--sizes`` turns, ``--samples`` more turns are measured:

- ``append``: one run's store traffic to record its turn (acquire the lease, commit the 4 messages and the
  session values, which releases the lease), median;
- ``load``: reading the whole history, median;
- ``load 40``: reading the newest 40 messages (``HistoryLimit(max_messages=40)``), median.

An append must not grow with the history (it writes its own rows, never the old ones); a whole load grows
linearly, a limited one does not. PostgreSQL uses ``$PYEINO_TEST_PG_DSN`` or a throwaway server from
``.ci/postgres.sh`` (skipped if neither).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from adk.sessions import HistoryLimit, InMemorySessionStore, PostgresSessionStore, SessionStore, SQLiteSessionStore
from compose.schema import FunctionCall, Message, ToolCall, assistant_message, tool_message, user_message

ROOT = Path(__file__).resolve().parents[1]


def turn(i: int) -> list[Message]:
    call = ToolCall(id=f"call_{i}", function=FunctionCall(name="search", arguments=f'{{"query": "question {i}"}}'))
    return [
        user_message(f"Question {i}: what did we decide about item {i}?"),
        assistant_message("", tool_calls=[call]),
        tool_message(f"result line {i}. " * 30, f"call_{i}", tool_name="search"),
        assistant_message(f"The answer to {i}. " * 15),
    ]


async def _append(store: SessionStore, i: int) -> float:
    t = time.perf_counter()
    lease = await store.acquire("bench")
    await store.commit(lease, turn(i), {"user": "alice", "turn": i})
    return time.perf_counter() - t


async def _load(store: SessionStore, limit: HistoryLimit | None) -> float:
    t = time.perf_counter()
    await store.load("bench", limit=limit)
    return time.perf_counter() - t


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:8.3f} ms"


async def bench(name: str, store: SessionStore, sizes: list[int], samples: int) -> None:
    print(f"  {name}")
    window = HistoryLimit(max_messages=40)
    done = 0
    for size in sizes:
        while done < size:
            await _append(store, done)
            done += 1
        appends: list[float] = []
        loads: list[float] = []
        windows: list[float] = []
        for _ in range(samples):
            appends.append(await _append(store, done))
            done += 1
        # each kind of load in its own loop: the garbage of whole loads is not collected while timing the others
        for _ in range(samples):
            windows.append(await _load(store, window))
        for _ in range(samples):
            loads.append(await _load(store, None))
        print(f"    {size:>5} turns   append {_ms(appends)}   load {_ms(loads)}   load 40 {_ms(windows)}")


async def run(sizes: list[int], samples: int, pg_dsn: str | None) -> None:
    print(f"session store cost per turn ({samples} samples at each size; 4 messages per turn)")
    await bench("memory", InMemorySessionStore(), sizes, samples)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sessions.db")
        async with SQLiteSessionStore(path) as sqlite:
            await bench("sqlite", sqlite, sizes, samples)
    if pg_dsn is None:
        print("  postgres   skipped: no server ($PYEINO_TEST_PG_DSN unset and .ci/postgres.sh failed)")
        return
    table = f"bench_sessions_{os.getpid()}"
    try:
        async with PostgresSessionStore(pg_dsn, table=table) as pg:
            await bench("postgres", pg, sizes, samples)
    finally:
        import psycopg

        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for t in (table, f"{table}_messages", f"{table}_pending"):
                conn.execute(f"DROP TABLE IF EXISTS {t}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    dsn = os.environ.get("PYEINO_TEST_PG_DSN")
    state_dir = None
    env: dict[str, Any] = {}
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
        anyio.run(run, sizes, args.samples, dsn, backend=args.backend)
    finally:
        if state_dir is not None:
            subprocess.run(
                ["bash", str(ROOT / ".ci" / "postgres.sh"), "stop"], env=env, capture_output=True, check=False
            )


if __name__ == "__main__":
    main()
