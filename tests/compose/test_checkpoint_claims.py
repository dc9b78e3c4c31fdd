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
from tests.stores import drop_checkpoint_table, pg_table, renewed_past, retired

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
    store = SQLiteCheckPointStore(path, busy_timeout=0.2, claim_ttl=2.0)
    async with SQLiteCheckPointStore(path, claim_ttl=2.0) as other:  # another process on the same file
        r = fx.graph(tail=grab).compile(checkpoint_store=store)
        ask_id = await pause(r)
        with pytest.raises(CheckpointStoreError, match="could not be deleted") as e:
            await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"})
        assert "if this process ends first, the claim expires after claim_ttl" in str(e.value)
        store._keeper.stop()  # the process dies before the file is free: nobody renews the claim or deletes
        lock[0].execute("COMMIT")
        lock[0].close()
        # the file works again, but the claim is still there: refused, naming who holds it and since when
        r2 = fx.graph(tail=grab).compile(checkpoint_store=other)
        with pytest.raises(CheckpointClaimedError) as info:
            await r2.invoke("", checkpoint_id="k", resume={ask_id: "2"})
        claimed = info.value
        assert claimed.reason == "claimed" and isinstance(claimed, CheckpointError) and ExportedClaimed is type(claimed)
        assert claimed.holder == HOLDER and claimed.checkpoint_id == "k"
        assert claimed.claim_age is not None and claimed.claim_age >= 0
        assert claimed.expires_in is not None and claimed.expires_in <= 2.0
        assert f"checkpoint 'k' is being resumed by another run (held by {HOLDER}, claimed " in str(claimed)
        # nobody renews it: it expires, and a plain resume (no claim_stale_after) takes it over (at least once)
        out, _ = await resume_once_expired(r2, ask_id, "2")
        assert out == "[2]b"
        assert await other.list() == []
    await store.aclose()


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


class Outage:
    """A SQL store whose deletes fail while ``down`` (the run's own and its keeper's retries), as a database that
    went away would; its claims are still renewed."""

    down = True

    async def delete(self, checkpoint_id: str) -> None:
        if self.down:
            raise ConnectionError("server closed the connection")
        await super().delete(checkpoint_id)  # type: ignore[misc]

    def _delete_claimed(self, checkpoint_id: str, owner: str) -> None:
        if self.down:
            raise ConnectionError("server closed the connection")
        super()._delete_claimed(checkpoint_id, owner)  # type: ignore[misc]


@pytest.fixture(params=["sqlite", "postgres"])
def outage_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Any]:
    """Like ``claim_store``, the first store opened an :class:`Outage` one."""
    made: list[Any] = []
    if request.param == "sqlite":
        kind: Any = SQLiteCheckPointStore
        args: tuple[Any, ...] = (tmp_path / "cp.db",)
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        table = pg_table("cp_test")
        request.addfinalizer(lambda: drop_checkpoint_table(server.dsn, table))
        kind, args = PostgresCheckPointStore, (server.dsn,)
        args_kw = {"table": table, "max_size": 4}
    extra = {} if request.param == "sqlite" else args_kw

    def open_store(**kw: Any) -> Any:
        cls = kind if made else type(f"Outage{kind.__name__}", (Outage, kind), {})
        made.append(cls)
        return cls(*args, **extra, **kw)

    return open_store


async def test_a_completed_run_whose_delete_failed_keeps_its_claim_until_the_store_deletes_it(
    anyio_backend: Any, outage_store: Callable[..., Any]
) -> None:
    """Issue (a finished payment made again): the store is down as the resumed run completes. Its claim is
    renewed past its lifetime and the delete retried, so a later resume is refused, never run again; once the
    store is back the keeper deletes the checkpoint."""
    fx = Effects()
    async with outage_store(claim_ttl=1.0) as store, outage_store(claim_ttl=1.0) as other:
        r = fx.graph().compile(checkpoint_store=store)
        ask_id = await pause(r)
        with pytest.raises(CheckpointStoreError, match="could not be deleted") as e:
            await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"})
        assert isinstance(e.value.__cause__, ConnectionError)
        assert "the store retries the delete until it works again" in str(e.value)
        assert store._keeper.retiring() == [("k", (await store.claim_info("k")).owner)]
        await renewed_past(store._keeper, 1.0)  # past the claim's lifetime, renewed (the delete still failing)
        rival = fx.graph().compile(checkpoint_store=other)
        with pytest.raises(CheckpointClaimedError) as info:
            await rival.invoke("", checkpoint_id="k", resume={ask_id: "again"})
        assert info.value.holder == HOLDER and info.value.claim_age is not None and info.value.claim_age >= 1.0
        assert fx.ran == ["a", "ask:yes", "b"]
        store.down = False
        await retired(store._keeper, "k")
        assert await other.list() == [] and store._keeper.retiring() == []
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


async def test_postgres_stopped_mid_run_and_started_again_the_checkpoint_is_deleted(
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
            assert "the store retries the delete until it works again" in str(e.value)
            await retired(store._keeper, "k")  # the keeper deleted it once the server was back
            assert await store.list() == []
            assert fx.ran == ["a", "ask:yes", "b"]  # the rest of the run never ran again
    finally:
        await anyio.to_thread.run_sync(drop_checkpoint_table, pg_own_server.dsn, table)
