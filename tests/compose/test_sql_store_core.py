"""The SQL store core (``compose._db``): databases written by earlier versions keep working on both dialects, and
the dialects' SQL differences."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from adk.sessions import PostgresSessionStore, SQLiteSessionStore
from compose._db.postgres import PostgresDialect
from compose.checkpoint import PostgresCheckPointStore, SQLiteCheckPointStore
from compose.schema import user_message
from tests.compose.pg_server import PgServer
from tests.stores import drop_checkpoint_table, drop_session_tables, pg_table

pytestmark = pytest.mark.anyio

# the tables as earlier versions created them: a checkpoint table before claims were renewed (no holder or
# renewed_at), and the session tables (SQLite's identifiers unquoted)
OLD_CHECKPOINTS = {
    "sqlite": "CREATE TABLE {t} (id TEXT PRIMARY KEY, data BLOB NOT NULL, seq INTEGER NOT NULL, owner TEXT, "
    "claimed_at REAL)",
    "postgres": 'CREATE TABLE {t} (id text COLLATE "C" PRIMARY KEY, data bytea NOT NULL, seq bigint NOT NULL, '
    "owner text, claimed_at timestamptz)",
}
OLD_SESSIONS = {
    "sqlite": [
        "CREATE TABLE {t} (id TEXT PRIMARY KEY, vals TEXT NOT NULL, next_seq INTEGER NOT NULL, turns INTEGER "
        "NOT NULL, owner TEXT, holder TEXT, expires REAL, last_commit TEXT, updated REAL NOT NULL)",
        "CREATE TABLE {t}_messages (session_id TEXT NOT NULL, seq INTEGER NOT NULL, turn INTEGER NOT NULL, role TEXT "
        "NOT NULL, tokens INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID",
        "CREATE TABLE {t}_pending (checkpoint_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, data TEXT NOT NULL)",
        "INSERT INTO {t} VALUES ('s', '{{\"n\": 1}}', 1, 1, NULL, NULL, NULL, NULL, 1.0)",
    ],
    "postgres": [
        'CREATE TABLE {t} (id text COLLATE "C" PRIMARY KEY, vals text NOT NULL, next_seq bigint NOT NULL, turns '
        "bigint NOT NULL, owner text, holder text, expires timestamptz, last_commit text, updated timestamptz "
        "NOT NULL)",
        'CREATE TABLE {t}_messages (session_id text COLLATE "C" NOT NULL, seq bigint NOT NULL, turn bigint NOT NULL, '
        "role text NOT NULL, tokens integer NOT NULL, data text NOT NULL, PRIMARY KEY (session_id, seq))",
        'CREATE TABLE {t}_pending (checkpoint_id text COLLATE "C" PRIMARY KEY, session_id text COLLATE "C" NOT NULL, '
        "data text NOT NULL)",
        "INSERT INTO {t} VALUES ('s', '{{\"n\": 1}}', 1, 1, NULL, NULL, NULL, NULL, now())",
    ],
}


@contextmanager
def old_database(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, str]]:
    """``(execute, where)``: runs a statement on the database, and the path or DSN a store opens it with."""
    if kind == "sqlite":
        path = tmp_path / "old.db"
        with closing(sqlite3.connect(path, isolation_level=None)) as db:
            yield db.execute, str(path)
        return
    import psycopg

    server: PgServer = request.getfixturevalue("pg_server")
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        yield conn.execute, server.dsn


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_checkpoint_table_of_an_earlier_version_gets_its_claim_columns(
    anyio_backend: Any, kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    table = pg_table("cp_old") if kind == "postgres" else "pyeino_checkpoints"
    with old_database(kind, request, tmp_path) as (execute, where):
        execute(OLD_CHECKPOINTS[kind].format(t=table))
        if kind == "postgres":
            execute(f"CREATE SEQUENCE {table}_seq")
            execute(f"INSERT INTO {table} VALUES ('old', 'x'::bytea, nextval('{table}_seq'), NULL, NULL)")
            request.addfinalizer(lambda: drop_checkpoint_table(where, table))
        else:
            execute(f"INSERT INTO {table} VALUES ('old', x'78', 1, NULL, NULL)")
    opened: Callable[..., Any] = SQLiteCheckPointStore if kind == "sqlite" else PostgresCheckPointStore
    async with opened(where, table=table) as store:
        assert await store.get("old") == b"x"
        await store.set("new", b"y")
        assert await store.list() == ["old", "new"]
        assert await store.claim("old", "me")
        info = await store.claim_info("old")
        assert info is not None and info.owner == "me" and info.holder is not None and 0 <= info.age < 30
        assert await store.release("old", "me")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_session_tables_of_an_earlier_version_keep_their_sessions(
    anyio_backend: Any, kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    table = pg_table("sess_old") if kind == "postgres" else "pyeino_sessions"
    with old_database(kind, request, tmp_path) as (execute, where):
        for statement in OLD_SESSIONS[kind]:
            execute(statement.format(t=table))
        execute(f"INSERT INTO {table}_messages VALUES ('s', 0, 0, 'user', 5, '{user_message('hi').model_dump_json()}')")
    if kind == "postgres":
        request.addfinalizer(lambda: drop_session_tables(where, table))
    opened: Callable[..., Any] = SQLiteSessionStore if kind == "sqlite" else PostgresSessionStore
    async with opened(where, table=table) as store:
        session = await store.load("s")
        assert ([m.content for m in session.messages], session.values, session.turns) == (["hi"], {"n": 1}, 1)
        lease = await store.acquire("s")
        await store.commit(lease, [user_message("again")], {"n": 2})
        turns = await store.turns("s")
        assert [[m.content for m in t.messages] for t in turns] == [["hi"], ["again"]]
        assert [t.values for t in turns] == [{}, {"n": 2}]  # the old turn predates the turns table
        assert await store.list() == ["s"]


def test_postgres_placeholders_leave_casts_and_literals_alone() -> None:
    d = PostgresDialect("", min_size=1, max_size=1, timeout=1, name="n", setup=print, label="l", error=Exception)
    query = "SELECT :a::float8, ':b', 50 % 2 FROM t WHERE x LIKE :p ESCAPE '\\' AND y < now() - :s::float8"
    assert d.sql(query) == (
        "SELECT %(a)s::float8, ':b', 50 %% 2 FROM t WHERE x LIKE %(p)s ESCAPE '\\' AND y < now() - %(s)s::float8"
    )


async def test_the_sqlite_clock_is_the_machines(anyio_backend: Any, tmp_path: Path) -> None:
    """Claims are stamped by SQLite's own clock: the same Unix seconds as ``time.time()``."""
    import time

    async with SQLiteCheckPointStore(tmp_path / "cp.db") as store:
        await store.set("k", b"")
        before = time.time()
        assert await store.claim("k", "me")
        with closing(sqlite3.connect(tmp_path / "cp.db")) as db:
            (claimed_at,) = db.execute("SELECT claimed_at FROM pyeino_checkpoints").fetchone()
        assert before - 0.01 <= claimed_at <= time.time() + 0.01
