"""Session stores (memory, SQLite, PostgreSQL): the contract, leases, limits, pending turns, JSON only."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from adk.errors import SessionBusyError, SessionError, SessionLeaseLostError, SessionStoreError
from adk.sessions import (
    HistoryLimit,
    InMemorySessionStore,
    PostgresSessionStore,
    SessionStore,
    SQLiteSessionStore,
    approximate_tokens,
)
from compose.schema import FunctionCall, Message, ToolCall, assistant_message, tool_message, user_message
from tests.compose.pg_server import PgServer
from tests.stores import STORE_KINDS, drop_session_tables, pg_table, renewed_past

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

StoreFactory = Callable[..., Any]


@pytest.fixture(params=STORE_KINDS)
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """A factory of stores of one kind, all on the same database; every store is closed at the end."""
    made: list[Any] = []
    tables: list[str] = []
    server: PgServer | None = request.getfixturevalue("pg_server") if request.param == "postgres" else None
    table = pg_table("sess_test")

    def make(**options: Any) -> Any:
        if request.param == "memory":
            store: Any = InMemorySessionStore(**{k: v for k, v in options.items() if k != "lease_ttl"})
        elif request.param == "sqlite":
            store = SQLiteSessionStore(tmp_path / "sessions.db", **options)
        else:
            assert server is not None
            tables.append(table)
            store = PostgresSessionStore(server.dsn, table=table, max_size=4, **options)
        made.append(store)
        return store

    make.kind = request.param  # type: ignore[attr-defined]
    yield make
    for store in made:
        await store.aclose()
    if server is not None and tables:
        await anyio.to_thread.run_sync(drop_session_tables, server.dsn, table)


@pytest.fixture
async def store(make_store: StoreFactory) -> Any:
    return make_store()


def _call(name: str, id: str) -> ToolCall:
    return ToolCall(id=id, function=FunctionCall(name=name, arguments='{"q": "x"}'))


def turn(i: int) -> list[Message]:
    """A user question, a tool call, its result and the answer."""
    return [
        user_message(f"q{i}"),
        assistant_message("", tool_calls=[_call("lookup", f"c{i}")]),
        tool_message(f"r{i}", f"c{i}", tool_name="lookup"),
        assistant_message(f"a{i}"),
    ]


async def append(store: SessionStore, session_id: str, messages: list[Message], **values: Any) -> None:
    lease = await store.acquire(session_id)
    await store.commit(lease, messages, values)


# ---------------------------------------------------------------------------------------------------------------
# The contract


async def test_unknown_session_is_empty(store: SessionStore) -> None:
    session = await store.load("nobody")
    assert (session.session_id, session.messages, session.values, session.turns) == ("nobody", [], {}, 0)
    assert await store.list() == []


async def test_turns_append_in_order_with_values(store: SessionStore) -> None:
    await append(store, "s", turn(0), lang="en")
    await append(store, "s", turn(1), lang="fr", count=2)
    session = await store.load("s")
    assert session.messages == turn(0) + turn(1)  # every field round-trips (tool calls, ids, names)
    assert session.values == {"lang": "fr", "count": 2}
    assert session.turns == 2


async def test_values_are_json(store: SessionStore) -> None:
    class Prefs(BaseModel):
        unit: str

    await append(store, "s", [user_message("hi")], prefs=Prefs(unit="C"), tags=("a", "b"))
    assert (await store.load("s")).values == {"prefs": {"unit": "C"}, "tags": ["a", "b"]}


async def test_a_value_that_is_not_json_is_named_and_nothing_is_written(store: SessionStore) -> None:
    lease = await store.acquire("s")
    with pytest.raises(SessionError, match=r"session 's': session value 'conn' \(object\) cannot be stored as JSON"):
        await store.commit(lease, [user_message("hi")], {"ok": 1, "conn": object()})
    await store.release(lease)
    assert (await store.load("s")).turns == 0


async def test_list_by_prefix_least_recently_updated_first(store: SessionStore) -> None:
    for sid in ("user-2", "user-1", "bot_1", "user_3"):
        await append(store, sid, [user_message(sid)])
    await append(store, "user-2", [user_message("again")])
    assert await store.list() == ["user-1", "bot_1", "user_3", "user-2"]
    assert await store.list("user-") == ["user-1", "user-2"]  # '_' and '%' are literal
    assert await store.list("user_") == ["user_3"]


async def test_delete_removes_messages_values_and_pending(store: SessionStore) -> None:
    await append(store, "s", turn(0), x=1)
    lease = await store.acquire("s")
    await store.hold(lease, "cp-1", [user_message("paused")])
    await store.delete("s")
    await store.delete("s")  # nothing happens the second time
    assert await store.list() == []
    assert (await store.load("s")).messages == []
    assert await store.pending("cp-1") is None


async def test_pending_turn_round_trip_and_commit_deletes_it(store: SessionStore) -> None:
    await append(store, "s", turn(0))
    lease = await store.acquire("s")
    await store.hold(lease, "cp-1", turn(1)[:2])
    pending = await store.pending("cp-1")
    assert pending is not None
    assert (pending.checkpoint_id, pending.session_id, pending.messages) == ("cp-1", "s", turn(1)[:2])
    assert (await store.load("s")).turns == 1  # holding appends nothing
    lease = await store.acquire("s")  # and gives the lease up
    await store.commit(lease, turn(1), {}, pending="cp-1")
    assert await store.pending("cp-1") is None
    assert (await store.load("s")).messages == turn(0) + turn(1)


async def test_a_failed_first_run_leaves_no_session(store: SessionStore) -> None:
    lease = await store.acquire("new")
    await store.release(lease)
    await store.release(lease)  # idempotent
    assert await store.list() == []
    assert (await store.load("new")).turns == 0


def test_stores_implement_the_protocol() -> None:
    assert isinstance(InMemorySessionStore(), SessionStore)
    assert isinstance(SQLiteSessionStore(":memory:"), SessionStore)


def test_public_names() -> None:
    import adk.sessions

    for name in adk.sessions.__all__:
        assert getattr(adk.sessions, name) is not None
    assert adk.SQLiteSessionStore is SQLiteSessionStore
    assert adk.InMemorySessionStore is InMemorySessionStore
    assert adk.PostgresSessionStore is PostgresSessionStore
    assert adk.HistoryLimit is HistoryLimit
    assert sorted(adk.sessions.__all__) == adk.sessions.__all__


# ---------------------------------------------------------------------------------------------------------------
# Leases


async def test_a_second_lease_fails_fast_naming_the_session(store: SessionStore) -> None:
    lease = await store.acquire("user-42")
    with pytest.raises(SessionBusyError, match="session 'user-42' has a run in flight") as info:
        await store.acquire("user-42")
    assert info.value.session_id == "user-42"
    other = await store.acquire("user-43")  # another session is not affected
    await store.release(other)
    await store.commit(lease, [user_message("hi")], {})
    await store.release(await store.acquire("user-42"))  # free again after the commit


async def test_a_waiting_acquire_gets_the_lease_when_it_is_released(store: SessionStore, no_task_leaks: None) -> None:
    lease = await store.acquire("s")
    got: list[str] = []

    async def second() -> None:
        mine = await store.acquire("s", wait=None)
        got.append(mine.owner)
        await store.commit(mine, [user_message("second")], {})

    async with anyio.create_task_group() as tg:
        tg.start_soon(second)
        await anyio.wait_all_tasks_blocked()
        assert got == []
        await store.commit(lease, [user_message("first")], {})
    assert len(got) == 1
    assert [m.content for m in (await store.load("s")).messages] == ["first", "second"]


async def test_a_wait_that_runs_out_is_busy(store: SessionStore) -> None:
    lease = await store.acquire("s")
    with pytest.raises(SessionBusyError, match=r"after waiting 0\.05s"):
        await store.acquire("s", wait=0.05)
    await store.release(lease)


async def test_a_lost_lease_appends_nothing(make_store: StoreFactory) -> None:
    store = make_store()
    lease = await store.acquire("s")
    await store.delete("s")  # e.g. an operator deleted the session under the run
    with pytest.raises(SessionLeaseLostError, match="session 's': this run's lease was lost"):
        await store.commit(lease, [user_message("late")], {})
    with pytest.raises(SessionLeaseLostError):
        await store.hold(lease, "cp", [user_message("late")])
    assert await store.list() == []
    assert await store.pending("cp") is None


async def test_an_expired_lease_is_taken_over_and_the_old_run_cannot_append(make_store: StoreFactory) -> None:
    if make_store.kind == "memory":  # type: ignore[attr-defined]
        pytest.skip("in-memory leases die with their process: they never expire")
    store = make_store(lease_ttl=0.5)
    stale = await store.acquire("s")
    store._keeper.drop(stale.owner)  # the holder stops renewing: as if its process froze or died
    with pytest.raises(SessionBusyError):
        await store.acquire("s")
    fresh = await store.acquire("s", wait=5)  # free once expired
    with pytest.raises(SessionLeaseLostError):
        await store.commit(stale, [user_message("stale")], {})
    await store.commit(fresh, [user_message("fresh")], {})
    assert [m.content for m in (await store.load("s")).messages] == ["fresh"]


async def test_a_renewed_lease_outlives_its_ttl(make_store: StoreFactory) -> None:
    if make_store.kind == "memory":  # type: ignore[attr-defined]
        pytest.skip("in-memory leases never expire")
    store = make_store(lease_ttl=1.0)
    lease = await store.acquire("s")
    await renewed_past(store._keeper, 1.0)  # past its first lifetime, renewed by the keeper thread meanwhile
    with pytest.raises(SessionBusyError):
        await store.acquire("s")
    await store.commit(lease, [user_message("kept")], {})


async def test_a_cancelled_wait_takes_no_lease(store: SessionStore, no_task_leaks: None) -> None:
    lease = await store.acquire("s")
    with anyio.move_on_after(0.1):
        await store.acquire("s", wait=None)
    await store.commit(lease, [user_message("one")], {})
    await store.release(await store.acquire("s"))  # nobody else holds it


async def test_bad_session_ids_and_waits(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="session_id must not be empty"):
        await store.acquire("")
    with pytest.raises(TypeError, match="session_id must be a str, got int"):
        await store.acquire(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="wait must be >= 0 seconds or None"):
        await store.acquire("s", wait=-1)


# ---------------------------------------------------------------------------------------------------------------
# Limits


def test_history_limit_start() -> None:
    rows = [(5, "assistant", 10), (4, "tool", 10), (3, "assistant", 10), (2, "user", 10), (1, "assistant", 10)]
    assert HistoryLimit(max_messages=10).start(rows) is None
    assert HistoryLimit(max_messages=4).start(rows) == 2
    assert HistoryLimit(max_messages=2).start(rows) == 5  # starting at the tool result would orphan it
    assert HistoryLimit(max_tokens=35).start(rows) == 3
    assert HistoryLimit(max_tokens=5).start(rows) == 6  # nothing fits: keep nothing
    assert HistoryLimit(max_messages=4, max_tokens=25).start(rows) == 5
    assert HistoryLimit().start(rows) is None
    with pytest.raises(ValueError, match=r"HistoryLimit\(max_messages=...\) must be a positive int or None, got 0"):
        HistoryLimit(max_messages=0)


def test_approximate_tokens() -> None:
    assert approximate_tokens(user_message("")) == 4
    assert approximate_tokens(user_message("abcdefgh")) == 6
    call = assistant_message("", tool_calls=[_call("lookup", "c1")])
    assert approximate_tokens(call) == 4 + (len("lookup") + len('{"q": "x"}') + 3) // 4


async def test_load_within_a_limit(store: SessionStore) -> None:
    for i in range(5):
        await append(store, "s", turn(i))
    window = await store.load("s", limit=HistoryLimit(max_messages=6))
    # the newest 6 would start at turn 3's tool result: the window starts after it
    assert window.messages == turn(3)[3:] + turn(4)
    assert (await store.load("s")).messages == [m for i in range(5) for m in turn(i)]  # nothing was cut


async def test_keep_trims_the_stored_history_by_count(make_store: StoreFactory) -> None:
    store = make_store(keep=HistoryLimit(max_messages=8))
    for i in range(10):
        await append(store, "s", turn(i))
    session = await store.load("s")
    assert session.messages == turn(8) + turn(9)
    assert session.turns == 10


async def test_keep_trims_by_tokens_with_a_pluggable_counter(make_store: StoreFactory) -> None:
    store = make_store(keep=HistoryLimit(max_tokens=30), token_counter=lambda m: 5)
    for i in range(10):
        await append(store, "s", turn(i))
    messages = (await store.load("s")).messages
    assert messages == turn(8)[3:] + turn(9)  # the newest 6 of 5 tokens each, less the leading tool result


# ---------------------------------------------------------------------------------------------------------------
# SQLite and PostgreSQL specifics


async def test_sqlite_rows_are_json_one_per_message(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteSessionStore(path) as store:
        await append(store, "s", turn(0), lang="en")
        await append(store, "s", turn(1))
    db = sqlite3.connect(path)
    rows = db.execute("SELECT seq, turn, role, data FROM pyeino_sessions_messages ORDER BY seq").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (i, t, role) for i, (t, role) in enumerate((t, m.role) for t in range(2) for m in turn(t))
    ]
    assert json.loads(rows[0][3])["content"] == "q0"
    assert json.loads(db.execute("SELECT vals FROM pyeino_sessions").fetchone()[0]) == {}
    db.close()


async def test_sqlite_repr_and_close(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    assert repr(store) == f"<SQLiteSessionStore {str(tmp_path / 's.db')!r} table=pyeino_sessions not yet opened>"
    await append(store, "s", [user_message("hi")])
    assert repr(store).endswith("open>")
    await store.aclose()
    assert repr(store).endswith("closed>")
    with pytest.raises(anyio.ClosedResourceError):
        await store.load("s")


async def test_sqlite_database_errors_are_store_errors(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    async with SQLiteSessionStore(tmp_path / "dir.db") as store:
        with pytest.raises(SessionStoreError, match="SQLite session store"):
            await store.load("s")


_HOLDER = """
import sys, anyio
from adk.sessions import SQLiteSessionStore

async def main(path):
    store = SQLiteSessionStore(path, lease_ttl=1.5)
    await store.acquire("s")
    print("held", flush=True)
    sys.stdin.readline()  # killed here

anyio.run(main, sys.argv[1])
"""


async def test_sqlite_lease_of_a_killed_process_expires(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    async with await anyio.open_process([sys.executable, "-c", _HOLDER, path], cwd=ROOT) as proc:
        assert proc.stdout is not None
        assert (await proc.stdout.receive()).strip() == b"held"
        async with SQLiteSessionStore(path) as store:
            with pytest.raises(SessionBusyError, match=r"session 's' has a run in flight \(held by pid \d+ on "):
                await store.acquire("s")
            proc.kill()
            await proc.wait()
            lease = await store.acquire("s", wait=10)  # expired 1.5 s after its last renewal
            await store.commit(lease, [user_message("after")], {})


async def test_postgres_repr_and_unreachable_server(pg_server: PgServer) -> None:
    table = pg_table("sess_test")
    store = PostgresSessionStore(pg_server.dsn, table=table)
    assert repr(store) == f"<PostgresSessionStore table={table} not yet opened>"
    await append(store, "s", [user_message("hi")])
    assert repr(store).startswith(f"<PostgresSessionStore table={table} open pool_size=")
    await store.aclose()
    await anyio.to_thread.run_sync(drop_session_tables, pg_server.dsn, table)
    async with PostgresSessionStore("postgresql://nobody@127.0.0.1:1/none", timeout=0.5) as down:
        with pytest.raises(SessionStoreError, match="PostgreSQL session store"):
            await down.load("s")


async def test_postgres_two_pools_one_lease(pg_server: PgServer) -> None:
    table = pg_table("sess_test")
    try:
        async with (
            PostgresSessionStore(pg_server.dsn, table=table) as one,
            PostgresSessionStore(pg_server.dsn, table=table) as two,
        ):
            results: list[str] = []
            go = anyio.Event()

            async def runner(store: PostgresSessionStore, i: int) -> None:
                await go.wait()
                try:
                    lease = await store.acquire("s")
                except SessionBusyError:
                    results.append("busy")
                    return
                results.append("won")
                await store.commit(lease, [user_message(f"from {i}")], {})

            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(runner, one if i % 2 else two, i)
                await anyio.wait_all_tasks_blocked()
                go.set()
            assert results.count("won") >= 1
            turns = (await one.load("s")).turns
            assert turns == results.count("won")  # every winner appended once, never two at a time
    finally:
        await anyio.to_thread.run_sync(drop_session_tables, pg_server.dsn, table)
