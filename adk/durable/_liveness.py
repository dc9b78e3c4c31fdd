"""Cross-worker takeover: heartbeats in a table of the system database, and recovery of dead executors' runs.

Open-source DBOS recovers a process's pending workflows only when a process with the same executor id starts
again. Each worker here writes a heartbeat into ``pyeino_durable_workers`` (in the DBOS system database)
every ``interval`` seconds and, on the same tick, looks for workers whose heartbeat is older than
``dead_after``: it claims such a worker's row (a conditional UPDATE, so one live worker wins), calls DBOS's
recovery for the dead executor id, which puts that executor's pending workflows back on their queue, and marks
the row ``recovered``. Any live worker then dequeues them and replays them, taking finished steps from the
database. A claim made by a worker that died in turn (its row still ``dead``, not ``recovered``) is claimed again.
DBOS's recovery is idempotent, so a claim raced by a restarting worker (which recovers its own runs at launch)
does no harm.

The heartbeat and the watch are two loops, each in a worker thread of its own: a recovery can take seconds on
a loaded machine (one UPDATE per workflow), and a heartbeat waiting behind it would let the other workers
declare this live worker dead and run its runs a second time.

Takeover bound: a run of a killed worker is back on the queue at most ``dead_after + interval`` seconds after
the worker's last heartbeat, plus the time DBOS needs to recover (one UPDATE per workflow) and the queue's
polling interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.to_thread
import sqlalchemy as sa

__all__ = ["DurableWorker", "Liveness", "engine_url", "read_workers"]

_TABLE = "pyeino_durable_workers"


def engine_url(db: str) -> sa.URL:
    """SQLAlchemy's URL for a system database URL (PostgreSQL through psycopg 3, as DBOS connects)."""
    url = sa.make_url(db)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Takeover:
    """One dead worker this worker recovered: its executor id, when, and how many runs went back on the queue."""

    executor_id: str
    at_ms: int
    recovered: int


class Liveness:
    """A worker's heartbeat and its watch over the others (see the module docstring)."""

    def __init__(
        self,
        db: str,
        executor_id: str,
        *,
        recover: Callable[[str], int],
        interval: float = 1.0,
        dead_after: float = 5.0,
    ) -> None:
        if interval <= 0 or dead_after <= interval:
            raise ValueError(f"need 0 < interval < dead_after, got interval={interval}, dead_after={dead_after}")
        self.executor_id = executor_id
        self.interval = interval
        self.dead_after = dead_after
        self._recover = recover
        self._engine = (
            sa.create_engine(engine_url(db), pool_size=1, max_overflow=1)
            if not db.startswith("sqlite")
            else sa.create_engine(engine_url(db))
        )
        self._meta = sa.MetaData()
        self._table = sa.Table(
            _TABLE,
            self._meta,
            sa.Column("executor_id", sa.Text, primary_key=True),
            sa.Column("heartbeat_ms", sa.BigInteger, nullable=False),
            sa.Column("state", sa.Text, nullable=False),
            sa.Column("taken_by", sa.Text, nullable=True),
            sa.Column("taken_at_ms", sa.BigInteger, nullable=True),
        )
        self.takeovers: list[Takeover] = []

    def __repr__(self) -> str:
        return f"Liveness({self.executor_id!r}, interval={self.interval}, dead_after={self.dead_after})"

    def setup(self) -> None:
        """Create the heartbeat table if missing; safe when N workers start at once on a new database.

        On PostgreSQL the creators queue on an advisory lock, and a creator that does not take it (another
        program, an older pyeino) is caught too: two concurrent ``CREATE TABLE IF NOT EXISTS`` can still collide
        on the table's row type (``DuplicateObject``/``UniqueViolation``), after which the table exists.
        """
        create = sa.schema.CreateTable(self._table, if_not_exists=True)
        try:
            with self._engine.begin() as c:
                if self._engine.dialect.name == "postgresql":
                    c.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": _TABLE})
                c.execute(create)
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError, sa.exc.OperationalError):
            with self._engine.connect() as c:
                if not sa.inspect(c).has_table(_TABLE):
                    raise  # not the race: a real failure

    def beat(self) -> None:
        """Write this worker's heartbeat (and mark it alive, also after a restart under the same id)."""
        t = self._table
        with self._engine.begin() as c:
            done = c.execute(
                sa.update(t)
                .where(t.c.executor_id == self.executor_id)
                .values(heartbeat_ms=_now_ms(), state="alive", taken_by=None, taken_at_ms=None)
            )
            if done.rowcount == 0:
                c.execute(sa.insert(t).values(executor_id=self.executor_id, heartbeat_ms=_now_ms(), state="alive"))

    def leave(self) -> None:
        """On a clean shutdown: age this worker's heartbeat so its unfinished runs are taken over at once."""
        t = self._table
        with self._engine.begin() as c:
            c.execute(sa.update(t).where(t.c.executor_id == self.executor_id).values(heartbeat_ms=0))

    async def run(self) -> None:
        """Heartbeat every ``interval`` seconds and watch the other workers every ``interval`` seconds, until
        cancelled. The two loops are independent: a slow :meth:`check` (a long recovery) never delays a beat."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._every, self.beat)
            await self._every(self.check)

    async def _every(self, tick: Callable[[], object]) -> None:
        limiter = anyio.CapacityLimiter(1)  # its own thread: tool calls holding the default limiter never delay it
        while True:
            await anyio.to_thread.run_sync(tick, limiter=limiter)
            await anyio.sleep(self.interval)

    def check(self) -> list[Takeover]:
        """Claim every dead worker not already claimed by a live one, and recover its runs."""
        t = self._table
        now = _now_ms()
        cutoff = now - int(self.dead_after * 1000)
        with self._engine.begin() as c:
            rows = c.execute(sa.select(t.c.executor_id, t.c.heartbeat_ms, t.c.state, t.c.taken_by)).all()
        fresh = {r.executor_id for r in rows if r.heartbeat_ms >= cutoff}
        done: list[Takeover] = []
        for r in rows:
            if r.executor_id == self.executor_id or r.heartbeat_ms >= cutoff:
                continue
            if r.state == "recovered" or (r.state == "dead" and r.taken_by in fresh):
                continue  # done, or a live worker is on it
            with self._engine.begin() as c:
                claimed = c.execute(
                    sa.update(t)
                    .where(t.c.executor_id == r.executor_id, t.c.heartbeat_ms < cutoff, t.c.state == r.state)
                    .where(t.c.taken_by.is_(None) if r.taken_by is None else t.c.taken_by == r.taken_by)
                    .values(state="dead", taken_by=self.executor_id, taken_at_ms=now)
                )
            if claimed.rowcount != 1:
                continue  # another worker claimed it first, or it came back
            takeover = Takeover(r.executor_id, now, self._recover(r.executor_id))
            with self._engine.begin() as c:
                c.execute(
                    sa.update(t)
                    .where(t.c.executor_id == r.executor_id, t.c.state == "dead", t.c.taken_by == self.executor_id)
                    .values(state="recovered")
                )
            self.takeovers.append(takeover)
            done.append(takeover)
        return done

    def close(self) -> None:
        self._engine.dispose()


@dataclass(frozen=True)
class DurableWorker:
    """A worker as the heartbeat table shows it (``DurableClient.workers()``).

    Attributes:
        executor_id: the worker's DBOS executor id (what it printed after ``ready``).
        heartbeat_age: seconds since its last heartbeat (the database's clock against this machine's).
        state: ``"alive"`` (heartbeating, or stopped without a takeover yet), ``"dead"`` (a live worker is taking
            its runs over) or ``"recovered"`` (its runs went back on the queue).
        alive: it heartbeats (state ``"alive"`` and a heartbeat younger than the client's ``dead_after``): it
            serves the queue.
    """

    executor_id: str
    heartbeat_age: float
    state: str
    alive: bool


def read_workers(db: str, dead_after: float) -> list[DurableWorker]:
    """Every worker of the heartbeat table in the system database ``db`` (none when no worker ever started)."""
    engine = sa.create_engine(engine_url(db), poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as c:
            if not sa.inspect(c).has_table(_TABLE):
                return []
            rows = c.execute(sa.text(f"SELECT executor_id, heartbeat_ms, state FROM {_TABLE} ORDER BY executor_id"))
            now = _now_ms()
            out = []
            for executor_id, heartbeat_ms, state in rows:
                age = max(now - int(heartbeat_ms), 0) / 1000
                out.append(DurableWorker(executor_id, age, state, state == "alive" and age <= dead_after))
            return out
    finally:
        engine.dispose()
