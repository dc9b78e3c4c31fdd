"""PostgresSessionStore: conversations in PostgreSQL, for services whose runs of one session land on any worker."""

from __future__ import annotations

import builtins
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

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
from compose.lowlevel import ClosingStore, LeaseKeeper, PostgresDatabase, check_table_name, holder_name, require_psycopg
from compose.schema import Message

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

__all__ = ["PostgresSessionStore"]


class PostgresSessionStore(ClosingStore):
    """Sessions in PostgreSQL (``pip install "pyeino[postgres]"``), through the same pooled psycopg 3 plumbing as
    ``PostgresCheckPointStore`` (worker threads: asyncio and trio; reconnects after a server restart).

    The tables are those of ``SQLiteSessionStore``; an append is one transaction that locks its session's row
    (``SELECT ... FOR UPDATE``). Lease expiries use the server's clock, so workers' clocks need not agree; a
    keeper thread renews the held leases every ``lease_ttl / 3`` seconds.

    Args:
        dsn: a libpq connection string or URL, e.g. ``"postgresql://user@db.internal/app"``.
        table: the sessions table's name; the other two tables take it as a prefix.
        keep: trim each session's stored history to this limit at every append (None: keep everything).
        token_counter: counts a message's tokens (stored per message, for ``max_tokens`` limits).
        lease_ttl: seconds a lease outlives its last renewal.
        max_size: most connections the pool opens (one at a time per call; none is held during a run).
        timeout: seconds to wait for a connection before ``SessionStoreError``.

    Example:
        >>> async def main() -> None:  # doctest: +SKIP
        ...     async with PostgresSessionStore("postgresql://localhost/app") as store:
        ...         print(await store.list("user-"))
    """

    def __init__(
        self,
        dsn: str,
        *,
        table: str = "pyeino_sessions",
        keep: HistoryLimit | None = None,
        token_counter: TokenCounter = approximate_tokens,
        lease_ttl: float = 30.0,
        max_size: int = 10,
        timeout: float = 30.0,
    ) -> None:
        if not lease_ttl > 0:
            raise ValueError(f"lease_ttl must be > 0 seconds, got {lease_ttl!r}")
        self.table = check_table_name(table)
        require_psycopg("PostgresSessionStore")
        self.keep = keep
        self.token_counter = token_counter
        self.lease_ttl = lease_ttl
        self._db = PostgresDatabase(
            dsn,
            min_size=1,
            max_size=max_size,
            timeout=timeout,
            name=f"pyeino-sessions:{self.table}",
            setup=self._create_tables,
            label=f"PostgreSQL session store (table {self.table})",
            error=SessionStoreError,
        )
        self._keeper = LeaseKeeper(self._renew, lease_ttl / 3, f"pyeino-session-leases:{self.table}")

    def __repr__(self) -> str:
        return f"<PostgresSessionStore table={self.table} {self._db.state}>"

    async def acquire(self, session_id: str, *, wait: float | None = 0.0) -> SessionLease:
        """Take the session's lease (see ``SessionStore.acquire``)."""
        check_session_id(session_id)
        owner = uuid.uuid4().hex
        holder = holder_name()

        def op(conn: psycopg.Connection[Any]) -> str | None:
            q = self._sql(
                "INSERT INTO {t} AS s (id, vals, next_seq, turns, owner, holder, expires, updated) "
                "VALUES (%(id)s, '{{}}', 0, 0, %(owner)s, %(holder)s, now() + %(ttl)s * interval '1 second', now()) "
                "ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner, holder = EXCLUDED.holder, "
                "expires = EXCLUDED.expires WHERE s.owner IS NULL OR s.owner = EXCLUDED.owner OR s.expires < now()"
            )
            cur = conn.execute(q, {"id": session_id, "owner": owner, "holder": holder, "ttl": self.lease_ttl})
            if cur.rowcount == 1:
                return None
            q = self._sql("SELECT holder, GREATEST(extract(epoch FROM expires - now()), 0) FROM {t} WHERE id = %s")
            row = conn.execute(q, (session_id,)).fetchone()
            return "" if row is None else f"{row[0]}, lease expires in {float(row[1]):.1f}s"

        async def attempt() -> str | None:
            return await self._db.run(op, deliver=True)

        try:
            await acquire_waiting(session_id, wait, attempt)
            self._keeper.keep(owner)
        except SessionBusyError:
            raise  # never held
        except BaseException:  # cancelled: a lease taken by the last attempt is given back
            await self._give_back(session_id, owner)
            raise
        return SessionLease(session_id, owner)

    async def release(self, lease: SessionLease) -> None:
        """Give the lease up without appending."""
        self._keeper.drop(lease.owner)

        def op(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                self._unlease(conn, lease.session_id, lease.owner)

        await self._db.run(op)

    async def load(self, session_id: str, *, limit: HistoryLimit | None = None) -> Session:
        """The session's messages (the newest within ``limit``) and values; one consistent read."""

        def op(conn: psycopg.Connection[Any]) -> Session:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                row = conn.execute(self._sql("SELECT vals, turns FROM {t} WHERE id = %s"), (session_id,)).fetchone()
                if row is None:
                    return Session(session_id)
                start = 0
                if limit is not None:
                    start = self._start(conn, session_id, limit) or 0
                q = self._sql("SELECT data FROM {m} WHERE session_id = %s AND seq >= %s ORDER BY seq")
                messages = [decode_message(r[0]) for r in conn.execute(q, (session_id, start))]
                return Session(session_id, messages, decode_values(row[0]), int(row[1]))

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

        def op(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                q = self._sql("SELECT owner, last_commit, next_seq, turns FROM {t} WHERE id = %s FOR UPDATE")
                found = conn.execute(q, (sid,)).fetchone()
                if found is None or found[0] != lease.owner:
                    if found is not None and found[1] == lease.owner:
                        return  # committed by the first attempt, whose reply was lost with its connection
                    raise SessionLeaseLostError(sid)
                first, turn = int(found[2]), int(found[3])
                with conn.cursor() as cur:
                    cur.executemany(
                        self._sql(
                            "INSERT INTO {m} (session_id, seq, turn, role, tokens, data) "
                            "VALUES (%s, %s, %s, %s, %s, %s)"
                        ),
                        [(sid, first + i, turn, role, n, data) for i, (role, n, data) in enumerate(rows)],
                    )
                conn.execute(
                    self._sql(
                        "UPDATE {t} SET vals = %s, next_seq = %s, turns = %s, owner = NULL, holder = NULL, "
                        "expires = NULL, last_commit = %s, updated = clock_timestamp() WHERE id = %s"
                    ),
                    (encoded_values, first + len(rows), turn + 1, lease.owner, sid),
                )
                conn.execute(
                    self._sql(
                        "INSERT INTO {u} (session_id, turn, vals, pauses, created_at) VALUES (%s, %s, %s, %s, %s) "
                        "ON CONFLICT (session_id, turn) DO UPDATE SET vals = EXCLUDED.vals, pauses = EXCLUDED.pauses, "
                        "created_at = EXCLUDED.created_at"
                    ),
                    (sid, turn, encoded_values, json.dumps([pending] if pending is not None else []), time.time()),
                )
                if pending is not None:
                    conn.execute(self._sql("DELETE FROM {p} WHERE checkpoint_id = %s"), (pending,))
                if self.keep is not None:
                    start = self._start(conn, sid, self.keep)
                    if start is not None:
                        conn.execute(self._sql("DELETE FROM {m} WHERE session_id = %s AND seq < %s"), (sid, start))

        try:
            await self._db.run(op, deliver=True)
        finally:
            self._keeper.drop(lease.owner)

    async def hold(self, lease: SessionLease, checkpoint_id: str, messages: Sequence[Message]) -> None:
        """Keep ``messages`` as the pending turn under ``checkpoint_id`` and release the lease."""
        data = encode_messages(messages)

        def op(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                found = conn.execute(
                    self._sql("SELECT owner FROM {t} WHERE id = %s FOR UPDATE"), (lease.session_id,)
                ).fetchone()
                if found is None or found[0] != lease.owner:
                    raise SessionLeaseLostError(lease.session_id)
                conn.execute(
                    self._sql(
                        "INSERT INTO {p} (checkpoint_id, session_id, data) VALUES (%s, %s, %s) ON CONFLICT "
                        "(checkpoint_id) DO UPDATE SET session_id = EXCLUDED.session_id, data = EXCLUDED.data"
                    ),
                    (checkpoint_id, lease.session_id, data),
                )
                self._unlease(conn, lease.session_id, lease.owner)

        try:
            await self._db.run(op, deliver=True)
        finally:
            self._keeper.drop(lease.owner)

    async def pending(self, checkpoint_id: str) -> PendingTurn | None:
        """The pending turn kept under ``checkpoint_id``, or None."""

        def op(conn: psycopg.Connection[Any]) -> PendingTurn | None:
            q = self._sql("SELECT session_id, data FROM {p} WHERE checkpoint_id = %s")
            row = conn.execute(q, (checkpoint_id,)).fetchone()
            return None if row is None else PendingTurn(checkpoint_id, str(row[0]), decode_messages(row[1]))

        return await self._db.run(op)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """The ids of the sessions with at least one turn starting with ``prefix``, least recently updated first."""
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"

        def op(conn: psycopg.Connection[Any]) -> builtins.list[str]:
            q = self._sql("SELECT id FROM {t} WHERE turns > 0 AND id LIKE %s ESCAPE '\\' ORDER BY updated, id")
            return [str(r[0]) for r in conn.execute(q, (pattern,)).fetchall()]

        return await self._db.run(op)

    async def turns(self, session_id: str) -> builtins.list[Turn]:
        """The session's turns, oldest first (see ``SessionHistory.turns``)."""

        def op(conn: psycopg.Connection[Any]) -> builtins.list[Turn]:
            with conn.transaction():
                row = conn.execute(self._sql("SELECT vals, turns FROM {t} WHERE id = %s"), (session_id,)).fetchone()
                if row is None:
                    return []
                q = self._sql("SELECT turn, vals, pauses, created_at FROM {u} WHERE session_id = %s")
                meta = {int(t): (str(v), str(p), float(c)) for t, v, p, c in conn.execute(q, (session_id,))}
                messages: dict[int, builtins.list[Message]] = {}
                q = self._sql("SELECT turn, data FROM {m} WHERE session_id = %s ORDER BY seq")
                for t, data in conn.execute(q, (session_id,)):
                    messages.setdefault(int(t), []).append(decode_message(data))
                count = int(row[1])
                return [turn_of(t, count, str(row[0]), messages.get(t, []), meta.get(t)) for t in range(count)]

        return await self._db.run(op)

    async def fork(self, session_id: str, *, at_turn: int, new_session_id: str) -> None:
        """Copy the first ``at_turn`` turns to ``new_session_id`` in one transaction (see ``SessionHistory.fork``)."""

        def op(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                row = conn.execute(self._sql("SELECT turns, vals FROM {t} WHERE id = %s"), (session_id,)).fetchone()
                exists = conn.execute(self._sql("SELECT 1 FROM {t} WHERE id = %s"), (new_session_id,)).fetchone()
                check_fork(session_id, at_turn, int(row[0]) if row else 0, new_session_id, exists is not None)
                if at_turn == 0 or row is None:
                    return
                q = self._sql("SELECT vals FROM {u} WHERE session_id = %s AND turn = %s")
                kept = conn.execute(q, (session_id, at_turn - 1)).fetchone()
                vals = str(kept[0]) if kept else str(row[1]) if int(row[0]) == at_turn else "{}"
                conn.execute(
                    self._sql(
                        "INSERT INTO {m} (session_id, seq, turn, role, tokens, data) SELECT %s, seq, turn, role, "
                        "tokens, data FROM {m} WHERE session_id = %s AND turn < %s"
                    ),
                    (new_session_id, session_id, at_turn),
                )
                conn.execute(
                    self._sql(
                        "INSERT INTO {u} (session_id, turn, vals, pauses, created_at) SELECT %s, turn, vals, pauses, "
                        "created_at FROM {u} WHERE session_id = %s AND turn < %s"
                    ),
                    (new_session_id, session_id, at_turn),
                )
                q = self._sql("SELECT COALESCE(MAX(seq) + 1, 0) FROM {m} WHERE session_id = %s")
                (next_seq,) = conn.execute(q, (new_session_id,)).fetchone() or (0,)
                conn.execute(
                    self._sql(
                        "INSERT INTO {t} (id, vals, next_seq, turns, updated) "
                        "VALUES (%s, %s, %s, %s, clock_timestamp())"
                    ),
                    (new_session_id, vals, int(next_seq), at_turn),
                )

        await self._db.run(op)

    async def delete(self, session_id: str) -> None:
        """Delete the session, its messages, values and pending turns (one transaction)."""

        def op(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute(self._sql("DELETE FROM {u} WHERE session_id = %s"), (session_id,))
                conn.execute(self._sql("DELETE FROM {m} WHERE session_id = %s"), (session_id,))
                conn.execute(self._sql("DELETE FROM {p} WHERE session_id = %s"), (session_id,))
                conn.execute(self._sql("DELETE FROM {t} WHERE id = %s"), (session_id,))

        await self._db.run(op)

    async def aclose(self) -> None:
        """Stop renewing leases and close the pool; later calls raise ``anyio.ClosedResourceError``."""
        self._keeper.stop()
        await self._db.aclose()

    # -----------------------------------------------------------------------------------------------------------

    def _sql(self, template: str) -> sql.Composed:
        from psycopg import sql

        return sql.SQL(template).format(
            t=sql.Identifier(self.table),
            m=sql.Identifier(f"{self.table}_messages"),
            p=sql.Identifier(f"{self.table}_pending"),
            p_index=sql.Identifier(f"{self.table}_pending_session"),
            u=sql.Identifier(f"{self.table}_turns"),
        )

    def _start(self, conn: psycopg.Connection[Any], session_id: str, limit: HistoryLimit) -> int | None:
        scan = limit.scan
        q = self._sql("SELECT seq, role, tokens FROM {m} WHERE session_id = %s ORDER BY seq DESC LIMIT %s")
        return limit.start((int(s), str(r), int(n)) for s, r, n in conn.execute(q, (session_id, scan)))

    def _unlease(self, conn: psycopg.Connection[Any], session_id: str, owner: str) -> None:
        q = self._sql("UPDATE {t} SET owner = NULL, holder = NULL, expires = NULL WHERE id = %s AND owner = %s")
        conn.execute(q, (session_id, owner))
        # a session that never got a turn leaves no trace (a first run that failed)
        q = self._sql("DELETE FROM {t} WHERE id = %s AND turns = 0 AND owner IS NULL")
        conn.execute(q, (session_id,))

    async def _give_back(self, session_id: str, owner: str) -> None:
        self._keeper.drop(owner)

        def op(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                self._unlease(conn, session_id, owner)

        with anyio.CancelScope(shield=True):
            try:
                await self._db.run(op)
            except (SessionStoreError, anyio.ClosedResourceError):
                pass  # the lease expires by itself after lease_ttl

    def _renew(self, owners: builtins.list[str]) -> None:
        def op(conn: psycopg.Connection[Any]) -> None:
            q = self._sql("UPDATE {t} SET expires = now() + %s * interval '1 second' WHERE owner = ANY(%s)")
            conn.execute(q, (self.lease_ttl, owners))

        self._db.run_sync(op)

    def _create_tables(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(
            self._sql(
                'CREATE TABLE IF NOT EXISTS {t} (id text COLLATE "C" PRIMARY KEY, vals text NOT NULL, '
                "next_seq bigint NOT NULL, turns bigint NOT NULL, owner text, holder text, expires timestamptz, "
                "last_commit text, updated timestamptz NOT NULL)"
            )
        )
        conn.execute(
            self._sql(
                'CREATE TABLE IF NOT EXISTS {m} (session_id text COLLATE "C" NOT NULL, seq bigint NOT NULL, '
                "turn bigint NOT NULL, role text NOT NULL, tokens integer NOT NULL, data text NOT NULL, "
                "PRIMARY KEY (session_id, seq))"
            )
        )
        conn.execute(
            self._sql(
                'CREATE TABLE IF NOT EXISTS {p} (checkpoint_id text COLLATE "C" PRIMARY KEY, '
                'session_id text COLLATE "C" NOT NULL, data text NOT NULL)'
            )
        )
        conn.execute(self._sql("CREATE INDEX IF NOT EXISTS {p_index} ON {p} (session_id)"))
        conn.execute(  # per turn: the session values after it, its pauses, its time (see the SQLite store)
            self._sql(
                'CREATE TABLE IF NOT EXISTS {u} (session_id text COLLATE "C" NOT NULL, turn bigint NOT NULL, '
                "vals text NOT NULL, pauses text NOT NULL, created_at double precision NOT NULL, "
                "PRIMARY KEY (session_id, turn))"
            )
        )
