"""SQLiteCheckPointStore: checkpoints in one SQLite file, shared safely by the processes of one machine."""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
import time
from typing import TYPE_CHECKING

from compose._db.keeper import LeaseKeeper, holder_name
from compose._db.sqlite import SQLiteDatabase
from compose._db.store import ClosingStore, check_claim_ttl, check_table_name
from compose.checkpoint._protocol import CheckpointClaim
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

    A claim (a resume in flight) is renewed by a keeper thread every ``claim_ttl / 3`` seconds while held; one
    not renewed for ``claim_ttl`` seconds (its process died, or the file was locked when its run ended) expires
    and the next resume takes it over (the machine's clock).

    Args:
        path: the database file (created if missing), or ``":memory:"`` for a private in-memory database.
        table: the table to use; several tables may share a file.
        busy_timeout: seconds to wait for another process's write lock before failing with
            ``CheckpointStoreError``; the wait is cancellable (a cancelled call returns within about 50 ms).
        claim_ttl: seconds a claim outlives its last renewal (None: claims never expire, only ``release``,
            ``set``, ``delete`` or a resume's ``claim_stale_after`` end them).

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
        self,
        path: str | os.PathLike[str],
        *,
        table: str = "pyeino_checkpoints",
        busy_timeout: float = 30.0,
        claim_ttl: float | None = 30.0,
    ) -> None:
        self.path = os.fspath(path)
        self.table = check_table_name(table)
        self.busy_timeout = busy_timeout
        self.claim_ttl = check_claim_ttl(claim_ttl)
        self._db = SQLiteDatabase(
            self.path,
            busy_timeout=busy_timeout,
            setup=self._create_table,
            label=f"SQLite checkpoint store {self.path!r}",
            error=CheckpointStoreError,
        )
        self._keeper = LeaseKeeper(
            self._renew, (claim_ttl or 30.0) / 3, f"pyeino-checkpoint-claims:{self.table}", finish=self._delete_claimed
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
                "claimed_at = NULL, holder = NULL, renewed_at = NULL",
                (checkpoint_id, blob),
            )

        await self._db.run(op)
        self._keeper.drop_key(checkpoint_id)

    async def delete(self, checkpoint_id: str) -> None:
        """Remove ``checkpoint_id`` if present."""
        await self._db.run(lambda db: db.execute(f"DELETE FROM {self.table} WHERE id = ?", (checkpoint_id,)))
        self._keeper.drop_key(checkpoint_id)

    def retry_delete(self, checkpoint_id: str, owner: str) -> None:
        """``owner``'s resumed run completed but deleting its checkpoint failed: keep the claim renewed and retry
        the delete every ``claim_ttl / 3`` seconds until it succeeds (see ``ClaimableCheckPointStore``)."""
        self._keeper.retire(owner, checkpoint_id)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Return the ids starting with ``prefix``, oldest write first."""

        def op(db: sqlite3.Connection) -> builtins.list[str]:
            rows = db.execute(
                f"SELECT id FROM {self.table} WHERE substr(id, 1, ?) = ? ORDER BY seq", (len(prefix), prefix)
            ).fetchall()
            return [str(r[0]) for r in rows]

        return await self._db.run(op)

    async def claim(self, checkpoint_id: str, owner: str, *, stale_after: float | None = None) -> bool:
        """Claim ``checkpoint_id`` for ``owner`` (see ``ClaimableCheckPointStore.claim``); kept renewed until
        ``release``, ``set`` or ``delete``."""
        limit = stale_after if stale_after is not None else self.claim_ttl
        holder = holder_name()

        def op(db: sqlite3.Connection) -> bool:
            now = time.time()
            stale_before = None if limit is None else now - limit
            cur = db.execute(
                f"UPDATE {self.table} SET claimed_at = CASE WHEN owner IS ? THEN claimed_at ELSE ? END, "
                "owner = ?, holder = ?, renewed_at = ? "
                "WHERE id = ? AND (owner IS NULL OR owner = ? OR COALESCE(renewed_at, claimed_at) < ?)",
                (owner, now, owner, holder, now, checkpoint_id, owner, stale_before),
            )
            return cur.rowcount == 1

        claimed = await self._db.run(op, deliver=True)
        if claimed:
            self._keeper.keep(owner, checkpoint_id)
        return claimed

    async def release(self, checkpoint_id: str, owner: str) -> bool:
        """Clear the claim on ``checkpoint_id`` if ``owner`` holds it (it is no longer renewed, even if this
        fails: then it expires after ``claim_ttl``)."""
        self._keeper.drop(owner)

        def op(db: sqlite3.Connection) -> bool:
            cur = db.execute(
                f"UPDATE {self.table} SET owner = NULL, claimed_at = NULL, holder = NULL, renewed_at = NULL "
                "WHERE id = ? AND owner = ?",
                (checkpoint_id, owner),
            )
            return cur.rowcount == 1

        return await self._db.run(op)

    async def claim_info(self, checkpoint_id: str) -> CheckpointClaim | None:
        """Who holds the claim on ``checkpoint_id``, since when and until when (None: unclaimed or absent)."""

        def op(db: sqlite3.Connection) -> CheckpointClaim | None:
            row = db.execute(
                f"SELECT owner, holder, claimed_at, COALESCE(renewed_at, claimed_at) FROM {self.table} "
                "WHERE id = ? AND owner IS NOT NULL",
                (checkpoint_id,),
            ).fetchone()
            if row is None:
                return None
            now = time.time()
            renewed_ago = now - float(row[3] or now)
            expires = None if self.claim_ttl is None else self.claim_ttl - renewed_ago
            return CheckpointClaim(str(row[0]), row[1], now - float(row[2] or now), renewed_ago, expires)

        return await self._db.run(op)

    async def aclose(self) -> None:
        """Stop renewing claims and close the connection; later calls raise ``anyio.ClosedResourceError``.

        A checkpoint whose deletion is still being retried (``retry_delete``) is tried once more; if that fails
        too its claim expires after ``claim_ttl`` and the next resume runs the rest of that run again.
        """
        for checkpoint_id, owner in self._keeper.stop():
            with contextlib.suppress(CheckpointStoreError):
                await self._db.run(functools.partial(self._delete_claimed_in, checkpoint_id=checkpoint_id, owner=owner))
        await self._db.aclose()

    def _delete_claimed(self, checkpoint_id: str, owner: str) -> None:
        self._db.run_sync(lambda db: self._delete_claimed_in(db, checkpoint_id, owner))

    def _delete_claimed_in(self, db: sqlite3.Connection, checkpoint_id: str, owner: str) -> None:
        # only while the finished run still holds the claim: one that expired may have been resumed meanwhile
        db.execute(f"DELETE FROM {self.table} WHERE id = ? AND owner = ?", (checkpoint_id, owner))

    def _renew(self, owners: builtins.list[str]) -> None:
        marks = ", ".join("?" * len(owners))
        now = time.time()
        self._db.run_sync(
            lambda db: db.execute(f"UPDATE {self.table} SET renewed_at = ? WHERE owner IN ({marks})", (now, *owners))
        )

    def _create_table(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")  # one creator (or upgrader) at a time across processes
        try:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (id TEXT PRIMARY KEY, data BLOB NOT NULL, "
                "seq INTEGER NOT NULL, owner TEXT, claimed_at REAL, holder TEXT, renewed_at REAL)"
            )
            db.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_seq ON {self.table} (seq)")
            # a table of an earlier pyeino: the claim columns it lacks
            columns = {row[1] for row in db.execute(f"PRAGMA table_info({self.table})")}
            for column, kind in (("holder", "TEXT"), ("renewed_at", "REAL")):
                if column not in columns:
                    db.execute(f"ALTER TABLE {self.table} ADD COLUMN {column} {kind}")
            db.execute("COMMIT")
        except BaseException:
            db.rollback()
            raise
