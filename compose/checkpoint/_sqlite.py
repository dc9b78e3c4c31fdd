"""SQLiteCheckPointStore: checkpoints in one SQLite file, shared safely by the processes of one machine."""

from __future__ import annotations

import builtins
import os
import time
from typing import TYPE_CHECKING

from compose._db.sqlite import SQLiteDatabase
from compose._db.store import ClosingStore, check_table_name
from compose.errors import CheckpointStoreError

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SQLiteCheckPointStore"]


class SQLiteCheckPointStore(ClosingStore):
    """Checkpoints in a SQLite file (standard library ``sqlite3``): the embedded default.

    The file is in WAL mode with a busy timeout, so several processes (and stores) may use it at once:
    every write is one atomic statement, and readers never see half a checkpoint. Each store keeps one
    connection, opened on first use; its calls run one at a time in worker threads, so the event loop
    never blocks (asyncio or trio). The table is created on first use.

    Args:
        path: the database file (created if missing), or ``":memory:"`` for a private in-memory database.
        table: the table to use; several tables may share a file.
        busy_timeout: seconds to wait for another process's write lock before failing with
            ``CheckpointStoreError``; the wait is cancellable (a cancelled call returns within about 50 ms).

    Example:
        >>> import anyio, tempfile, os
        >>> async def main(path: str) -> list[str]:
        ...     async with SQLiteCheckPointStore(path) as store:
        ...         await store.set("run-1", b"{}")
        ...         return await store.list()
        >>> with tempfile.TemporaryDirectory() as d:
        ...     anyio.run(main, os.path.join(d, "checkpoints.db"))
        ['run-1']
    """

    def __init__(
        self, path: str | os.PathLike[str], *, table: str = "pyeino_checkpoints", busy_timeout: float = 30.0
    ) -> None:
        self.path = os.fspath(path)
        self.table = check_table_name(table)
        self.busy_timeout = busy_timeout
        self._db = SQLiteDatabase(
            self.path,
            busy_timeout=busy_timeout,
            setup=self._create_table,
            label=f"SQLite checkpoint store {self.path!r}",
            error=CheckpointStoreError,
        )

    def __repr__(self) -> str:
        return f"<SQLiteCheckPointStore {self.path!r} table={self.table} {self._db.state}>"

    async def get(self, checkpoint_id: str) -> bytes | None:
        """Return the bytes under ``checkpoint_id``, or None."""

        def op(db: sqlite3.Connection) -> bytes | None:
            row = db.execute(f"SELECT data FROM {self.table} WHERE id = ?", (checkpoint_id,)).fetchone()
            return None if row is None else bytes(row[0])

        return await self._db.run(op)

    async def set(self, checkpoint_id: str, data: bytes) -> None:
        """Store ``data`` under ``checkpoint_id`` (clears any claim)."""
        blob = bytes(data)

        def op(db: sqlite3.Connection) -> None:
            # one statement, so the write and its place in the write order are atomic across processes
            db.execute(
                f"INSERT INTO {self.table} (id, data, seq, owner, claimed_at) "
                f"VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM {self.table}), NULL, NULL) "
                "ON CONFLICT (id) DO UPDATE SET data = excluded.data, seq = excluded.seq, owner = NULL, "
                "claimed_at = NULL",
                (checkpoint_id, blob),
            )

        await self._db.run(op)

    async def delete(self, checkpoint_id: str) -> None:
        """Remove ``checkpoint_id`` if present."""
        await self._db.run(lambda db: db.execute(f"DELETE FROM {self.table} WHERE id = ?", (checkpoint_id,)))

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Return the ids starting with ``prefix``, oldest write first."""

        def op(db: sqlite3.Connection) -> builtins.list[str]:
            rows = db.execute(
                f"SELECT id FROM {self.table} WHERE substr(id, 1, ?) = ? ORDER BY seq", (len(prefix), prefix)
            ).fetchall()
            return [str(r[0]) for r in rows]

        return await self._db.run(op)

    async def claim(self, checkpoint_id: str, owner: str, *, stale_after: float | None = None) -> bool:
        """Claim ``checkpoint_id`` for ``owner`` (see ``ClaimableCheckPointStore.claim``)."""

        def op(db: sqlite3.Connection) -> bool:
            now = time.time()
            stale_before = None if stale_after is None else now - stale_after
            cur = db.execute(
                f"UPDATE {self.table} SET owner = ?, claimed_at = ? "
                "WHERE id = ? AND (owner IS NULL OR owner = ? OR claimed_at < ?)",
                (owner, now, checkpoint_id, owner, stale_before),
            )
            return cur.rowcount == 1

        return await self._db.run(op, deliver=True)

    async def release(self, checkpoint_id: str, owner: str) -> bool:
        """Clear the claim on ``checkpoint_id`` if ``owner`` holds it."""

        def op(db: sqlite3.Connection) -> bool:
            cur = db.execute(
                f"UPDATE {self.table} SET owner = NULL, claimed_at = NULL WHERE id = ? AND owner = ?",
                (checkpoint_id, owner),
            )
            return cur.rowcount == 1

        return await self._db.run(op)

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``anyio.ClosedResourceError``."""
        await self._db.aclose()

    def _create_table(self, db: sqlite3.Connection) -> None:
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} (id TEXT PRIMARY KEY, data BLOB NOT NULL, "
            "seq INTEGER NOT NULL, owner TEXT, claimed_at REAL)"
        )
        db.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_seq ON {self.table} (seq)")
