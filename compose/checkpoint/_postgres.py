"""PostgresCheckPointStore: checkpoints in PostgreSQL through a pooled psycopg 3 connection pool."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from compose._db.postgres import PostgresDatabase, require_psycopg
from compose._db.store import ClosingStore, check_table_name
from compose.errors import CheckpointStoreError

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

__all__ = ["PostgresCheckPointStore"]


class PostgresCheckPointStore(ClosingStore):
    """Checkpoints in a PostgreSQL table, for services whose runs resume on other workers.

    Uses psycopg 3's connection pool (``pip install "pyeino[postgres]"``) from worker threads, so it runs on
    asyncio and trio alike. Connections are checked before use and a call that loses its connection is
    retried once on a fresh one, so the store keeps working after the server restarts. The table (and its
    write-order sequence) is created on first use; concurrent creators are serialised by an advisory lock.

    Args:
        dsn: a libpq connection string or URL, e.g. ``"postgresql://user@db.internal/app"``.
        min_size: connections the pool keeps open.
        max_size: most connections the pool opens.
        table: the table to use (lower-case identifier).
        timeout: seconds to wait for a connection before failing with ``CheckpointStoreError``.

    Example:
        >>> async def main() -> None:  # doctest: +SKIP
        ...     async with PostgresCheckPointStore("postgresql://localhost/app") as store:
        ...         await store.set("run-1", b"...")
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        table: str = "pyeino_checkpoints",
        timeout: float = 30.0,
    ) -> None:
        self.table = check_table_name(table)
        require_psycopg("PostgresCheckPointStore")
        self.dsn = dsn
        self.min_size = min_size
        self.max_size = max_size
        self.timeout = timeout
        self._db = PostgresDatabase(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            name=f"pyeino-checkpoints:{self.table}",
            setup=self._create_table,
            label=f"PostgreSQL checkpoint store (table {self.table})",
            error=CheckpointStoreError,
        )

    def __repr__(self) -> str:
        return f"<PostgresCheckPointStore table={self.table} {self._db.state}>"

    async def get(self, checkpoint_id: str) -> bytes | None:
        """Return the bytes under ``checkpoint_id``, or None."""

        def op(conn: psycopg.Connection[Any]) -> bytes | None:
            q = self._sql("SELECT data FROM {t} WHERE id = %s")
            row = conn.execute(q, (checkpoint_id,), binary=True).fetchone()
            return None if row is None else bytes(row[0])

        return await self._db.run(op)

    async def set(self, checkpoint_id: str, data: bytes) -> None:
        """Store ``data`` under ``checkpoint_id`` (clears any claim)."""
        blob = bytes(data)

        def op(conn: psycopg.Connection[Any]) -> None:
            q = self._sql(
                "INSERT INTO {t} (id, data, seq, owner, claimed_at) VALUES (%s, %b, nextval({seq}), NULL, NULL) "
                "ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data, seq = EXCLUDED.seq, owner = NULL, "
                "claimed_at = NULL"
            )
            conn.execute(q, (checkpoint_id, blob))

        await self._db.run(op)

    async def delete(self, checkpoint_id: str) -> None:
        """Remove ``checkpoint_id`` if present."""

        def op(conn: psycopg.Connection[Any]) -> None:
            conn.execute(self._sql("DELETE FROM {t} WHERE id = %s"), (checkpoint_id,))

        await self._db.run(op)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Return the ids starting with ``prefix``, oldest write first."""
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"

        def op(conn: psycopg.Connection[Any]) -> builtins.list[str]:
            q = self._sql("SELECT id FROM {t} WHERE id LIKE %s ESCAPE '\\' ORDER BY seq")
            return [str(r[0]) for r in conn.execute(q, (pattern,)).fetchall()]

        return await self._db.run(op)

    async def claim(self, checkpoint_id: str, owner: str, *, stale_after: float | None = None) -> bool:
        """Claim ``checkpoint_id`` for ``owner`` (see ``ClaimableCheckPointStore.claim``); the server's clock."""

        def op(conn: psycopg.Connection[Any]) -> bool:
            q = self._sql(
                "UPDATE {t} SET owner = %(owner)s, claimed_at = now() WHERE id = %(id)s AND (owner IS NULL "
                "OR owner = %(owner)s OR claimed_at < now() - %(stale)s::float8 * interval '1 second')"
            )
            cur = conn.execute(q, {"owner": owner, "id": checkpoint_id, "stale": stale_after})
            return cur.rowcount == 1

        return await self._db.run(op, deliver=True)

    async def release(self, checkpoint_id: str, owner: str) -> bool:
        """Clear the claim on ``checkpoint_id`` if ``owner`` holds it."""

        def op(conn: psycopg.Connection[Any]) -> bool:
            q = self._sql("UPDATE {t} SET owner = NULL, claimed_at = NULL WHERE id = %s AND owner = %s")
            return conn.execute(q, (checkpoint_id, owner)).rowcount == 1

        return await self._db.run(op)

    async def aclose(self) -> None:
        """Close the pool; later calls raise ``anyio.ClosedResourceError``."""
        await self._db.aclose()

    # -----------------------------------------------------------------------------------------------------------

    def _sql(self, template: str) -> sql.Composed:
        from psycopg import sql

        return sql.SQL(template).format(
            t=sql.Identifier(self.table),
            seq=sql.Literal(f"{self.table}_seq"),
            seq_name=sql.Identifier(f"{self.table}_seq"),
        )

    def _create_table(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(self._sql("CREATE SEQUENCE IF NOT EXISTS {seq_name}"))
        conn.execute(
            self._sql(
                'CREATE TABLE IF NOT EXISTS {t} (id text COLLATE "C" PRIMARY KEY, data bytea NOT NULL, '
                "seq bigint NOT NULL, owner text, claimed_at timestamptz)"
            )
        )
