"""The durable workers' liveness loops (adk.durable._liveness) on a real SQLite database, without DBOS."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

pytest.importorskip("sqlalchemy", reason="sqlalchemy comes with the dbos extra (pip install 'pyeino[dbos]')")

from adk.durable._liveness import Liveness, read_workers

pytestmark = pytest.mark.anyio


async def test_a_slow_recovery_never_delays_the_heartbeat(tmp_path: Path) -> None:
    # a recovery taking far longer than dead_after must not make this (live) worker look dead to the others:
    # they would take its runs over and run them a second time
    db = f"sqlite:///{tmp_path / 'system.db'}"
    dead = Liveness(db, "dead-worker", recover=lambda _: 0, interval=0.1, dead_after=1.2)
    dead.setup()
    dead.beat()
    dead.leave()  # its heartbeat aged: the watcher below takes it over on its first check
    dead.close()
    ages: list[float] = []
    recovered: list[str] = []

    def slow_recover(executor_id: str) -> int:
        deadline = time.monotonic() + 2.5  # twice dead_after: a heartbeat waiting behind it would age past it
        while time.monotonic() < deadline:  # meanwhile the watcher's own heartbeat stays fresh
            (me,) = (w for w in read_workers(db, dead_after=1.2) if w.executor_id == "watcher")
            ages.append(me.heartbeat_age)
            time.sleep(0.1)
        recovered.append(executor_id)
        return 3

    watcher = Liveness(db, "watcher", recover=slow_recover, interval=0.1, dead_after=1.2)
    watcher.setup()
    watcher.beat()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run)
            while not recovered:
                await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
    watcher.close()
    assert recovered == ["dead-worker"]
    assert [(t.executor_id, t.recovered) for t in watcher.takeovers] == [("dead-worker", 3)]
    assert len(ages) >= 10
    assert max(ages) < 1.2, ages  # the heartbeat went on during the whole recovery: never dead to the others
    states = {w.executor_id: w.state for w in read_workers(db, dead_after=1.2)}
    assert states == {"dead-worker": "recovered", "watcher": "alive"}
