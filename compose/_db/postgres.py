"""The PostgreSQL dialect: a psycopg 3 connection pool used from async code.

psycopg's synchronous pool runs in worker threads (``anyio.to_thread``), so the stores work on asyncio and trio
alike. Connections are autocommit and checked before use; an operation that loses its connection (the server
restarted) is run again once on a fresh one, so an operation must be safe to run twice (idempotent, or one
transaction that can tell it already committed). A write transaction locks the rows it reads ``FOR UPDATE``;
times are ``timestamptz`` on the server's clock. The schema is created when the pool opens, with concurrent
creators serialised by an advisory lock.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from compose._db.core import Dialect, Params, quote

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = ["PostgresDialect", "require_psycopg"]

T = TypeVar("T")

_PARAM = re.compile(r"'[^']*'|(?<![:\w]):([A-Za-z_]\w*)")  # a literal (kept), or a :name placeholder


def require_psycopg(store: str) -> None:
    """Raise ImportError naming ``store`` and the extra to install when psycopg or psycopg-pool is missing."""
    missing = [m for m in ("psycopg", "psycopg_pool") if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(
            f"{store} needs {' and '.join(missing)}: pip install 'pyeino[postgres]' (psycopg[binary] and psycopg-pool)"
        )


class PostgresDialect(Dialect):
    """A lazily opened pool to ``dsn`` whose operations run in worker threads.

    Args:
        dsn: a libpq connection string or URL.
        min_size, max_size: connections the pool keeps open / opens at most.
        timeout: seconds to wait for a connection before failing with ``error``.
        name: the pool's name (psycopg's logs) and the key of the setup's advisory lock.
    """

    KEY = 'text COLLATE "C"'
    TEXT = "text"
    BYTES = "bytea"
    INT = "bigint"
    INT32 = "integer"
    TIME = "timestamptz"
    FLOAT = "double precision"
    WITHOUT_ROWID = ""
    NOW = "now()"
    CLOCK = "clock_timestamp()"
    FOR_UPDATE = " FOR UPDATE"
    NO_LIMIT = None

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int,
        max_size: int,
        timeout: float,
        name: str,
        setup: Callable[[Any], None],
        label: str,
        error: type[Exception],
    ) -> None:
        super().__init__(setup=setup, label=label, error=error, busy_timeout=timeout)
        self.dsn = dsn
        self.min_size = min_size
        self.max_size = max_size
        self.timeout = timeout
        self.name = name
        self._pool: ConnectionPool[Any] | None = None
        self._closed = False
        self._open_lock = threading.Lock()

    def sql(self, query: str) -> str:
        return _PARAM.sub(lambda m: f"%({m[1]})s" if m[1] else m[0], query.replace("%", "%%"))

    def later(self, seconds: str) -> str:
        return f"now() + {seconds} * interval '1 second'"

    def earlier(self, seconds: str) -> str:
        return f"now() - {seconds}::float8 * interval '1 second'"

    def ago(self, column: str) -> str:
        return f"extract(epoch FROM now() - {column})::float8"

    def until(self, column: str) -> str:
        return f"extract(epoch FROM {column} - now())::float8"

    def starts(self, column: str, param: str) -> str:
        return f"{column} LIKE :{param} ESCAPE '\\'"

    def prefix(self, prefix: str) -> str:
        return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"

    def one_of(self, column: str, values: Sequence[str]) -> tuple[str, dict[str, Any]]:
        return f"{column} = ANY(:values)", {"values": list(values)}

    def counter(self, table: str) -> tuple[list[str], str]:
        seq = quote(f"{table}_seq")
        return [f"CREATE SEQUENCE IF NOT EXISTS {seq}"], f"nextval('{seq}')"

    def columns(self, conn: Any, table: str) -> set[str]:
        query = "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        return {str(r[0]) for r in conn.execute(query + "AND table_name = %s", (table,))}

    @contextlib.contextmanager
    def transaction(self, conn: Any, *, write: bool = True) -> Iterator[None]:
        with conn.transaction():
            if not write:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield

    def executemany(self, conn: Any, query: str, rows: Sequence[Params]) -> None:
        with conn.cursor() as cur:
            cur.executemany(query, rows)

    @property
    def state(self) -> str:
        if self._closed:
            return "closed"
        if self._pool is None:
            return "not yet opened"
        stats = self._pool.get_stats()
        return f"open pool_size={stats.get('pool_size', 0)} available={stats.get('pool_available', 0)}"

    def run_sync(self, op: Callable[[Any], T]) -> T:
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
                # the connection died under us (server restart): operations are safe to run again, once
                with pool.connection() as conn:
                    return op(conn)
        except psycopg.Error as e:
            raise self.error(f"{self.label}: {e}") from e

    async def aclose(self) -> None:
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
