"""The durable workers' liveness loops (adk.durable._liveness) on a real SQLite database, without DBOS."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import anyio.from_thread
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
    recovered: list[str] = []
    done = anyio.Event()
    beats = threading.Semaphore(0)
    beats_during_recovery: list[bool] = []

    def slow_recover(executor_id: str) -> int:
        # the recovery goes on until the watcher's own heartbeat has been written three more times: with the
        # heartbeat waiting behind the recovery it never is (the others would declare this live worker dead)
        beats_during_recovery.extend(beats.acquire(timeout=10) for _ in range(3))
        recovered.append(executor_id)
        anyio.from_thread.run_sync(done.set)  # the check runs in a worker thread of the run's
        return 3

    watcher = Liveness(db, "watcher", recover=slow_recover, interval=0.1, dead_after=1.2)
    watcher.setup()
    watcher.beat()
    beat = watcher.beat

    def counted_beat() -> None:
        beat()
        beats.release()

    watcher.beat = counted_beat  # type: ignore[method-assign]
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run)
            await done.wait()
            tg.cancel_scope.cancel()
    watcher.close()
    assert recovered == ["dead-worker"]
    assert [(t.executor_id, t.recovered) for t in watcher.takeovers] == [("dead-worker", 3)]
    assert beats_during_recovery == [True, True, True]  # the heartbeat went on during the recovery
    states = {w.executor_id: w.state for w in read_workers(db, dead_after=1.2)}
    assert states == {"dead-worker": "recovered", "watcher": "alive"}
