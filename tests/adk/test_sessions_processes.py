"""Sessions across processes: a 50-turn conversation whose process dies midway, and processes racing on one
session (SQLite file shared; PostgreSQL)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from adk.sessions import PostgresSessionStore, SQLiteSessionStore
from tests.compose.pg_server import PgServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WORKER = Path(__file__).parent / "workers" / "session_worker.py"
ROOT = Path(__file__).parents[2]


def _drop_pg_tables(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for t in ("sess_procs", "sess_procs_messages", "sess_procs_pending"):
            conn.execute(f"DROP TABLE IF EXISTS {t}")


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "sessions.db")
        return
    server: PgServer = request.getfixturevalue("pg_server")
    _drop_pg_tables(server.dsn)
    yield "postgres", server.dsn
    _drop_pg_tables(server.dsn)


def _store(kind: str, where: str) -> SQLiteSessionStore | PostgresSessionStore:
    return SQLiteSessionStore(where) if kind == "sqlite" else PostgresSessionStore(where, table="sess_procs")


async def _worker(*args: str, check: bool = True) -> tuple[int, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await anyio.run_process([sys.executable, str(WORKER), *args], env=env, check=False)
    if check:
        assert proc.returncode == 0, proc.stderr.decode()
    return proc.returncode, proc.stdout.decode().splitlines()


async def test_fifty_turns_with_the_process_killed_midway(where: tuple[str, str]) -> None:
    kind, path = where
    # the first process answers 25 turns, then dies by SIGKILL inside turn 25's tool (holding the lease)
    code, lines = await _worker("converse", kind, path, "0", "50", "25", check=False)
    assert code == -9
    assert [json.loads(line)["turn"] for line in lines] == list(range(25))
    # a new process waits for the dead one's lease to expire and goes on from the 25 stored turns
    _, lines = await _worker("converse", kind, path, "25", "50")
    seen = [json.loads(line) for line in lines]
    assert [s["turn"] for s in seen] == list(range(25, 50))
    assert [s["saw"] for s in seen] == [1 + 4 * i + 1 for i in range(25, 50)]  # system, history, question
    async with _store(kind, path) as store:
        session = await store.load("chat")
    assert session.turns == 50
    expected: list[tuple[str, str]] = []
    for i in range(50):
        expected += [
            ("user", f"q{i}"),
            ("assistant", f"work:c-q{i}"),
            ("tool", f"worked on q{i}"),
            ("assistant", f"answer to q{i} after {4 * i + 4} messages"),
        ]
    got = [
        (m.role, m.content or ",".join(f"{c.function.name}:{c.id}" for c in m.tool_calls)) for m in session.messages
    ]
    assert got == expected  # the killed attempt of turn 25 left nothing


async def _race(kind: str, path: str, tmp_path: Path, wait: str) -> list[str]:
    """Two workers on one session; the gate their tools wait for opens once one of them runs (holds the lease)
    and, when they do not wait, the other has reported "busy": no timing involved."""
    gate = tmp_path / f"gate-{wait}"
    lines: list[str] = []
    changed = anyio.Event()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    async def one(name: str) -> None:
        nonlocal changed
        cmd = [sys.executable, str(WORKER), "race", kind, path, name, str(gate), wait]
        async with await anyio.open_process(cmd, env=env, stderr=None) as proc:
            assert proc.stdout is not None
            buffered = b""
            async for chunk in proc.stdout:
                buffered += chunk
                while b"\n" in buffered:
                    line, buffered = buffered.split(b"\n", 1)
                    lines.append(line.decode())
                    changed.set()
            assert await proc.wait() == 0

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "p1")
        tg.start_soon(one, "p2")
        needed = {"running"} if wait == "wait" else {"running", "busy"}
        while not needed <= set(lines):
            await changed.wait()
            changed = anyio.Event()
        gate.touch()
    return sorted(lines)


async def test_two_processes_racing_one_fails_fast(where: tuple[str, str], tmp_path: Path) -> None:
    kind, path = where
    assert await _race(kind, path, tmp_path, "fail") == ["busy", "running"]
    async with _store(kind, path) as store:
        session = await store.load("shared")
    assert session.turns == 1 and len(session.messages) == 4


async def test_two_processes_waiting_run_one_after_the_other(where: tuple[str, str], tmp_path: Path) -> None:
    kind, path = where
    assert await _race(kind, path, tmp_path, "wait") == ["running", "running"]
    async with _store(kind, path) as store:
        session = await store.load("shared")
    assert session.turns == 2
    users = [m.content for m in session.messages if m.role == "user"]
    assert sorted(users) == ["p1", "p2"]
    for k in (0, 4):  # each turn whole and in order: never interleaved
        turn = session.messages[k : k + 4]
        assert [m.role for m in turn] == ["user", "assistant", "tool", "assistant"]
        assert turn[2].content == f"worked on {turn[0].content}"
    # the second run saw the first run's turn
    assert session.messages[7].content == f"answer to {users[1]} after 7 messages"
