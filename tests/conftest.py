"""Shared fixtures: every async test runs on asyncio and trio; every test ends with no open stream and no task."""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest


@pytest.fixture(
    params=[
        pytest.param(("asyncio", {}), id="asyncio"),
        pytest.param(("trio", {}), id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _no_stream_leaks() -> Iterator[None]:
    """Fail the test if it leaves a stream reader open (neither closed nor read to its end)."""
    from compose import stream

    stream._reset_leak_tracking()
    yield
    # a full collection costs tens of ms in a large heap, so only when a reader looks open: collecting never
    # opens a reader, it only turns an open one in a cycle into a collected one (or lets a finalizer close it)
    leaked = stream._open_reader_report()
    if leaked:
        gc.collect()
        leaked = stream._open_reader_report()
    stream._reset_leak_tracking()
    assert not leaked, f"stream readers left open: {leaked}"


@pytest.fixture
async def no_task_leaks() -> AsyncIterator[None]:
    """For async tests: fail if the test leaves tasks running (request it by name)."""
    before = {t.id for t in anyio.get_running_tasks()}
    yield
    await anyio.wait_all_tasks_blocked()
    # the plugin drives a fixture's teardown from a helper task of its own: that one is not a leak
    current = anyio.get_current_task().id
    after = [
        t
        for t in anyio.get_running_tasks()
        if t.id not in before and t.id != current and "_call_in_runner_task" not in repr(t.coro)
    ]
    assert not after, f"tasks left running: {[t.name for t in after]}"


@pytest.fixture
async def task_leak_check(no_task_leaks: None) -> AsyncIterator[None]:
    """The same check as ``no_task_leaks`` (the name the stream tests use)."""
    yield


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A PostgreSQL server: $PYEINO_TEST_PG_DSN's, else one started (and stopped at the end) through .ci/postgres.sh.

    Under pytest-xdist each worker process gets a database of its own on $PYEINO_TEST_PG_DSN's server (tables,
    sequences and DBOS schemas never collide), or a server of its own without that variable. A test that
    restarts or halts a server asks for ``pg_own_server``.
    """
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'pyeino[postgres]')")
    pytest.importorskip("psycopg_pool", reason="psycopg-pool is not installed (pip install 'pyeino[postgres]')")
    from tests.compose.pg_server import PgServer, PgUnavailable, start_pg_server

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    dsn = os.environ.get("PYEINO_TEST_PG_DSN")
    if dsn:
        # a server started by .ci/postgres.sh: with its state directory the tests may restart it too, unless
        # other test processes share it
        shared = PgServer(dsn, None if worker else os.environ.get("PYEINO_PG_DIR"))
        yield shared.with_database(f"pyeino_test_{worker}") if worker else shared
        return
    try:
        server = start_pg_server()
    except PgUnavailable as e:
        pytest.skip(f"no PostgreSQL server could be started: {e}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_own_server(pg_server: Any) -> Iterator[Any]:
    """A PostgreSQL server this test process alone uses, so that a test may restart or halt it: ``pg_server``
    when it is, else one started for this process through .ci/postgres.sh (stopped at the end)."""
    from tests.compose.pg_server import PgUnavailable, start_pg_server

    if pg_server.can_restart:
        yield pg_server
        return
    try:
        server = start_pg_server()
    except PgUnavailable as e:
        pytest.skip(f"no PostgreSQL server of this test process could be started: {e}")
    try:
        yield server
    finally:
        server.stop()
