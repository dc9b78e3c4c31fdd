"""One SQLite connection used from async code: the plumbing of the SQLite checkpoint and session stores.

Each :class:`SQLiteDatabase` keeps one connection (WAL mode, autocommit), opened on first use by a worker
thread; calls run one at a time in worker threads (``anyio.to_thread``), so the event loop never blocks on
asyncio or trio. An operation is a plain function of the connection, run whole in the thread: one statement
(autocommit) or one explicit transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``); a lock wait makes it roll back
and start again, so it must be safe to retry whole.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    import sqlite3

__all__ = ["Busy", "SQLiteDatabase"]

T = TypeVar("T")

LOCK_POLL = 0.05
"""Longest a statement waits for another connection's lock inside its worker thread (not cancellable there)."""
_FIRST_PAUSE = 0.002


class Busy(Exception):
    """An operation found the database locked (SQLITE_BUSY) and did nothing: retry it."""

    def __init__(self, error: sqlite3.OperationalError) -> None:
        super().__init__(str(error))
        self.error = error


class SQLiteDatabase:
    """A lazily opened connection to ``path`` whose operations run in worker threads, one at a time.

    Args:
        path: the database file (created if missing), or ``":memory:"``.
        busy_timeout: seconds to wait for another connection's write lock before failing with ``error``; the
            wait is cancellable (a cancelled call returns within about ``LOCK_POLL`` seconds).
        setup: run once on the new connection (creates the tables).
        label: how errors name the store, e.g. ``"SQLite checkpoint store 'cp.db'"``.
        error: the exception class database failures are raised as (cause in ``__cause__``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float,
        setup: Callable[[sqlite3.Connection], None],
        label: str,
        error: Callable[[str], Exception],
    ) -> None:
        self.path = os.fspath(path)
        self.busy_timeout = busy_timeout
        self._setup = setup
        self.label = label
        self._error = error
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        # one connection, one operation at a time: sqlite3 connections are not safe for concurrent use
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        """``"not yet opened"``, ``"open"`` or ``"closed"`` (for the stores' reprs)."""
        return "closed" if self._closed else "open" if self._conn is not None else "not yet opened"

    async def run(self, op: Callable[[sqlite3.Connection], T], *, deliver: bool = False) -> T:
        """Run ``op`` on the connection in a worker thread, retrying it while the database is locked.

        With ``deliver``, an operation that completed returns its result even when the call was cancelled
        meanwhile (the caller sees the cancellation at its next await): what it took (a claim, a lease) is known.

        Raises:
            anyio.ClosedResourceError: the database was closed.
            Exception: ``error(...)`` when the database fails or stays locked past ``busy_timeout``.
        """
        # A statement in a worker thread cannot be cancelled, so it never waits long for a lock: SQLite waits at
        # most LOCK_POLL seconds, and the rest of busy_timeout is waited here, between attempts, where a
        # cancellation ends the wait promptly. An operation either completes or rolled back, so the connection
        # is fit for the next call either way.
        deadline = anyio.current_time() + self.busy_timeout
        pause = _FIRST_PAUSE
        while True:
            try:
                with anyio.CancelScope(shield=deliver):
                    return await anyio.to_thread.run_sync(self.run_sync, op)
            except Busy as busy:
                left = deadline - anyio.current_time()
                if left <= 0:
                    raise self._error(
                        f"{self.label}: {busy.error} (still locked by another connection after "
                        f"busy_timeout={self.busy_timeout}s)"
                    ) from busy.error
                await anyio.sleep(min(pause, left))
                pause = min(pause * 2, LOCK_POLL)

    def run_sync(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``op`` once in the calling thread (a worker thread); ``Busy`` when the database was locked."""
        import sqlite3  # on first use, not when the package is imported

        with self._lock:
            if self._closed:
                raise anyio.ClosedResourceError(f"{self.label} is closed")
            try:
                if self._conn is None:
                    self._conn = self._open()
                return op(self._conn)
            except sqlite3.OperationalError as e:
                if self._conn is not None and self._conn.in_transaction:
                    self._conn.rollback()
                if e.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise self._error(f"{self.label}: {e}") from e
                raise Busy(e) from e
            except sqlite3.Error as e:
                if self._conn is not None and self._conn.in_transaction:
                    self._conn.rollback()
                raise self._error(f"{self.label}: {e}") from e
            except BaseException:
                # an operation's own error (a lost lease, a value that cannot be stored): nothing is kept
                if self._conn is not None and self._conn.in_transaction:
                    self._conn.rollback()
                raise

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``anyio.ClosedResourceError``."""

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
        try:
            db.execute("PRAGMA journal_mode = WAL")
            self._setup(db)
        except BaseException:
            db.close()
            raise
        return db
