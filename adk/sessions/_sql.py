"""The SQL session stores' tables and queries, written once on the SQL store core (``compose._db.core``); the
SQLite and PostgreSQL stores (``adk.sessions.sqlite``, ``adk.sessions.postgres``) only open their dialect."""

from __future__ import annotations

import builtins
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from adk.errors import SessionBusyError, SessionLeaseLostError
from adk.sessions.base import (
    HistoryLimit,
    PendingTurn,
    Session,
    SessionLease,
    TokenCounter,
    Turn,
    acquire_waiting,
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
from compose.lowlevel import Conn, Dialect, SqlStore, check_table_name, holder_name, quote
from compose.schema import Message

__all__ = ["SqlSessionStore"]


class SqlSessionStore(SqlStore):
    """Sessions in four tables: ``table`` (one row per session: values, next sequence number, turn count, lease
    with its expiry), ``table_messages`` (one row per message, appended, never rewritten), ``table_pending`` (a
    paused run's pending turn) and ``table_turns`` (per turn: the values after it, its pauses, its time).

    Every write is one transaction holding its session's row (the dialect's row lock); an append checks in it
    that the lease is still its own (``SessionLeaseLostError``). Leases carry an expiry ``lease_ttl`` seconds
    ahead on the database's clock, renewed by the keeper every ``lease_ttl / 3`` seconds while held.
    """

    lost = SessionLeaseLostError

    def __init__(
        self, dialect: Dialect, table: str, keep: HistoryLimit | None, token_counter: TokenCounter, lease_ttl: float
    ) -> None:
        if not lease_ttl > 0:
            raise ValueError(f"lease_ttl must be > 0 seconds, got {lease_ttl!r}")
        self.table = check_table_name(table)
        self.keep = keep
        self.token_counter = token_counter
        self.lease_ttl = lease_ttl
        d = dialect
        super().__init__(
            d,
            table,
            renew=f"expires = {d.later(':ttl')}",
            renew_params={"ttl": lease_ttl},
            clear=("expires",),
            fence=("last_commit", "next_seq", "turns"),
            every=lease_ttl / 3,
            keeper=f"pyeino-session-leases:{table}",
        )
        self._tables = t, m, p, u = (quote(table), *(quote(f"{table}_{s}") for s in ("messages", "pending", "turns")))
        q = d.sql
        self._acquire_q = q(
            f"INSERT INTO {t} (id, vals, next_seq, turns, owner, holder, expires, updated) VALUES (:id, '{{}}', 0, 0, "
            f":owner, :holder, {d.later(':ttl')}, {d.NOW}) ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, "
            f"holder = excluded.holder, expires = excluded.expires "
            f"WHERE {t}.owner IS NULL OR {t}.owner = excluded.owner OR {t}.expires < {d.NOW}"
        )
        self._holder_q = q(f"SELECT holder, {d.until('expires')} FROM {t} WHERE id = :id")
        self._forget_q = q(f"DELETE FROM {t} WHERE id = :id AND turns = 0 AND owner IS NULL")
        self._session_q = q(f"SELECT vals, turns FROM {t} WHERE id = :id")
        self._newest_q = q(f"SELECT seq, role, tokens FROM {m} WHERE session_id = :id ORDER BY seq DESC LIMIT :scan")
        self._messages_q = q(f"SELECT data FROM {m} WHERE session_id = :id AND seq >= :start ORDER BY seq")
        self._append_q = q(
            f"INSERT INTO {m} (session_id, seq, turn, role, tokens, data) "
            "VALUES (:id, :seq, :turn, :role, :tokens, :data)"
        )
        self._commit_q = q(
            f"UPDATE {t} SET vals = :vals, next_seq = :next_seq, turns = :turns, owner = NULL, holder = NULL, "
            f"expires = NULL, last_commit = :owner, updated = {d.CLOCK} WHERE id = :id"
        )
        self._turn_q = q(
            f"INSERT INTO {u} (session_id, turn, vals, pauses, created_at) VALUES (:id, :turn, :vals, :pauses, :at) "
            "ON CONFLICT (session_id, turn) DO UPDATE SET vals = excluded.vals, pauses = excluded.pauses, "
            "created_at = excluded.created_at"
        )
        self._trim_q = q(f"DELETE FROM {m} WHERE session_id = :id AND seq < :start")
        self._hold_q = q(
            f"INSERT INTO {p} (checkpoint_id, session_id, data) VALUES (:checkpoint_id, :id, :data) "
            "ON CONFLICT (checkpoint_id) DO UPDATE SET session_id = excluded.session_id, data = excluded.data"
        )
        self._pending_q = q(f"SELECT session_id, data FROM {p} WHERE checkpoint_id = :checkpoint_id")
        self._drop_pending_q = q(f"DELETE FROM {p} WHERE checkpoint_id = :checkpoint_id")
        self._list_q = q(f"SELECT id FROM {t} WHERE turns > 0 AND {d.starts('id', 'prefix')} ORDER BY updated, id")
        self._turns_q = q(f"SELECT turn, vals, pauses, created_at FROM {u} WHERE session_id = :id")
        self._turn_messages_q = q(f"SELECT turn, data FROM {m} WHERE session_id = :id ORDER BY seq")
        self._exists_q = q(f"SELECT 1 FROM {t} WHERE id = :new")
        self._turn_vals_q = q(f"SELECT vals FROM {u} WHERE session_id = :id AND turn = :turn")
        self._fork_qs = [
            q(
                f"INSERT INTO {m} (session_id, seq, turn, role, tokens, data) SELECT :new, seq, turn, role, tokens, "
                f"data FROM {m} WHERE session_id = :id AND turn < :turns"
            ),
            q(
                f"INSERT INTO {u} (session_id, turn, vals, pauses, created_at) SELECT :new, turn, vals, pauses, "
                f"created_at FROM {u} WHERE session_id = :id AND turn < :turns"
            ),
            q(
                f"INSERT INTO {t} (id, vals, next_seq, turns, updated) SELECT :new, :vals, COALESCE(MAX(seq) + 1, 0), "
                f":turns, {d.CLOCK} FROM {m} WHERE session_id = :new"
            ),
        ]
        self._delete_qs = [
            q(f"DELETE FROM {u} WHERE session_id = :id"),
            q(f"DELETE FROM {m} WHERE session_id = :id"),
            q(f"DELETE FROM {p} WHERE session_id = :id"),
            q(f"DELETE FROM {t} WHERE id = :id"),
        ]

    async def acquire(self, session_id: str, *, wait: float | None = 0.0) -> SessionLease:
        """Take the session's lease (see ``SessionStore.acquire``)."""
        check_session_id(session_id)
        owner = uuid.uuid4().hex
        params = {"id": session_id, "owner": owner, "holder": holder_name(), "ttl": self.lease_ttl}

        def op(conn: Conn) -> str | None:
            if conn.execute(self._acquire_q, params).rowcount == 1:
                return None
            row = conn.execute(self._holder_q, params).fetchone()
            return "" if row is None else f"{row[0]}, lease expires in {max(float(row[1] or 0.0), 0.0):.1f}s"

        async def attempt() -> str | None:
            # a lease taken by a cancelled call is known (deliver) and given back below
            return await self._d.run(op, deliver=True)

        try:
            await acquire_waiting(session_id, wait, attempt)
            self._keep(owner)
        except SessionBusyError:
            raise  # never held
        except BaseException:  # cancelled: a lease taken by the last attempt is given back
            await self._release(session_id, owner, quiet=True)
            raise
        return SessionLease(session_id, owner)

    async def release(self, lease: SessionLease) -> None:
        """Give the lease up without appending."""
        await self._release(lease.session_id, lease.owner)

    async def load(self, session_id: str, *, limit: HistoryLimit | None = None) -> Session:
        """The session's messages (the newest within ``limit``) and values; one consistent read."""

        def op(conn: Conn) -> Session:
            with self._d.transaction(conn, write=False):
                row = conn.execute(self._session_q, {"id": session_id}).fetchone()
                if row is None:
                    return Session(session_id)
                start = 0 if limit is None else self._start(conn, session_id, limit) or 0
                rows = conn.execute(self._messages_q, {"id": session_id, "start": start})
                return Session(session_id, [decode_message(r[0]) for r in rows], decode_values(row[0]), int(row[1]))

        return await self._d.run(op)

    async def commit(
        self,
        lease: SessionLease,
        messages: Sequence[Message],
        values: Mapping[str, Any],
        *,
        pending: str | None = None,
    ) -> None:
        """Append ``messages`` as one turn, store ``values``, release the lease (see ``SessionStore.commit``)."""
        vals = encode_values(lease.session_id, values)
        encoded = [(m.role, self.token_counter(m), encode_message(m)) for m in messages]
        sid, owner = lease.session_id, lease.owner
        pauses = json.dumps([pending] if pending is not None else [])

        def op(conn: Conn) -> None:
            with self._d.transaction(conn):
                found = self._fenced(conn, sid, owner, once=True)
                if found is None:
                    return  # appended by an earlier attempt of this very call (its reply was lost)
                first, turn = int(found[2]), int(found[3])
                rows = [
                    {"id": sid, "seq": first + i, "turn": turn, "role": role, "tokens": n, "data": data}
                    for i, (role, n, data) in enumerate(encoded)
                ]
                self._d.executemany(conn, self._append_q, rows)
                params = {"id": sid, "vals": vals, "next_seq": first + len(rows), "turns": turn + 1, "owner": owner}
                conn.execute(self._commit_q, params)
                conn.execute(self._turn_q, {"id": sid, "turn": turn, "vals": vals, "pauses": pauses, "at": time.time()})
                if pending is not None:
                    conn.execute(self._drop_pending_q, {"checkpoint_id": pending})
                if self.keep is not None:
                    start = self._start(conn, sid, self.keep)
                    if start is not None:
                        conn.execute(self._trim_q, {"id": sid, "start": start})

        try:
            await self._d.run(op, deliver=True)
        finally:
            self._keeper.drop(owner)

    async def hold(self, lease: SessionLease, checkpoint_id: str, messages: Sequence[Message]) -> None:
        """Keep ``messages`` as the pending turn under ``checkpoint_id`` and release the lease."""
        params = {"checkpoint_id": checkpoint_id, "id": lease.session_id, "data": encode_messages(messages)}

        def op(conn: Conn) -> None:
            with self._d.transaction(conn):
                self._fenced(conn, lease.session_id, lease.owner)
                conn.execute(self._hold_q, params)
                self._drop_lease(conn, lease.session_id, lease.owner)

        try:
            await self._d.run(op, deliver=True)
        finally:
            self._keeper.drop(lease.owner)

    async def pending(self, checkpoint_id: str) -> PendingTurn | None:
        """The pending turn kept under ``checkpoint_id``, or None."""
        params = {"checkpoint_id": checkpoint_id}
        row = await self._d.run(lambda conn: conn.execute(self._pending_q, params).fetchone())
        return None if row is None else PendingTurn(checkpoint_id, str(row[0]), decode_messages(row[1]))

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """The ids of the sessions with at least one turn starting with ``prefix``, least recently updated first."""
        params = {"prefix": self._d.prefix(prefix)}
        rows = await self._d.run(lambda conn: conn.execute(self._list_q, params).fetchall())
        return [str(r[0]) for r in rows]

    async def turns(self, session_id: str) -> builtins.list[Turn]:
        """The session's turns, oldest first (see ``SessionHistory.turns``)."""
        params = {"id": session_id}

        def op(conn: Conn) -> builtins.list[Turn]:
            with self._d.transaction(conn, write=False):
                row = conn.execute(self._session_q, params).fetchone()
                if row is None:
                    return []
                rows = conn.execute(self._turns_q, params)
                meta = {int(t): (str(v), str(p), float(c)) for t, v, p, c in rows}
                messages: dict[int, builtins.list[Message]] = {}
                for t, data in conn.execute(self._turn_messages_q, params):
                    messages.setdefault(int(t), []).append(decode_message(data))
                count = int(row[1])
                return [turn_of(t, count, str(row[0]), messages.get(t, []), meta.get(t)) for t in range(count)]

        return await self._d.run(op)

    async def fork(self, session_id: str, *, at_turn: int, new_session_id: str) -> None:
        """Copy the first ``at_turn`` turns to ``new_session_id`` in one transaction (see ``SessionHistory.fork``)."""

        def op(conn: Conn) -> None:
            with self._d.transaction(conn):
                row = conn.execute(self._session_q, {"id": session_id}).fetchone()
                exists = conn.execute(self._exists_q, {"new": new_session_id}).fetchone() is not None
                check_fork(session_id, at_turn, int(row[1]) if row else 0, new_session_id, exists)
                if at_turn == 0 or row is None:
                    return
                kept = conn.execute(self._turn_vals_q, {"id": session_id, "turn": at_turn - 1}).fetchone()
                vals = str(kept[0]) if kept else str(row[0]) if int(row[1]) == at_turn else "{}"
                params = {"id": session_id, "new": new_session_id, "turns": at_turn, "vals": vals}
                for query in self._fork_qs:
                    conn.execute(query, params)

        await self._d.run(op)

    async def delete(self, session_id: str) -> None:
        """Delete the session, its messages, values and pending turns (one transaction)."""

        def op(conn: Conn) -> None:
            with self._d.transaction(conn):
                for query in self._delete_qs:
                    conn.execute(query, {"id": session_id})

        await self._d.run(op)

    # -----------------------------------------------------------------------------------------------------------

    def _start(self, conn: Conn, session_id: str, limit: HistoryLimit) -> int | None:
        scan = self._d.NO_LIMIT if limit.scan is None else limit.scan
        rows = conn.execute(self._newest_q, {"id": session_id, "scan": scan})
        # the cursor may be lazy: it stops reading where the limit decides
        return limit.start((int(s), str(r), int(n)) for s, r, n in rows)

    def _drop_lease(self, conn: Conn, session_id: str, owner: str) -> bool:
        held = super()._unlease(conn, session_id, owner)
        conn.execute(self._forget_q, {"id": session_id})  # a session that never got a turn leaves no trace
        return held

    def _unlease(self, conn: Conn, key: str, owner: str) -> bool:
        with self._d.transaction(conn):
            return self._drop_lease(conn, key, owner)

    def _schema(self) -> builtins.list[str]:
        d, (t, m, p, u) = self._d, self._tables
        return [
            f"CREATE TABLE IF NOT EXISTS {t} (id {d.KEY} PRIMARY KEY, vals {d.TEXT} NOT NULL, next_seq {d.INT} "
            f"NOT NULL, turns {d.INT} NOT NULL, owner {d.TEXT}, holder {d.TEXT}, expires {d.TIME}, "
            f"last_commit {d.TEXT}, updated {d.TIME} NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {m} (session_id {d.KEY} NOT NULL, seq {d.INT} NOT NULL, turn {d.INT} "
            f"NOT NULL, role {d.TEXT} NOT NULL, tokens {d.INT32} NOT NULL, data {d.TEXT} NOT NULL, "
            f"PRIMARY KEY (session_id, seq)){d.WITHOUT_ROWID}",
            f"CREATE TABLE IF NOT EXISTS {p} (checkpoint_id {d.KEY} PRIMARY KEY, session_id {d.KEY} NOT NULL, "
            f"data {d.TEXT} NOT NULL)",
            f"CREATE INDEX IF NOT EXISTS {quote(self.table + '_pending_session')} ON {p} (session_id)",
            # per turn: the session values after it, its pauses, its time (databases of older versions get the
            # table empty: their turns show the session's last values on the last turn only)
            f"CREATE TABLE IF NOT EXISTS {u} (session_id {d.KEY} NOT NULL, turn {d.INT} NOT NULL, vals {d.TEXT} "
            f"NOT NULL, pauses {d.TEXT} NOT NULL, created_at {d.FLOAT} NOT NULL, PRIMARY KEY (session_id, turn))"
            f"{d.WITHOUT_ROWID}",
        ]
