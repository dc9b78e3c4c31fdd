"""SQLiteSessionStore: conversations in one SQLite file, shared safely by the processes of one machine."""

from __future__ import annotations

import os

from adk.errors import SessionStoreError
from adk.sessions._sql import SqlSessionStore
from adk.sessions.base import HistoryLimit, TokenCounter, approximate_tokens
from compose.lowlevel import SQLiteDialect

__all__ = ["SQLiteSessionStore"]


class SQLiteSessionStore(SqlSessionStore):
    """Sessions in a SQLite file (standard library ``sqlite3``): the embedded default.

    Four tables (``table``, ``table_messages``, ``table_pending``, ``table_turns``): one row per session (values,
    lease), one row per message (appended, never rewritten), one per paused run's pending turn, one per turn. The
    file is in WAL mode, so several processes share it; every append is one ``BEGIN IMMEDIATE`` transaction. Calls
    run in worker threads through the same plumbing as ``SQLiteCheckPointStore`` (cancellable lock waits, asyncio
    and trio).

    Leases carry an expiry ``lease_ttl`` seconds ahead (the machine's clock), renewed by a keeper thread every
    ``lease_ttl / 3`` seconds while held: the lease of a process that died is free ``lease_ttl`` seconds later.

    Args:
        path: the database file (created if missing; may be the checkpoint store's file).
        table: the sessions table's name; the other tables take it as a prefix.
        keep: trim each session's stored history to this limit at every append (None: keep everything).
        token_counter: counts a message's tokens (stored per message, for ``max_tokens`` limits).
        lease_ttl: seconds a lease outlives its last renewal.
        busy_timeout: seconds to wait for another process's write lock before ``SessionStoreError``.

    Example:
        >>> import anyio, tempfile, os
        >>> from compose.schema import user_message
        >>> async def main(path: str) -> list[str]:
        ...     async with SQLiteSessionStore(path) as store:
        ...         lease = await store.acquire("user-42")
        ...         await store.commit(lease, [user_message("hi")], {})
        ...         return await store.list()
        >>> with tempfile.TemporaryDirectory() as d:
        ...     anyio.run(main, os.path.join(d, "sessions.db"))
        ['user-42']
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = "pyeino_sessions",
        keep: HistoryLimit | None = None,
        token_counter: TokenCounter = approximate_tokens,
        lease_ttl: float = 30.0,
        busy_timeout: float = 30.0,
    ) -> None:
        self.path = os.fspath(path)
        label = f"SQLite session store {self.path!r}"
        dialect = SQLiteDialect(
            self.path, busy_timeout=busy_timeout, setup=self._setup, label=label, error=SessionStoreError
        )
        super().__init__(dialect, table, keep, token_counter, lease_ttl)

    def __repr__(self) -> str:
        return f"<SQLiteSessionStore {self.path!r} table={self.table} {self._d.state}>"
