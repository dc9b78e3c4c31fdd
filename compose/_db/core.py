"""The SQL store core: what the SQL checkpoint and session stores (and any later SQL store) do alike on SQLite and
PostgreSQL, written once over a :class:`Dialect`.

A :class:`Dialect` (``compose._db.sqlite``, ``compose._db.postgres``) runs operations on its database in worker
threads and says how its SQL differs: placeholders, column types, the clock, the row lock, prefix matching, the
write-order counter. A :class:`SqlStore` writes its tables and queries once, with ``:name`` placeholders and the
dialect's fragments, and gets the leases on its rows: renewed by a :class:`~compose._db.keeper.LeaseKeeper`,
released, checked by fenced writes, and retired (work done whose record the database could not take yet: the
keeper retries it). Operations that find the database locked are retried here (:meth:`Dialect.run`).
"""

from __future__ import annotations

import contextlib
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

import anyio
import anyio.to_thread

from compose._db.keeper import LeaseKeeper
from compose._db.store import ClosingStore

__all__ = ["Busy", "Conn", "Dialect", "SqlStore", "quote"]

T = TypeVar("T")
Params = Mapping[str, Any]

LOCK_POLL = 0.05
"""Longest a statement waits for another connection's lock inside its worker thread (not cancellable there)."""
_FIRST_PAUSE = 0.002


class Conn(Protocol):
    """What the stores use of a DB-API connection (sqlite3's and psycopg's both have it)."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...


class Busy(Exception):
    """An operation found the database locked and did nothing: retry it (until the dialect's ``busy_timeout``)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def quote(name: str) -> str:
    """``name`` (checked by ``check_table_name``) as a quoted SQL identifier, the same in both dialects."""
    return f'"{name}"'


class Dialect(ABC):
    """One database, reached from async code, and how its SQL differs from the other's.

    An operation is a plain function of a connection run whole in a worker thread: one statement, or one
    transaction (:meth:`transaction`); it must be safe to run again, as a locked database or a lost connection
    runs it again.

    Args:
        setup: run once on the first connection, under the dialect's schema lock (creates the tables).
        label: how errors name the store, e.g. ``"SQLite checkpoint store 'cp.db'"``.
        error: the exception class database failures are raised as (cause in ``__cause__``).
        busy_timeout: seconds to retry an operation that found the database locked.
    """

    # column types: a key (compared byte-wise), text, bytes, 64/32-bit integers, a point in time, a float
    KEY: ClassVar[str]
    TEXT: ClassVar[str]
    BYTES: ClassVar[str]
    INT: ClassVar[str]
    INT32: ClassVar[str]
    TIME: ClassVar[str]
    FLOAT: ClassVar[str]
    WITHOUT_ROWID: ClassVar[str]
    NOW: ClassVar[str]
    """The database's clock (a ``TIME`` value)."""
    CLOCK: ClassVar[str]
    """The clock as the statement runs (``NOW`` may be the transaction's start)."""
    FOR_UPDATE: ClassVar[str]
    """Ends a ``SELECT`` that locks its row until the write transaction ends."""
    NO_LIMIT: ClassVar[int | None]
    """The ``LIMIT`` parameter that limits nothing."""

    def __init__(
        self, *, setup: Callable[[Any], None], label: str, error: type[Exception], busy_timeout: float
    ) -> None:
        self._setup = setup
        self.label = label
        self.error = error
        self.busy_timeout = busy_timeout

    def sql(self, query: str) -> str:
        """``query``, written with ``:name`` placeholders, in the driver's parameter style."""
        return query

    @abstractmethod
    def later(self, seconds: str) -> str:
        """``NOW`` plus ``seconds`` (an SQL number) seconds."""

    @abstractmethod
    def earlier(self, seconds: str) -> str:
        """``NOW`` minus ``seconds`` seconds (NULL when ``seconds`` is)."""

    @abstractmethod
    def ago(self, column: str) -> str:
        """Seconds from the ``TIME`` value ``column`` to ``NOW`` (a float)."""

    def until(self, column: str) -> str:
        """Seconds from ``NOW`` to ``column``."""
        return f"-{self.ago(column)}"

    @abstractmethod
    def starts(self, column: str, param: str) -> str:
        """``column`` starts with the parameter ``param``, bound to :meth:`prefix`'s value."""

    def prefix(self, prefix: str) -> str:
        """The value of a :meth:`starts` parameter."""
        return prefix

    @abstractmethod
    def one_of(self, column: str, values: Sequence[str]) -> tuple[str, dict[str, Any]]:
        """``column`` is one of ``values``: the condition and its parameters."""

    @abstractmethod
    def counter(self, table: str) -> tuple[list[str], str]:
        """A write-order counter for ``table``'s ``seq`` column: its setup statements and the next value."""

    @abstractmethod
    def columns(self, conn: Any, table: str) -> set[str]:
        """The columns ``table`` has."""

    @abstractmethod
    @contextlib.contextmanager
    def transaction(self, conn: Any, *, write: bool = True) -> Iterator[None]:
        """One transaction: a write one takes the write lock first (SQLite) or locks rows ``FOR_UPDATE``
        (PostgreSQL); a read one sees one snapshot. An error inside rolls it back."""
        yield

    def executemany(self, conn: Any, query: str, rows: Sequence[Params]) -> None:
        conn.executemany(query, rows)

    @property
    @abstractmethod
    def state(self) -> str:
        """``"not yet opened"``, ``"open ..."`` or ``"closed"`` (for the stores' reprs)."""

    @abstractmethod
    def run_sync(self, op: Callable[[Any], T]) -> T:
        """Run ``op`` once in the calling (worker) thread; :class:`Busy` when the database was locked.

        Raises:
            anyio.ClosedResourceError: the dialect was closed.
            Exception: ``error(...)`` when the database fails.
        """

    @abstractmethod
    async def aclose(self) -> None:
        """Close the connections; later calls raise ``anyio.ClosedResourceError``."""

    async def run(self, op: Callable[[Any], T], *, deliver: bool = False) -> T:
        """Run ``op`` in a worker thread, again while the database is locked (up to ``busy_timeout``).

        Not abandoned on cancellation: the thread finishes before the call ends. With ``deliver``, an operation
        that completed returns its result even when the call was cancelled meanwhile (the caller sees the
        cancellation at its next await): what it took (a claim, a lease) is known.
        """
        # A statement in a worker thread cannot be cancelled, so it never waits long for a lock (LOCK_POLL): the
        # rest of busy_timeout is waited here, between attempts, where a cancellation ends the wait promptly.
        deadline = anyio.current_time() + self.busy_timeout
        pause = _FIRST_PAUSE
        while True:
            try:
                with anyio.CancelScope(shield=deliver):
                    return await anyio.to_thread.run_sync(self.run_sync, op)
            except Busy as busy:
                left = deadline - anyio.current_time()
                if left <= 0:
                    raise self.error(
                        f"{self.label}: {busy.error} (still locked by another connection after "
                        f"busy_timeout={self.busy_timeout}s)"
                    ) from busy.error
                await anyio.sleep(min(pause, left))
                pause = min(pause * 2, LOCK_POLL)


class SqlStore(ClosingStore):
    """A store on SQL tables whose rows (keyed by ``id`` in ``table``) carry leases: ``owner`` (unique per lease),
    ``holder`` (the process, :func:`~compose._db.keeper.holder_name`) and the store's own time columns.

    A subclass takes its leases with its own statement and calls :meth:`_keep` when it has one; the keeper
    renews them with ``renew`` (an SQL assignment, with ``renew_params``) every ``every`` seconds;
    :meth:`_release` clears ``owner``, ``holder`` and the ``clear`` columns; :meth:`_fenced` checks a lease inside
    a write (and reads the ``fence`` columns); :meth:`_retire` hands a finished lease's deletion to the keeper
    when the database failed, tried once more on :meth:`aclose`.

    Attributes:
        lost: the error a fenced write raises for a lease that is no longer its owner's (given the key).
    """

    lost: ClassVar[type[Exception]] = KeyError

    def __init__(
        self,
        dialect: Dialect,
        table: str,
        *,
        renew: str,
        renew_params: Params | None = None,
        clear: Sequence[str],
        fence: Sequence[str] = (),
        every: float,
        keeper: str,
    ) -> None:
        self._d = d = dialect
        t = quote(table)
        self._renew_set = f"UPDATE {t} SET {renew} WHERE "
        self._renew_params = dict(renew_params or {})
        nulls = "".join(f", {c} = NULL" for c in clear)
        self._release_q = d.sql(f"UPDATE {t} SET owner = NULL, holder = NULL{nulls} WHERE id = :id AND owner = :owner")
        self._delete_claimed_q = d.sql(f"DELETE FROM {t} WHERE id = :id AND owner = :owner")
        self._fence_q = d.sql(f"SELECT {', '.join(('owner', *fence))} FROM {t} WHERE id = :id{d.FOR_UPDATE}")
        self._keeper = LeaseKeeper(self._renew, every, keeper, finish=self._delete_claimed)

    async def aclose(self) -> None:
        """Stop renewing leases and close the database; later calls raise ``anyio.ClosedResourceError``.

        A retired lease's deletion still failing is tried once more; if that fails too the lease expires."""
        for key, owner in self._keeper.stop():
            with contextlib.suppress(self._d.error):
                await self._d.run(functools.partial(self._delete_claimed_in, key=key, owner=owner))
        await self._d.aclose()

    def _schema(self) -> list[str]:
        """The statements creating the store's tables (``IF NOT EXISTS``)."""
        return []

    def _upgrades(self) -> list[tuple[str, str, str]]:
        """``(table, column, type)`` of the columns an earlier pyeino's tables lack."""
        return []

    def _setup(self, conn: Conn) -> None:
        # the dialect runs this under its schema lock: one creator (or upgrader) at a time
        for statement in self._schema():
            conn.execute(statement)
        for table, column, kind in self._upgrades():
            if column not in self._d.columns(conn, table):
                conn.execute(f"ALTER TABLE {quote(table)} ADD COLUMN {column} {kind}")

    def _keep(self, owner: str, key: str = "") -> None:
        """``owner`` holds a lease (on ``key``): renew it until released."""
        self._keeper.keep(owner, key)

    def _retire(self, key: str, owner: str) -> None:
        """``owner``'s work on ``key`` is done but deleting ``key`` failed: keep the lease renewed and retry the
        delete (while ``owner`` holds it) until it succeeds."""
        self._keeper.retire(owner, key)

    def _delete_claimed(self, key: str, owner: str) -> None:
        self._d.run_sync(lambda conn: self._delete_claimed_in(conn, key, owner))

    def _delete_claimed_in(self, conn: Conn, key: str, owner: str) -> None:
        # only while the finished work still holds the lease: one that expired may have been taken over meanwhile
        conn.execute(self._delete_claimed_q, {"id": key, "owner": owner})

    def _renew(self, owners: list[str]) -> None:
        where, params = self._d.one_of("owner", owners)
        query = self._d.sql(self._renew_set + where)
        self._d.run_sync(lambda conn: conn.execute(query, {**self._renew_params, **params}))

    def _unlease(self, conn: Conn, key: str, owner: str) -> bool:
        """Clear ``owner``'s lease on ``key``; whether it held it."""
        return bool(conn.execute(self._release_q, {"id": key, "owner": owner}).rowcount == 1)

    async def _release(self, key: str, owner: str, *, quiet: bool = False) -> bool:
        """Stop renewing ``owner``'s lease and clear it. ``quiet``: shielded, and a failure is ignored (the lease
        expires by itself), for the way out of a cancelled call."""
        self._keeper.drop(owner)
        if not quiet:
            return await self._d.run(lambda conn: self._unlease(conn, key, owner))
        with anyio.CancelScope(shield=True), contextlib.suppress(self._d.error, anyio.ClosedResourceError):
            return await self._d.run(lambda conn: self._unlease(conn, key, owner))
        return False

    def _fenced(self, conn: Conn, key: str, owner: str, *, once: bool = False) -> tuple[Any, ...] | None:
        """In a write transaction: lock ``key``'s row (the dialect's row lock) and return its ``owner`` and
        ``fence`` columns if ``owner`` holds its lease. With ``once``: None when the first ``fence`` column names
        ``owner`` (the owner of the last fenced write: an earlier attempt of this very write committed).

        Raises:
            Exception: ``lost(key)``: the lease is no longer ``owner``'s; nothing may be written.
        """
        row: tuple[Any, ...] | None = conn.execute(self._fence_q, {"id": key}).fetchone()
        if row is not None and row[0] == owner:
            return row
        if once and row is not None and row[1] == owner:
            return None
        raise type(self).lost(key)
