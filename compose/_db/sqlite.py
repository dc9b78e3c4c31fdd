"""The SQLite dialect: one connection (WAL mode, autocommit) used from async code.

The connection is opened on first use by a worker thread; operations run one at a time in worker threads, so the
event loop never blocks on asyncio or trio. A write transaction is ``BEGIN IMMEDIATE`` (the write lock first, so
it never finds it taken half-way); an operation that finds the database locked rolls back and is retried whole
(``Dialect.run``). Times are Unix seconds (``REAL``) on the machine's clock.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from compose._db.core import LOCK_POLL, Busy, Dialect, quote

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SQLiteDialect"]

T = TypeVar("T")


class SQLiteDialect(Dialect):
    """A lazily opened connection to ``path`` (created if missing, or ``":memory:"``) whose operations run in
    worker threads, one at a time. ``busy_timeout``: seconds to wait for another connection's write lock; the
    wait is cancellable (a cancelled call returns within about ``LOCK_POLL`` seconds)."""

    KEY = TEXT = "TEXT"
    BYTES = "BLOB"
    INT = INT32 = "INTEGER"
    TIME = FLOAT = "REAL"
    WITHOUT_ROWID = " WITHOUT ROWID"
    # the machine's clock to the microsecond, as Python reads it (``julianday('now')`` has milliseconds only: two
    # writes in one millisecond would tie, and "least recently updated first" would fall back to the id)
    NOW = CLOCK = "pyeino_now()"
    FOR_UPDATE = ""  # the transaction holds the write lock already
    NO_LIMIT = -1

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float,
        setup: Callable[[Any], None],
        label: str,
        error: type[Exception],
    ) -> None:
        super().__init__(setup=setup, label=label, error=error, busy_timeout=busy_timeout)
        self.path = os.fspath(path)
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        # one connection, one operation at a time: sqlite3 connections are not safe for concurrent use
        self._lock = threading.Lock()

    def later(self, seconds: str) -> str:
        return f"({self.NOW} + {seconds})"

    def earlier(self, seconds: str) -> str:
        return f"({self.NOW} - {seconds})"

    def ago(self, column: str) -> str:
        return f"({self.NOW} - {column})"

    def starts(self, column: str, param: str) -> str:
        return f"substr({column}, 1, length(:{param})) = :{param}"

    def one_of(self, column: str, values: Sequence[str]) -> tuple[str, dict[str, Any]]:
        marks = ", ".join(f":v{i}" for i in range(len(values)))
        return f"{column} IN ({marks})", {f"v{i}": v for i, v in enumerate(values)}

    def counter(self, table: str) -> tuple[list[str], str]:
        t = quote(table)
        return [f"CREATE INDEX IF NOT EXISTS {quote(table + '_seq')} ON {t} (seq)"], (
            f"(SELECT COALESCE(MAX(seq), 0) + 1 FROM {t})"
        )

    def columns(self, conn: Any, table: str) -> set[str]:
        return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({quote(table)})")}

    @contextlib.contextmanager
    def transaction(self, conn: Any, *, write: bool = True) -> Iterator[None]:
        # on any error run_sync rolls back
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        yield
        conn.execute("COMMIT")

    @property
    def state(self) -> str:
        return "closed" if self._closed else "open" if self._conn is not None else "not yet opened"

    def run_sync(self, op: Callable[[Any], T]) -> T:
        import sqlite3  # on first use, not when the package is imported

        with self._lock:
            if self._closed:
                raise anyio.ClosedResourceError(f"{self.label} is closed")
            try:
                if self._conn is None:
                    self._conn = self._open()
                return op(self._conn)
            except BaseException as e:
                # nothing is kept of a failed operation (a lock, a lost lease, a value that cannot be stored)
                if self._conn is not None and self._conn.in_transaction:
                    self._conn.rollback()
                if isinstance(e, sqlite3.OperationalError) and e.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
                    raise Busy(e) from e
                if isinstance(e, sqlite3.Error):
                    raise self.error(f"{self.label}: {e}") from e
                raise

    async def aclose(self) -> None:
        def close() -> None:
            with self._lock:
                self._closed = True
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

        await anyio.to_thread.run_sync(close)

    def _open(self) -> sqlite3.Connection:
        import sqlite3

        # autocommit (isolation_level=None): each statement is its own transaction unless an operation BEGINs one
        timeout = min(self.busy_timeout, LOCK_POLL)
        db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
        db.create_function("pyeino_now", 0, time.time)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            with self.transaction(db):  # one creator (or upgrader) at a time across processes
                self._setup(db)
        except BaseException:
            if db.in_transaction:
                db.rollback()
            db.close()
            raise
        return db
