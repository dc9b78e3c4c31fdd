"""PostgresCheckPointStore: checkpoints in PostgreSQL through a pooled psycopg 3 connection pool."""

from __future__ import annotations

import builtins
import contextlib
import functools
from typing import TYPE_CHECKING, Any

from compose._db.keeper import LeaseKeeper, holder_name
from compose._db.postgres import PostgresDatabase, require_psycopg
from compose._db.store import ClosingStore, check_claim_ttl, check_table_name
from compose.checkpoint._protocol import CheckpointClaim
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

    A claim (a resume in flight) is renewed by a keeper thread every ``claim_ttl / 3`` seconds while held; one
    not renewed for ``claim_ttl`` seconds (its process died, or the server was down when its run ended) expires
    and the next resume takes it over (the server's clock).

    Args:
        dsn: a libpq connection string or URL, e.g. ``"postgresql://user@db.internal/app"``.
        min_size: connections the pool keeps open.
        max_size: most connections the pool opens.
        table: the table to use (lower-case identifier).
        timeout: seconds to wait for a connection before failing with ``CheckpointStoreError``.
        claim_ttl: seconds a claim outlives its last renewal (None: claims never expire, only ``release``,
            ``set``, ``delete`` or a resume's ``claim_stale_after`` end them).

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
        claim_ttl: float | None = 30.0,
    ) -> None:
        self.table = check_table_name(table)
        self.claim_ttl = check_claim_ttl(claim_ttl)
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
        self._keeper = LeaseKeeper(
            self._renew, (claim_ttl or 30.0) / 3, f"pyeino-checkpoint-claims:{self.table}", finish=self._delete_claimed
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
                "claimed_at = NULL, holder = NULL, renewed_at = NULL"
            )
            conn.execute(q, (checkpoint_id, blob))

        await self._db.run(op)
        self._keeper.drop_key(checkpoint_id)

    async def delete(self, checkpoint_id: str) -> None:
        """Remove ``checkpoint_id`` if present."""

        def op(conn: psycopg.Connection[Any]) -> None:
            conn.execute(self._sql("DELETE FROM {t} WHERE id = %s"), (checkpoint_id,))

        await self._db.run(op)
        self._keeper.drop_key(checkpoint_id)

    def retry_delete(self, checkpoint_id: str, owner: str) -> None:
        """``owner``'s resumed run completed but deleting its checkpoint failed: keep the claim renewed and retry
        the delete every ``claim_ttl / 3`` seconds until it succeeds (see ``ClaimableCheckPointStore``)."""
        self._keeper.retire(owner, checkpoint_id)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Return the ids starting with ``prefix``, oldest write first."""
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"

        def op(conn: psycopg.Connection[Any]) -> builtins.list[str]:
            q = self._sql("SELECT id FROM {t} WHERE id LIKE %s ESCAPE '\\' ORDER BY seq")
            return [str(r[0]) for r in conn.execute(q, (pattern,)).fetchall()]

        return await self._db.run(op)

    async def claim(self, checkpoint_id: str, owner: str, *, stale_after: float | None = None) -> bool:
        """Claim ``checkpoint_id`` for ``owner`` (see ``ClaimableCheckPointStore.claim``; the server's clock);
        kept renewed until ``release``, ``set`` or ``delete``."""
        limit = stale_after if stale_after is not None else self.claim_ttl

        def op(conn: psycopg.Connection[Any]) -> bool:
            q = self._sql(
                "UPDATE {t} SET claimed_at = CASE WHEN owner IS NOT DISTINCT FROM %(owner)s THEN claimed_at "
                "ELSE now() END, owner = %(owner)s, holder = %(holder)s, renewed_at = now() "
                "WHERE id = %(id)s AND (owner IS NULL OR owner = %(owner)s "
                "OR COALESCE(renewed_at, claimed_at) < now() - %(stale)s::float8 * interval '1 second')"
            )
            cur = conn.execute(q, {"owner": owner, "holder": holder_name(), "id": checkpoint_id, "stale": limit})
            return cur.rowcount == 1

        claimed = await self._db.run(op, deliver=True)
        if claimed:
            self._keeper.keep(owner, checkpoint_id)
        return claimed

    async def release(self, checkpoint_id: str, owner: str) -> bool:
        """Clear the claim on ``checkpoint_id`` if ``owner`` holds it (it is no longer renewed, even if this
        fails: then it expires after ``claim_ttl``)."""
        self._keeper.drop(owner)

        def op(conn: psycopg.Connection[Any]) -> bool:
            q = self._sql(
                "UPDATE {t} SET owner = NULL, claimed_at = NULL, holder = NULL, renewed_at = NULL "
                "WHERE id = %s AND owner = %s"
            )
            return conn.execute(q, (checkpoint_id, owner)).rowcount == 1

        return await self._db.run(op)

    async def claim_info(self, checkpoint_id: str) -> CheckpointClaim | None:
        """Who holds the claim on ``checkpoint_id``, since when and until when (None: unclaimed or absent)."""

        def op(conn: psycopg.Connection[Any]) -> CheckpointClaim | None:
            q = self._sql(
                "SELECT owner, holder, extract(epoch FROM now() - claimed_at)::float8, "
                "extract(epoch FROM now() - COALESCE(renewed_at, claimed_at))::float8 FROM {t} "
                "WHERE id = %s AND owner IS NOT NULL"
            )
            row = conn.execute(q, (checkpoint_id,)).fetchone()
            if row is None:
                return None
            age, renewed_ago = float(row[2] or 0.0), float(row[3] or 0.0)
            expires = None if self.claim_ttl is None else self.claim_ttl - renewed_ago
            return CheckpointClaim(str(row[0]), row[1], age, renewed_ago, expires)

        return await self._db.run(op)

    async def aclose(self) -> None:
        """Stop renewing claims and close the pool; later calls raise ``anyio.ClosedResourceError``.

        A checkpoint whose deletion is still being retried (``retry_delete``) is tried once more; if that fails
        too its claim expires after ``claim_ttl`` and the next resume runs the rest of that run again.
        """
        for checkpoint_id, owner in self._keeper.stop():
            with contextlib.suppress(CheckpointStoreError):
                await self._db.run(functools.partial(self._delete_claimed_in, checkpoint_id=checkpoint_id, owner=owner))
        await self._db.aclose()

    def _delete_claimed(self, checkpoint_id: str, owner: str) -> None:
        self._db.run_sync(lambda conn: self._delete_claimed_in(conn, checkpoint_id, owner))

    def _delete_claimed_in(self, conn: psycopg.Connection[Any], checkpoint_id: str, owner: str) -> None:
        # only while the finished run still holds the claim: one that expired may have been resumed meanwhile
        conn.execute(self._sql("DELETE FROM {t} WHERE id = %s AND owner = %s"), (checkpoint_id, owner))

    def _renew(self, owners: builtins.list[str]) -> None:
        def op(conn: psycopg.Connection[Any]) -> None:
            conn.execute(self._sql("UPDATE {t} SET renewed_at = now() WHERE owner = ANY(%s)"), (owners,))

        self._db.run_sync(op)

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
                "seq bigint NOT NULL, owner text, claimed_at timestamptz, holder text, renewed_at timestamptz)"
            )
        )
        # a table of an earlier pyeino: the claim columns it lacks (under the setup's advisory lock)
        have = {
            str(r[0])
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = %s",
                (self.table,),
            )
        }
        for column, kind in (("holder", "text"), ("renewed_at", "timestamptz")):
            if column not in have:
                conn.execute(self._sql(f"ALTER TABLE {{t}} ADD COLUMN IF NOT EXISTS {column} {kind}"))
