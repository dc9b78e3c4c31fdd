"""Durable runs on DBOS (adk.durable): per-step overhead, throughput with 1-3 workers, takeover time.

Run: ``.venv/bin/python benchmarks/bench_durable.py [--runs 30] [--throughput-runs 150]``. PostgreSQL parts
need ``$PYEINO_TEST_PG_DSN`` (or ``.ci/postgres.sh`` to start a throwaway server); without it they are skipped.

The agent is the tests' (tests/adk/durable_workers/durable_app.py): a stateless function-of-the-conversation
model making 5 rounds of one ``record`` tool call, then answering; ``record`` inserts a row into a table.

- ``overhead``: a plain ``Runner`` round trip per run vs the same run as a DBOS workflow started in process
  (no queue), on SQLite and PostgreSQL; per step = (durable - plain) / 11 (6 model calls and 5 tool calls per
  run; it includes the run's 12 event writes and DBOS's workflow bookkeeping);
- ``throughput``: runs/s completed by 1, 2 and 3 worker processes on PostgreSQL (queue, 8 runs per worker);
- ``takeover``: 2 workers, one SIGKILLed with runs in flight; seconds from the kill to the claim of its row
  and to the moment none of its runs is left on it (``--heartbeat 0.2 --dead-after 1.5``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import anyio.to_thread

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "adk" / "durable_workers"))
sys.path.insert(0, str(ROOT))

STEPS_PER_RUN = 11


def pg_dsn() -> str | None:
    dsn = os.environ.get("PYEINO_TEST_PG_DSN")
    if dsn:
        return dsn
    try:
        out = subprocess.run(
            ["bash", str(ROOT / ".ci" / "postgres.sh")], capture_output=True, text=True, check=True, timeout=120
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if line.startswith("export PYEINO_TEST_PG_DSN="):
            return line.removeprefix("export PYEINO_TEST_PG_DSN=")
    return None


def overhead(db: str, log_db: str, runs: int) -> tuple[float, float]:
    """Median seconds per run: plain Runner, then DBOS workflow in process."""
    os.environ["PYEINO_TEST_LOG_DB"] = log_db
    import durable_app
    from harness import create_tool_log

    from adk.durable import DurableApp
    from adk.durable._app import _register_workflow
    from adk.runner import Runner

    create_tool_log(log_db)
    plain_agent = durable_app.build()
    durable_agent = durable_app.build()
    app = DurableApp(durable_agent, db=db, executor_id=f"bench-{os.getpid()}")
    app.launch()
    workflow = _register_workflow()

    async def main() -> tuple[float, float]:
        from dbos import DBOS

        plain: list[float] = []
        durable: list[float] = []
        for i in range(runs):
            t0 = time.perf_counter()
            async with Runner(plain_agent).query(f"q{i}") as run:
                async for _ in run:
                    pass
            plain.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            handle = await DBOS.start_workflow_async(workflow, {"input": f"q{i}", "streaming": False})
            await handle.get_result()
            durable.append(time.perf_counter() - t0)
        return statistics.median(plain), statistics.median(durable)

    try:
        return anyio.run(main, backend="asyncio")
    finally:
        app.shutdown()


def throughput(dsn: str, n_workers: int, runs: int, tmp: Path) -> float:
    from harness import Worker, fresh_pg_database

    from adk.durable import DurableClient

    db = fresh_pg_database(dsn)
    workers = Worker.many(n_workers, db, db, stderr=tmp / "workers.log")
    try:

        async def go() -> float:
            async with DurableClient(db) as client:
                t0 = time.perf_counter()
                handles = [await client.submit(f"q{i}") for i in range(runs)]
                for h in handles:
                    await h.result()
                return time.perf_counter() - t0

        return runs / anyio.run(go, backend="asyncio")
    finally:
        for w in workers:
            w.stop()


def takeover(dsn: str, tmp: Path) -> tuple[float, float]:
    from harness import Gate, Worker, fresh_pg_database, query

    from adk.durable import DurableClient

    db = fresh_pg_database(dsn)
    gate = Gate(tmp / "gate")  # round-1 calls wait for it: the victim dies with runs in flight
    workers = Worker.many(2, db, db, stderr=tmp / "workers.log", **gate.env("r1"))
    try:

        async def submit() -> list[str]:
            async with DurableClient(db) as client:
                return [(await client.submit(f"q{i}")).run_id for i in range(24)]

        ids = anyio.run(submit, backend="asyncio")
        victim = workers[0]
        victim.held(4)
        killed = time.time()
        victim.kill()
        claimed = left = None
        while left is None:
            if claimed is None:
                rows = query(db, "SELECT taken_at_ms FROM pyeino_durable_workers WHERE executor_id = :e AND "
                             "state <> 'alive'", e=victim.executor_id)  # fmt: skip
                if rows:
                    claimed = rows[0][0] / 1000 - killed
            if claimed is not None:
                (n,) = query(db, "SELECT count(*) FROM dbos.workflow_status WHERE executor_id = :e "
                             "AND status = 'PENDING'", e=victim.executor_id)[0]  # fmt: skip
                if n == 0:
                    left = time.time() - killed
            time.sleep(0.02)
        gate.release()

        async def wait_all() -> None:
            async with DurableClient(db) as client:
                for i in ids:
                    await client.handle(i).result()

        anyio.run(wait_all, backend="asyncio")
        return claimed, left
    finally:
        gate.release()
        for w in workers:
            w.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=30, help="runs per overhead measurement")
    p.add_argument("--throughput-runs", type=int, default=150)
    p.add_argument("--only", choices=["overhead", "throughput", "takeover"], default=None)
    args = p.parse_args()
    dsn = pg_dsn()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.only in (None, "overhead"):
            # one DurableApp per process (DBOS is a singleton): each database in its own process
            for kind in ["sqlite", "postgres"] if dsn else ["sqlite"]:
                subprocess.run([sys.executable, __file__, "--child-overhead", kind, str(args.runs)], check=True)
        if dsn is None:
            print("PostgreSQL unavailable: throughput and takeover skipped")
            return
        if args.only in (None, "throughput"):
            for n in (1, 2, 3):
                rate = throughput(dsn, n, args.throughput_runs, tmp)
                print(f"throughput  postgres  {n} worker(s)  {rate:7.1f} runs/s  (5 tool rounds per run)")
        if args.only in (None, "takeover"):
            claimed, left = takeover(dsn, tmp)
            print(f"takeover    postgres  claim {claimed:.2f} s after the kill, its runs re-queued {left:.2f} s after")


def child_overhead(kind: str, runs: int) -> None:
    from harness import fresh_pg_database

    with tempfile.TemporaryDirectory() as d:
        if kind == "sqlite":
            db, log_db = f"sqlite:///{d}/system.db", f"sqlite:///{d}/log.db"
        else:
            dsn = pg_dsn()
            assert dsn is not None
            db = log_db = fresh_pg_database(dsn)
        plain, durable = overhead(db, log_db, runs)
    per_step = (durable - plain) / STEPS_PER_RUN
    print(
        f"overhead    {kind:8}  plain {plain * 1000:7.2f} ms/run  durable {durable * 1000:7.2f} ms/run  "
        f"+{per_step * 1000:.2f} ms per step"
    )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child-overhead":
        child_overhead(sys.argv[2], int(sys.argv[3]))
    else:
        main()
