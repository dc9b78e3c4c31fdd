"""Checkpoint claims never outlive their owner (issue 28): a claim is renewed while its resumed run is in flight
and expires once nobody renews it (the store was down when the run ended and could not release it, or the
process died), and a refused resume names the claim's holder and age. On SQLite (a locked file) and PostgreSQL
(the server stopped mid-run and started again)."""

from __future__ import annotations

import os
import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from compose import CheckpointClaimedError as ExportedClaimed
from compose.checkpoint import InMemoryCheckPointStore, PostgresCheckPointStore, SQLiteCheckPointStore
from compose.errors import CheckpointClaimedError, CheckpointError, CheckpointStoreError
from compose.runnable import Runnable
from tests.compose.pg_server import PgServer
from tests.compose.test_resume_reliability import Effects, pause
from tests.stores import drop_checkpoint_table, pg_table, renewed_past

pytestmark = pytest.mark.anyio

HOLDER = f"pid {os.getpid()} on {socket.gethostname()}"


async def resume_once_expired(
    r: Runnable[str, str], ask_id: str, data: str
) -> tuple[str, list[CheckpointClaimedError]]:
    """Resume until the claim left on checkpoint 'k' has expired (no ``claim_stale_after``): the output and the
    refusals met before."""
    refused: list[CheckpointClaimedError] = []
    with anyio.fail_after(60):
        while True:
            try:
                return await r.invoke("", checkpoint_id="k", resume={ask_id: data}), refused
            except CheckpointClaimedError as e:
                refused.append(e)
                await anyio.sleep(0.1)


async def test_a_claim_the_locked_sqlite_file_kept_expires_and_the_refusal_names_its_holder(
    anyio_backend: Any, tmp_path: Path
) -> None:
    path = tmp_path / "cp.db"
    lock: list[sqlite3.Connection] = []

    async def grab(x: str) -> str:  # runs after the resume claimed its checkpoint: the file is locked at its end
        if not lock:
            lock.append(sqlite3.connect(path, isolation_level=None))
            lock[0].execute("BEGIN IMMEDIATE")
        return x

    fx = Effects()
    async with SQLiteCheckPointStore(path, busy_timeout=0.2, claim_ttl=2.0) as store:
        r = fx.graph(tail=grab).compile(checkpoint_store=store)
        ask_id = await pause(r)
        with pytest.raises(CheckpointStoreError, match="could not be deleted") as e:
            await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"})
        notes = getattr(e.value, "__notes__", [])
        assert any("could not be released" in n and "expires after the store's claim_ttl" in n for n in notes)
        lock[0].execute("COMMIT")
        lock[0].close()
        # the file works again, but the claim is still there: refused, naming who holds it and since when
        with pytest.raises(CheckpointClaimedError) as info:
            await r.invoke("", checkpoint_id="k", resume={ask_id: "2"})
        claimed = info.value
        assert claimed.reason == "claimed" and isinstance(claimed, CheckpointError) and ExportedClaimed is type(claimed)
        assert claimed.holder == HOLDER and claimed.checkpoint_id == "k"
        assert claimed.claim_age is not None and claimed.claim_age >= 0
        assert claimed.expires_in is not None and claimed.expires_in <= 2.0
        assert f"checkpoint 'k' is being resumed by another run (held by {HOLDER}, claimed " in str(claimed)
        # nobody renews it: it expires, and a plain resume (no claim_stale_after) takes it over
        out, _ = await resume_once_expired(r, ask_id, "2")
        assert out == "[2]b"
        assert await store.list() == []


@pytest.fixture(params=["sqlite", "postgres"])
def claim_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Any]:
    """Opens a SQL store on one shared file or table (as another process would), with ``claim_ttl`` given."""
    if request.param == "sqlite":
        return lambda **kw: SQLiteCheckPointStore(tmp_path / "cp.db", **kw)
    server: PgServer = request.getfixturevalue("pg_server")
    table = pg_table("cp_test")
    request.addfinalizer(lambda: drop_checkpoint_table(server.dsn, table))
    return lambda **kw: PostgresCheckPointStore(server.dsn, table=table, max_size=4, **kw)


async def test_a_renewed_claim_outlives_its_ttl(anyio_backend: Any, claim_store: Callable[..., Any]) -> None:
    inside, release = anyio.Event(), anyio.Event()

    async def hold(x: str) -> str:
        inside.set()
        await release.wait()
        return x

    fx = Effects()
    async with claim_store(claim_ttl=1.0) as store, claim_store(claim_ttl=1.0) as other:
        r = fx.graph(tail=hold).compile(checkpoint_store=store)
        ask_id = await pause(r)
        out: list[str] = []

        async def resume() -> None:
            out.append(await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(resume)
            await inside.wait()
            await renewed_past(store._keeper, 1.0)  # past its first lifetime, renewed by the keeper thread meanwhile
            rival = fx.graph(tail=hold).compile(checkpoint_store=other)
            with pytest.raises(CheckpointClaimedError) as info:
                await rival.invoke("", checkpoint_id="k", resume={ask_id: "again"})
            assert info.value.holder == HOLDER
            assert info.value.claim_age is not None and info.value.claim_age >= 1.0
            assert info.value.renewed_ago is not None and info.value.renewed_ago < 1.0
            release.set()
        assert out == ["[yes]b"]
        assert fx.ran == ["a", "ask:yes", "b"]


async def test_the_in_memory_store_names_the_holder_and_its_claims_never_expire(anyio_backend: Any) -> None:
    store = InMemoryCheckPointStore()
    r = Effects().graph().compile(checkpoint_store=store)
    ask_id = await pause(r)
    assert await store.claim("k", "a-run-in-flight")
    with pytest.raises(CheckpointClaimedError) as info:
        await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"})
    assert (info.value.holder, info.value.expires_in) == (HOLDER, None)
    assert "unless renewed" not in str(info.value)
    assert await store.release("k", "a-run-in-flight")
    assert await store.claim_info("k") is None


def test_claim_ttl_is_checked(tmp_path: Path) -> None:
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="claim_ttl must be > 0 seconds or None"):
            SQLiteCheckPointStore(tmp_path / "cp.db", claim_ttl=bad)


async def test_postgres_stopped_mid_run_and_started_again_the_claim_expires(
    anyio_backend: Any, pg_own_server: PgServer
) -> None:
    halted: list[bool] = []

    async def stop_server(x: str) -> str:  # runs (once) after the resume claimed its checkpoint
        if not halted:
            halted.append(True)
            await anyio.to_thread.run_sync(pg_own_server.halt)
        return x

    table = pg_table("cp_test")
    fx = Effects()
    try:
        async with PostgresCheckPointStore(pg_own_server.dsn, table=table, timeout=1.0, claim_ttl=3.0) as store:
            r = fx.graph(tail=stop_server).compile(checkpoint_store=store)
            ask_id = await pause(r)
            try:
                with pytest.raises(CheckpointStoreError, match="could not be deleted") as e:
                    await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"})
            finally:
                await anyio.to_thread.run_sync(pg_own_server.start)
            assert any("could not be released" in n for n in getattr(e.value, "__notes__", []))
            assert await store.list() == ["k"]  # still stored, still claimed
            out, refused = await resume_once_expired(r, ask_id, "2")
            assert out == "[2]b"
            assert all(e.holder == HOLDER for e in refused)
            assert await store.list() == []
    finally:
        await anyio.to_thread.run_sync(drop_checkpoint_table, pg_own_server.dsn, table)
