"""The stores tests run on, one of each kind: in memory, SQLite in the test's temporary directory, PostgreSQL on the
``pg_server`` fixture's server (in tables of the test's own, dropped at the end).

A fixture parametrized over :data:`STORE_KINDS` opens one with :func:`checkpoint_store` or :func:`session_store`::

    @pytest.fixture(params=STORE_KINDS)
    async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
        async with session_store(request, tmp_path) as s:
            yield s
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from adk.sessions import InMemorySessionStore, PostgresSessionStore, SessionStore, SQLiteSessionStore
from compose.checkpoint import (
    ClaimableCheckPointStore,
    InMemoryCheckPointStore,
    PostgresCheckPointStore,
    SQLiteCheckPointStore,
)

STORE_KINDS = ["memory", "sqlite", "postgres"]

_tables = itertools.count()


def pg_table(prefix: str) -> str:
    """A table name that no other test, and no other test process, uses."""
    return f"{prefix}_{os.getpid()}_{next(_tables)}"


def drop_checkpoint_table(dsn: str, table: str) -> None:
    """Drop a PostgresCheckPointStore's table (and its sequence)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"DROP SEQUENCE IF EXISTS {table}_seq")


def drop_session_tables(dsn: str, table: str) -> None:
    """Drop a PostgresSessionStore's tables."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for t in (table, f"{table}_messages", f"{table}_pending", f"{table}_turns"):
            conn.execute(f"DROP TABLE IF EXISTS {t}")


def checkpoint_store(
    request: pytest.FixtureRequest, tmp_path: Path, *, max_size: int = 4
) -> AbstractAsyncContextManager[ClaimableCheckPointStore]:
    """A checkpoint store of the kind ``request.param`` names; ``max_size``: the PostgreSQL pool's."""
    kinds = (InMemoryCheckPointStore, SQLiteCheckPointStore, PostgresCheckPointStore)
    return _store(request, tmp_path / "cp.db", kinds, "cp_test", drop_checkpoint_table, max_size)


def session_store(
    request: pytest.FixtureRequest, tmp_path: Path, *, max_size: int = 4
) -> AbstractAsyncContextManager[SessionStore]:
    """A session store of the kind ``request.param`` names; ``max_size``: the PostgreSQL pool's."""
    kinds = (InMemorySessionStore, SQLiteSessionStore, PostgresSessionStore)
    return _store(request, tmp_path / "sessions.db", kinds, "sess_test", drop_session_tables, max_size)


@asynccontextmanager
async def _store(
    request: pytest.FixtureRequest,
    path: Path,
    kinds: tuple[Any, Any, Any],
    prefix: str,
    drop: Callable[[str, str], None],
    max_size: int,
) -> AsyncIterator[Any]:
    memory, sqlite, postgres = kinds
    if request.param == "memory":
        yield memory()
    elif request.param == "sqlite":
        async with sqlite(path) as s:
            yield s
    else:
        server = request.getfixturevalue("pg_server")
        table = pg_table(prefix)
        async with postgres(server.dsn, table=table, max_size=max_size) as s:
            yield s
        await anyio.to_thread.run_sync(drop, server.dsn, table)


async def renewed_past(keeper: Any, seconds: float) -> None:
    """Returns right after a renewal by ``keeper`` (a store's ``LeaseKeeper``) that began ``seconds`` or more from
    now: the lease it renews has outlived that long, and is freshly renewed, however late the keeper's thread ran.

    Counted, not timed: the test waits for the keeper's own renewals, never for a sleep that a loaded machine could
    stretch past a lease's lifetime.
    """
    renew = keeper._renew
    done = threading.Semaphore(0)
    started: list[float] = []

    def counted(owners: list[str]) -> None:
        started.append(time.monotonic())
        renew(owners)
        done.release()

    keeper._renew = counted
    since = time.monotonic()
    try:
        with anyio.fail_after(60):  # the keeper stopped renewing: fail, never hang
            while True:
                await anyio.to_thread.run_sync(done.acquire, abandon_on_cancel=True)
                if started[-1] - since >= seconds:
                    return
    finally:
        keeper._renew = renew
        done.release()  # frees a wait abandoned by the timeout


async def retired(keeper: Any, key: str) -> None:
    """Returns once ``keeper`` (a checkpoint store's ``LeaseKeeper``) has finished retiring the lease on ``key``:
    the deletion of a completed run's checkpoint, handed to it when the store failed, went through.

    Counted, not timed: the test waits for the keeper's own successful call, never for a sleep.
    """
    finish = keeper._finish
    done = threading.Event()

    def counted(k: str, owner: str) -> None:
        finish(k, owner)
        if k == key:
            done.set()

    keeper._finish = counted
    try:
        if all(k != key for k, _ in keeper.retiring()):  # done before the wrapper was in place
            return
        with anyio.fail_after(60):  # the keeper stopped retrying: fail, never hang
            await anyio.to_thread.run_sync(done.wait, abandon_on_cancel=True)
    finally:
        keeper._finish = finish
        done.set()  # frees a wait abandoned by the timeout
