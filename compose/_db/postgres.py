"""A psycopg 3 connection pool used from async code: the plumbing of the PostgreSQL checkpoint and session stores.

psycopg's synchronous pool runs in worker threads (``anyio.to_thread``), so the stores work on asyncio and trio
alike. Connections are autocommit and checked before use; an operation that loses its connection (the server
restarted) is retried once on a fresh one, so an operation must be safe to run twice (idempotent, or one
transaction that can tell it already committed). The schema is created when the pool opens, with concurrent
creators serialised by an advisory lock.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["PostgresDatabase", "require_psycopg"]

T = TypeVar("T")


def require_psycopg(store: str) -> None:
    """Raise ImportError naming ``store`` and the extra to install when psycopg or psycopg-pool is missing."""
    missing = [m for m in ("psycopg", "psycopg_pool") if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(
            f"{store} needs {' and '.join(missing)}: pip install 'pyeino[postgres]' (psycopg[binary] and psycopg-pool)"
        )


class PostgresDatabase:
    """A lazily opened pool to ``dsn`` whose operations run in worker threads.

    Args:
        dsn: a libpq connection string or URL.
        min_size, max_size: connections the pool keeps open / opens at most.
        timeout: seconds to wait for a connection before failing with ``error``.
        name: the pool's name (psycopg's logs).
        setup: run once, in a transaction under an advisory lock keyed by ``name``, when the pool opens.
        label: how errors name the store, e.g. ``"PostgreSQL checkpoint store (table t)"``.
        error: the exception class database failures are raised as (cause in ``__cause__``).
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int,
        max_size: int,
        timeout: float,
        name: str,
        setup: Callable[[psycopg.Connection[Any]], None],
        label: str,
        error: Callable[[str], Exception],
    ) -> None:
        self.dsn = dsn
        self.min_size = min_size
        self.max_size = max_size
        self.timeout = timeout
        self.name = name
        self._setup = setup
        self.label = label
        self._error = error
        self._pool: ConnectionPool[Any] | None = None
        self._closed = False
        self._open_lock = threading.Lock()

    @property
    def state(self) -> str:
        """``"not yet opened"``, ``"open pool_size=N available=M"`` or ``"closed"`` (for the stores' reprs)."""
        if self._closed:
            return "closed"
        if self._pool is None:
            return "not yet opened"
        stats = self._pool.get_stats()
        return f"open pool_size={stats.get('pool_size', 0)} available={stats.get('pool_available', 0)}"

    async def run(self, op: Callable[[psycopg.Connection[Any]], T], *, deliver: bool = False) -> T:
        """Run ``op`` on a pooled connection in a worker thread.

        Not abandoned on cancellation: the thread returns its connection to the pool before the call ends.
        With ``deliver``, an operation that completed returns its result even when the call was cancelled
        meanwhile (the caller sees the cancellation at its next await): what it took (a claim, a lease) is known.
        """
        with anyio.CancelScope(shield=deliver):
            result = await anyio.to_thread.run_sync(self.run_sync, op)
        return result

    def run_sync(self, op: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``op`` in the calling thread (a worker thread), retried once if its connection died."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            pool = self._ensure_pool()
            try:
                with pool.connection() as conn:
                    return op(conn)
            except PoolTimeout:
                raise
            except psycopg.OperationalError:
                # the connection died under us (server restart): operations are safe to retry, once
                with pool.connection() as conn:
                    return op(conn)
        except psycopg.Error as e:
            raise self._error(f"{self.label}: {e}") from e

    async def aclose(self) -> None:
        """Close the pool; later calls raise ``anyio.ClosedResourceError``."""

        def close() -> None:
            with self._open_lock:
                self._closed = True
                pool, self._pool = self._pool, None
            if pool is not None:
                pool.close()

        await anyio.to_thread.run_sync(close)

    def _ensure_pool(self) -> ConnectionPool[Any]:
        with self._open_lock:
            if self._closed:
                raise anyio.ClosedResourceError(f"{self.label} is closed")
            if self._pool is None:
                self._pool = self._open_pool()
            return self._pool

    def _open_pool(self) -> ConnectionPool[Any]:
        from psycopg_pool import ConnectionPool

        pool: ConnectionPool[Any] = ConnectionPool(
            self.dsn,
            min_size=self.min_size,
            max_size=self.max_size,
            open=False,
            kwargs={"autocommit": True},
            check=ConnectionPool.check_connection,
            timeout=self.timeout,
            name=self.name,
        )
        try:
            pool.open(wait=True, timeout=self.timeout)
            with pool.connection() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.name,))
                self._setup(conn)
        except BaseException:
            pool.close()
            raise
        return pool
