"""PostgresSessionStore: conversations in PostgreSQL, for services whose runs of one session land on any worker."""

from __future__ import annotations

from adk.errors import SessionStoreError
from adk.sessions._sql import SqlSessionStore
from adk.sessions.base import HistoryLimit, TokenCounter, approximate_tokens
from compose.lowlevel import PostgresDialect, require_psycopg

__all__ = ["PostgresSessionStore"]


class PostgresSessionStore(SqlSessionStore):
    """Sessions in PostgreSQL (``pip install "pyeino[postgres]"``), through the same pooled psycopg 3 plumbing as
    ``PostgresCheckPointStore`` (worker threads: asyncio and trio; reconnects after a server restart).

    The tables are those of ``SQLiteSessionStore``; an append is one transaction that locks its session's row
    (``SELECT ... FOR UPDATE``). Lease expiries use the server's clock, so workers' clocks need not agree; a
    keeper thread renews the held leases every ``lease_ttl / 3`` seconds.

    Args:
        dsn: a libpq connection string or URL, e.g. ``"postgresql://user@db.internal/app"``.
        table: the sessions table's name; the other tables take it as a prefix.
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
        dialect = PostgresDialect(
            dsn,
            min_size=1,
            max_size=max_size,
            timeout=timeout,
            name=f"pyeino-sessions:{table}",
            setup=self._setup,
            label=f"PostgreSQL session store (table {table})",
            error=SessionStoreError,
        )
        super().__init__(dialect, table, keep, token_counter, lease_ttl)
        require_psycopg("PostgresSessionStore")

    def __repr__(self) -> str:
        return f"<PostgresSessionStore table={self.table} {self._d.state}>"
