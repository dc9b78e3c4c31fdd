"""SQLiteSessionStore: conversations in one SQLite file, shared safely by the processes of one machine."""

from __future__ import annotations

import builtins
import json
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from adk.errors import SessionBusyError, SessionLeaseLostError, SessionStoreError
from adk.sessions.base import (
    HistoryLimit,
    PendingTurn,
    Session,
    SessionLease,
    TokenCounter,
    Turn,
    acquire_waiting,
    approximate_tokens,
    check_fork,
    check_session_id,
    decode_message,
    decode_messages,
    decode_values,
    encode_message,
    encode_messages,
    encode_values,
    turn_of,
)
from compose.lowlevel import ClosingStore, LeaseKeeper, SQLiteDatabase, check_table_name, holder_name
from compose.schema import Message

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SQLiteSessionStore"]

T = TypeVar("T")


class SQLiteSessionStore(ClosingStore):
    """Sessions in a SQLite file (standard library ``sqlite3``): the embedded default.

    Three tables (``table``, ``table_messages``, ``table_pending``): one row per session (values, lease), one
    row per message (appended, never rewritten), one per paused run's pending turn. The file is in WAL mode,
    so several processes share it; every append is one ``BEGIN IMMEDIATE`` transaction. Calls run in worker
    threads through the same plumbing as ``SQLiteCheckPointStore`` (cancellable lock waits, asyncio and trio).

    Leases carry an expiry ``lease_ttl`` seconds ahead (the machine's clock), renewed by a keeper thread every
    ``lease_ttl / 3`` seconds while held: the lease of a process that died is free ``lease_ttl`` seconds later.

    Args:
        path: the database file (created if missing; may be the checkpoint store's file).
        table: the sessions table's name; the other two tables take it as a prefix.
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
        if not lease_ttl > 0:
            raise ValueError(f"lease_ttl must be > 0 seconds, got {lease_ttl!r}")
        self.path = os.fspath(path)
        self.table = check_table_name(table)
        self.keep = keep
        self.token_counter = token_counter
        self.lease_ttl = lease_ttl
        self._messages = f"{self.table}_messages"
        self._pending = f"{self.table}_pending"
        self._turns = f"{self.table}_turns"
        self._db = SQLiteDatabase(
            self.path,
            busy_timeout=busy_timeout,
            setup=self._create_tables,
            label=f"SQLite session store {self.path!r}",
            error=SessionStoreError,
        )
        self._keeper = LeaseKeeper(self._renew, lease_ttl / 3, f"pyeino-session-leases:{self.table}")

    def __repr__(self) -> str:
        return f"<SQLiteSessionStore {self.path!r} table={self.table} {self._db.state}>"

    async def acquire(self, session_id: str, *, wait: float | None = 0.0) -> SessionLease:
        """Take the session's lease (see ``SessionStore.acquire``)."""
        check_session_id(session_id)
        owner = uuid.uuid4().hex
        holder = holder_name()

        def op(db: sqlite3.Connection) -> str | None:
            now = time.time()
            cur = db.execute(
                f"INSERT INTO {self.table} (id, vals, next_seq, turns, owner, holder, expires, updated) "
                "VALUES (?, '{}', 0, 0, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, "
                "holder = excluded.holder, expires = excluded.expires "
                f"WHERE {self.table}.owner IS NULL OR {self.table}.owner = excluded.owner OR {self.table}.expires < ?",
                (session_id, owner, holder, now + self.lease_ttl, now, now),
            )
            if cur.rowcount == 1:
                return None
            row = db.execute(f"SELECT holder, expires FROM {self.table} WHERE id = ?", (session_id,)).fetchone()
            return "" if row is None else f"{row[0]}, lease expires in {max(row[1] - now, 0):.1f}s"

        async def attempt() -> str | None:
            # a lease taken by a cancelled call is known (deliver) and given back below
            return await self._db.run(op, deliver=True)

        try:
            await acquire_waiting(session_id, wait, attempt)
            lease = SessionLease(session_id, owner)
            self._keeper.keep(owner)
        except SessionBusyError:
            raise  # never held
        except BaseException:  # cancelled: a lease taken by the last attempt is given back
            await self._give_back(session_id, owner)
            raise
        return lease

    async def release(self, lease: SessionLease) -> None:
        """Give the lease up without appending."""
        self._keeper.drop(lease.owner)
        await self._db.run(lambda db: self._transaction(db, lambda: self._unlease(db, lease.session_id, lease.owner)))

    async def load(self, session_id: str, *, limit: HistoryLimit | None = None) -> Session:
        """The session's messages (the newest within ``limit``) and values; one consistent read."""

        def op(db: sqlite3.Connection) -> Session:
            db.execute("BEGIN")
            try:
                row = db.execute(f"SELECT vals, turns FROM {self.table} WHERE id = ?", (session_id,)).fetchone()
                if row is None:
                    return Session(session_id)
                start = 0
                if limit is not None:
                    scan = limit.scan
                    rows = db.execute(
                        f"SELECT seq, role, tokens FROM {self._messages} WHERE session_id = ? ORDER BY seq DESC "
                        "LIMIT ?",
                        (session_id, -1 if scan is None else scan),
                    )
                    start = limit.start(rows) or 0  # the cursor is lazy: it stops reading where the limit decides
                messages = [
                    decode_message(r[0])
                    for r in db.execute(
                        f"SELECT data FROM {self._messages} WHERE session_id = ? AND seq >= ? ORDER BY seq",
                        (session_id, start),
                    )
                ]
                return Session(session_id, messages, decode_values(row[0]), int(row[1]))
            finally:
                db.execute("COMMIT")

        return await self._db.run(op)

    async def commit(
        self,
        lease: SessionLease,
        messages: Sequence[Message],
        values: Mapping[str, Any],
        *,
        pending: str | None = None,
    ) -> None:
        """Append ``messages`` as one turn, store ``values``, release the lease (see ``SessionStore.commit``)."""
        encoded_values = encode_values(lease.session_id, values)
        rows = [(m.role, self.token_counter(m), encode_message(m)) for m in messages]
        sid = lease.session_id

        def append(db: sqlite3.Connection) -> None:
            found = db.execute(
                f"SELECT owner, last_commit, next_seq, turns FROM {self.table} WHERE id = ?", (sid,)
            ).fetchone()
            if found is None or found[0] != lease.owner:
                if found is not None and found[1] == lease.owner:
                    return  # appended by an earlier attempt of this very call
                raise SessionLeaseLostError(sid)
            first, turn = int(found[2]), int(found[3])
            db.executemany(
                f"INSERT INTO {self._messages} (session_id, seq, turn, role, tokens, data) VALUES (?, ?, ?, ?, ?, ?)",
                [(sid, first + i, turn, role, n, data) for i, (role, n, data) in enumerate(rows)],
            )
            db.execute(
                f"UPDATE {self.table} SET vals = ?, next_seq = ?, turns = ?, owner = NULL, holder = NULL, "
                "expires = NULL, last_commit = ?, updated = ? WHERE id = ?",
                (encoded_values, first + len(rows), turn + 1, lease.owner, time.time(), sid),
            )
            db.execute(
                f"INSERT OR REPLACE INTO {self._turns} (session_id, turn, vals, pauses, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (sid, turn, encoded_values, json.dumps([pending] if pending is not None else []), time.time()),
            )
            if pending is not None:
                db.execute(f"DELETE FROM {self._pending} WHERE checkpoint_id = ?", (pending,))
            if self.keep is not None:
                scan = self.keep.scan
                history = db.execute(
                    f"SELECT seq, role, tokens FROM {self._messages} WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                    (sid, -1 if scan is None else scan),
                )
                start = self.keep.start(history)
                if start is not None:
                    db.execute(f"DELETE FROM {self._messages} WHERE session_id = ? AND seq < ?", (sid, start))

        try:
            await self._db.run(lambda db: self._transaction(db, lambda: append(db)), deliver=True)
        finally:
            self._keeper.drop(lease.owner)

    async def hold(self, lease: SessionLease, checkpoint_id: str, messages: Sequence[Message]) -> None:
        """Keep ``messages`` as the pending turn under ``checkpoint_id`` and release the lease."""
        data = encode_messages(messages)

        def keep(db: sqlite3.Connection) -> None:
            found = db.execute(f"SELECT owner FROM {self.table} WHERE id = ?", (lease.session_id,)).fetchone()
            if found is None or found[0] != lease.owner:
                raise SessionLeaseLostError(lease.session_id)
            db.execute(
                f"INSERT INTO {self._pending} (checkpoint_id, session_id, data) VALUES (?, ?, ?) "
                "ON CONFLICT (checkpoint_id) DO UPDATE SET session_id = excluded.session_id, data = excluded.data",
                (checkpoint_id, lease.session_id, data),
            )
            self._unlease(db, lease.session_id, lease.owner)

        try:
            await self._db.run(lambda db: self._transaction(db, lambda: keep(db)), deliver=True)
        finally:
            self._keeper.drop(lease.owner)

    async def pending(self, checkpoint_id: str) -> PendingTurn | None:
        """The pending turn kept under ``checkpoint_id``, or None."""

        def op(db: sqlite3.Connection) -> PendingTurn | None:
            row = db.execute(
                f"SELECT session_id, data FROM {self._pending} WHERE checkpoint_id = ?", (checkpoint_id,)
            ).fetchone()
            return None if row is None else PendingTurn(checkpoint_id, str(row[0]), decode_messages(row[1]))

        return await self._db.run(op)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """The ids of the sessions with at least one turn starting with ``prefix``, least recently updated first."""

        def op(db: sqlite3.Connection) -> builtins.list[str]:
            rows = db.execute(
                f"SELECT id FROM {self.table} WHERE turns > 0 AND substr(id, 1, ?) = ? ORDER BY updated, id",
                (len(prefix), prefix),
            ).fetchall()
            return [str(r[0]) for r in rows]

        return await self._db.run(op)

    async def turns(self, session_id: str) -> builtins.list[Turn]:
        """The session's turns, oldest first (see ``SessionHistory.turns``)."""

        def op(db: sqlite3.Connection) -> builtins.list[Turn]:
            db.execute("BEGIN")
            try:
                row = db.execute(f"SELECT vals, turns FROM {self.table} WHERE id = ?", (session_id,)).fetchone()
                if row is None:
                    return []
                meta = {
                    int(t): (str(v), str(p), float(c))
                    for t, v, p, c in db.execute(
                        f"SELECT turn, vals, pauses, created_at FROM {self._turns} WHERE session_id = ?", (session_id,)
                    )
                }
                messages: dict[int, builtins.list[Message]] = {}
                for t, data in db.execute(
                    f"SELECT turn, data FROM {self._messages} WHERE session_id = ? ORDER BY seq", (session_id,)
                ):
                    messages.setdefault(int(t), []).append(decode_message(data))
                count = int(row[1])
                return [turn_of(t, count, str(row[0]), messages.get(t, []), meta.get(t)) for t in range(count)]
            finally:
                db.execute("COMMIT")

        return await self._db.run(op)

    async def fork(self, session_id: str, *, at_turn: int, new_session_id: str) -> None:
        """Copy the first ``at_turn`` turns to ``new_session_id`` in one transaction (see ``SessionHistory.fork``)."""

        def op(db: sqlite3.Connection) -> None:
            row = db.execute(f"SELECT turns, vals FROM {self.table} WHERE id = ?", (session_id,)).fetchone()
            exists = db.execute(f"SELECT 1 FROM {self.table} WHERE id = ?", (new_session_id,)).fetchone() is not None
            check_fork(session_id, at_turn, int(row[0]) if row else 0, new_session_id, exists)
            if at_turn == 0:
                return
            kept = db.execute(
                f"SELECT vals FROM {self._turns} WHERE session_id = ? AND turn = ?", (session_id, at_turn - 1)
            ).fetchone()
            vals = str(kept[0]) if kept else str(row[1]) if int(row[0]) == at_turn else "{}"
            db.execute(
                f"INSERT INTO {self._messages} (session_id, seq, turn, role, tokens, data) SELECT ?, seq, turn, role, "
                f"tokens, data FROM {self._messages} WHERE session_id = ? AND turn < ?",
                (new_session_id, session_id, at_turn),
            )
            db.execute(
                f"INSERT INTO {self._turns} (session_id, turn, vals, pauses, created_at) SELECT ?, turn, vals, pauses, "
                f"created_at FROM {self._turns} WHERE session_id = ? AND turn < ?",
                (new_session_id, session_id, at_turn),
            )
            (next_seq,) = db.execute(
                f"SELECT COALESCE(MAX(seq) + 1, 0) FROM {self._messages} WHERE session_id = ?", (new_session_id,)
            ).fetchone()
            db.execute(
                f"INSERT INTO {self.table} (id, vals, next_seq, turns, updated) VALUES (?, ?, ?, ?, ?)",
                (new_session_id, vals, int(next_seq), at_turn, time.time()),
            )

        await self._db.run(lambda db: self._transaction(db, lambda: op(db)))

    async def delete(self, session_id: str) -> None:
        """Delete the session, its messages, values and pending turns (one transaction)."""

        def op(db: sqlite3.Connection) -> None:
            db.execute(f"DELETE FROM {self._turns} WHERE session_id = ?", (session_id,))
            db.execute(f"DELETE FROM {self._messages} WHERE session_id = ?", (session_id,))
            db.execute(f"DELETE FROM {self._pending} WHERE session_id = ?", (session_id,))
            db.execute(f"DELETE FROM {self.table} WHERE id = ?", (session_id,))

        await self._db.run(lambda db: self._transaction(db, lambda: op(db)))

    async def aclose(self) -> None:
        """Stop renewing leases and close the connection; later calls raise ``anyio.ClosedResourceError``."""
        self._keeper.stop()
        await self._db.aclose()

    # -----------------------------------------------------------------------------------------------------------

    @staticmethod
    def _transaction(db: sqlite3.Connection, body: Callable[[], T]) -> T:
        # BEGIN IMMEDIATE takes the write lock first, so the body never finds it taken half-way; on any error the
        # database plumbing rolls back (SQLiteDatabase.run_sync)
        db.execute("BEGIN IMMEDIATE")
        result = body()
        db.execute("COMMIT")
        return result

    def _unlease(self, db: sqlite3.Connection, session_id: str, owner: str) -> None:
        db.execute(
            f"UPDATE {self.table} SET owner = NULL, holder = NULL, expires = NULL WHERE id = ? AND owner = ?",
            (session_id, owner),
        )
        # a session that never got a turn leaves no trace (a first run that failed)
        db.execute(f"DELETE FROM {self.table} WHERE id = ? AND turns = 0 AND owner IS NULL", (session_id,))

    async def _give_back(self, session_id: str, owner: str) -> None:
        self._keeper.drop(owner)
        with anyio.CancelScope(shield=True):
            try:
                await self._db.run(lambda db: self._transaction(db, lambda: self._unlease(db, session_id, owner)))
            except (SessionStoreError, anyio.ClosedResourceError):
                pass  # the lease expires by itself after lease_ttl

    def _renew(self, owners: builtins.list[str]) -> None:
        marks = ", ".join("?" * len(owners))
        expires = time.time() + self.lease_ttl

        def op(db: sqlite3.Connection) -> None:
            db.execute(f"UPDATE {self.table} SET expires = ? WHERE owner IN ({marks})", (expires, *owners))

        self._db.run_sync(op)

    def _create_tables(self, db: sqlite3.Connection) -> None:
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} (id TEXT PRIMARY KEY, vals TEXT NOT NULL, "
            "next_seq INTEGER NOT NULL, turns INTEGER NOT NULL, owner TEXT, holder TEXT, expires REAL, "
            "last_commit TEXT, updated REAL NOT NULL)"
        )
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {self._messages} (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "turn INTEGER NOT NULL, role TEXT NOT NULL, tokens INTEGER NOT NULL, data TEXT NOT NULL, "
            "PRIMARY KEY (session_id, seq)) WITHOUT ROWID"
        )
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {self._pending} (checkpoint_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
            "data TEXT NOT NULL)"
        )
        db.execute(f"CREATE INDEX IF NOT EXISTS {self._pending}_session ON {self._pending} (session_id)")
        db.execute(  # per turn: the session values after it, its pauses, its time (databases of older versions
            # get the table empty: their turns show the session's last values on the last turn only)
            f"CREATE TABLE IF NOT EXISTS {self._turns} (session_id TEXT NOT NULL, turn INTEGER NOT NULL, "
            "vals TEXT NOT NULL, pauses TEXT NOT NULL, created_at REAL NOT NULL, PRIMARY KEY (session_id, turn)) "
            "WITHOUT ROWID"
        )

