"""The SQL checkpoint stores: one table and its queries, written once on the SQL store core (``compose._db.core``),
and the two ways to open it, :class:`SQLiteCheckPointStore` and :class:`PostgresCheckPointStore`."""

from __future__ import annotations

import builtins
import os

from compose._db.core import Dialect, SqlStore, quote
from compose._db.keeper import holder_name
from compose._db.postgres import PostgresDialect, require_psycopg
from compose._db.sqlite import SQLiteDialect
from compose._db.store import check_claim_ttl, check_table_name
from compose.checkpoint._protocol import CheckpointClaim
from compose.errors import CheckpointStoreError

__all__ = ["PostgresCheckPointStore", "SQLiteCheckPointStore"]


class _SqlCheckPointStore(SqlStore):
    """Checkpoints in one table: ``(id, data, seq, owner, claimed_at, holder, renewed_at)``; ``seq`` orders the
    writes, the rest is the claim (renewed to the database's clock by the keeper while held)."""

    def __init__(self, dialect: Dialect, table: str, claim_ttl: float | None) -> None:
        self.table = table
        self.claim_ttl = claim_ttl
        d, t = dialect, quote(table)
        self._counter, next_seq = d.counter(table)
        super().__init__(
            d,
            table,
            renew=f"renewed_at = {d.NOW}",
            clear=("claimed_at", "renewed_at"),
            every=(claim_ttl or 30.0) / 3,
            keeper=f"pyeino-checkpoint-claims:{table}",
        )
        self._get_q = d.sql(f"SELECT data FROM {t} WHERE id = :id")
        # one statement, so the write and its place in the write order are atomic across processes
        self._set_q = d.sql(
            f"INSERT INTO {t} (id, data, seq, owner, claimed_at) VALUES (:id, :data, {next_seq}, NULL, NULL) "
            "ON CONFLICT (id) DO UPDATE SET data = excluded.data, seq = excluded.seq, owner = NULL, "
            "claimed_at = NULL, holder = NULL, renewed_at = NULL"
        )
        self._delete_q = d.sql(f"DELETE FROM {t} WHERE id = :id")
        self._list_q = d.sql(f"SELECT id FROM {t} WHERE {d.starts('id', 'prefix')} ORDER BY seq")
        self._claim_q = d.sql(
            f"UPDATE {t} SET claimed_at = CASE WHEN owner = :owner THEN claimed_at ELSE {d.NOW} END, "
            f"owner = :owner, holder = :holder, renewed_at = {d.NOW} WHERE id = :id AND (owner IS NULL "
            f"OR owner = :owner OR COALESCE(renewed_at, claimed_at) < {d.earlier(':stale')})"
        )
        self._claim_info_q = d.sql(
            f"SELECT owner, holder, {d.ago('claimed_at')}, {d.ago('COALESCE(renewed_at, claimed_at)')} FROM {t} "
            "WHERE id = :id AND owner IS NOT NULL"
        )

    async def get(self, checkpoint_id: str) -> bytes | None:
        """Return the bytes under ``checkpoint_id``, or None."""
        row = await self._d.run(lambda conn: conn.execute(self._get_q, {"id": checkpoint_id}).fetchone())
        return None if row is None else bytes(row[0])

    async def set(self, checkpoint_id: str, data: bytes) -> None:
        """Store ``data`` under ``checkpoint_id`` (clears any claim)."""
        params = {"id": checkpoint_id, "data": bytes(data)}
        await self._d.run(lambda conn: conn.execute(self._set_q, params))
        self._keeper.drop_key(checkpoint_id)

    async def delete(self, checkpoint_id: str) -> None:
        """Remove ``checkpoint_id`` if present."""
        await self._d.run(lambda conn: conn.execute(self._delete_q, {"id": checkpoint_id}))
        self._keeper.drop_key(checkpoint_id)

    def retry_delete(self, checkpoint_id: str, owner: str) -> None:
        """``owner``'s resumed run completed but deleting its checkpoint failed: keep the claim renewed and retry
        the delete every ``claim_ttl / 3`` seconds until it succeeds (see ``ClaimableCheckPointStore``)."""
        self._retire(checkpoint_id, owner)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Return the ids starting with ``prefix``, oldest write first."""
        params = {"prefix": self._d.prefix(prefix)}
        rows = await self._d.run(lambda conn: conn.execute(self._list_q, params).fetchall())
        return [str(r[0]) for r in rows]

    async def claim(self, checkpoint_id: str, owner: str, *, stale_after: float | None = None) -> bool:
        """Claim ``checkpoint_id`` for ``owner`` (see ``ClaimableCheckPointStore.claim``; the database's clock);
        kept renewed until ``release``, ``set`` or ``delete``."""
        stale = stale_after if stale_after is not None else self.claim_ttl
        params = {"owner": owner, "holder": holder_name(), "id": checkpoint_id, "stale": stale}
        claimed = await self._d.run(lambda conn: conn.execute(self._claim_q, params).rowcount == 1, deliver=True)
        if claimed:
            self._keep(owner, checkpoint_id)
        return bool(claimed)

    async def release(self, checkpoint_id: str, owner: str) -> bool:
        """Clear the claim on ``checkpoint_id`` if ``owner`` holds it (it is no longer renewed, even if this
        fails: then it expires after ``claim_ttl``)."""
        return await self._release(checkpoint_id, owner)

    async def claim_info(self, checkpoint_id: str) -> CheckpointClaim | None:
        """Who holds the claim on ``checkpoint_id``, since when and until when (None: unclaimed or absent)."""
        row = await self._d.run(lambda conn: conn.execute(self._claim_info_q, {"id": checkpoint_id}).fetchone())
        if row is None:
            return None
        age, renewed_ago = float(row[2] or 0.0), float(row[3] or 0.0)
        expires = None if self.claim_ttl is None else self.claim_ttl - renewed_ago
        return CheckpointClaim(str(row[0]), row[1], age, renewed_ago, expires)

    def _schema(self) -> builtins.list[str]:
        d = self._d
        return [
            f"CREATE TABLE IF NOT EXISTS {quote(self.table)} (id {d.KEY} PRIMARY KEY, data {d.BYTES} NOT NULL, "
            f"seq {d.INT} NOT NULL, owner {d.TEXT}, claimed_at {d.TIME}, holder {d.TEXT}, renewed_at {d.TIME})",
            *self._counter,
        ]

    def _upgrades(self) -> builtins.list[tuple[str, str, str]]:
        # a table of an earlier pyeino: the claim columns it lacks
        return [(self.table, "holder", self._d.TEXT), (self.table, "renewed_at", self._d.TIME)]


class SQLiteCheckPointStore(_SqlCheckPointStore):
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
        self.busy_timeout = busy_timeout
        label = f"SQLite checkpoint store {self.path!r}"
        dialect = SQLiteDialect(
            self.path, busy_timeout=busy_timeout, setup=self._setup, label=label, error=CheckpointStoreError
        )
        super().__init__(dialect, check_table_name(table), check_claim_ttl(claim_ttl))

    def __repr__(self) -> str:
        return f"<SQLiteCheckPointStore {self.path!r} table={self.table} {self._d.state}>"


class PostgresCheckPointStore(_SqlCheckPointStore):
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
        table, claim_ttl = check_table_name(table), check_claim_ttl(claim_ttl)
        require_psycopg("PostgresCheckPointStore")
        self.dsn, self.min_size, self.max_size, self.timeout = dsn, min_size, max_size, timeout
        dialect = PostgresDialect(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            name=f"pyeino-checkpoints:{table}",
            setup=self._setup,
            label=f"PostgreSQL checkpoint store (table {table})",
            error=CheckpointStoreError,
        )
        super().__init__(dialect, table, claim_ttl)

    def __repr__(self) -> str:
        return f"<PostgresCheckPointStore table={self.table} {self._d.state}>"
