"""Durable agent runs across real worker processes on real databases (adk.durable, issue 18).

The workers are ``python -m adk.durable worker durable_app:<factory>`` processes (tests/adk/durable_workers);
the test process submits runs with a ``DurableClient`` and checks the results, the ``tool_log`` table (one row
per tool execution) and DBOS's own tables. The runs' bodies need asyncio (DBOS is asyncio-only), so these tests
drive their client with ``anyio.run(..., backend="asyncio")``; ``test_durable.py`` checks the trio error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
import sqlalchemy as sa

pytest.importorskip("dbos", reason="dbos is not installed (pip install 'pyeino[dbos]')")

sys.path.insert(0, str(Path(__file__).parent / "durable_workers"))
from harness import Gate, Worker, env, fresh_pg_database, query, tool_log

from adk.durable import DurableClient, DurableEvent
from adk.middlewares.approval import ApprovalDecision

pytestmark = pytest.mark.slow

ROUNDS = 5


def run_async(fn: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(fn, backend="asyncio")


def submit_runs(db: str, runs: Sequence[tuple[str, Any]]) -> list[str]:
    """Submit ``(run id, input)`` runs from this process; their ids."""

    async def go() -> list[str]:
        async with DurableClient(db) as client:
            return [(await client.submit(x, run_id=run_id)).run_id for run_id, x in runs]

    return cast(list[str], run_async(go))


def results_of(db: str, ids: Sequence[str]) -> list[Any]:
    """Wait for the runs ``ids`` to end; their results."""

    async def go() -> list[Any]:
        async with DurableClient(db) as client:
            return [await client.handle(i).result() for i in ids]

    return cast(list[Any], run_async(go))


def tool_steps(db: str) -> set[tuple[str, str]]:
    """(run id, call id) of every tool step DBOS has recorded as finished."""
    rows = query(
        db, "SELECT workflow_uuid, function_name FROM dbos.operation_outputs WHERE function_name LIKE 'worker.tool.%'"
    )
    return {(r[0], r[1].rsplit("[", 1)[1].rstrip("]")) for r in rows}


def test_postgres_three_workers_200_runs_one_killed(pg_server: Any, tmp_path: Path) -> None:
    db = fresh_pg_database(pg_server.dsn)
    n_runs = 200
    log = tmp_path / "workers.log"
    gate = Gate(tmp_path / "gate")
    workers = Worker.many(3, db, db, stderr=log, **gate.env("r2"))
    try:
        ids = submit_runs(db, [(f"run-{i}", f"q{i}") for i in range(n_runs)])
        victim = workers[0]
        victim_pid = victim.proc.pid
        # kill while the victim has runs in flight: all 8 of its runs held in round 2 (rounds 0 and 1 finished)
        held = victim.held(8)
        victim.kill()
        finished_at_kill = tool_steps(db)  # a superset of the calls that had finished before the kill
        gate.release()
        outcomes = results_of(db, ids)
    finally:
        gate.release()
        for w in workers:
            w.stop()
    assert [o.status for o in outcomes] == ["completed"] * n_runs
    assert [o.output.content for o in outcomes] == [f"answer q{i} 10" for i in range(n_runs)]
    executions = Counter((run, call) for run, call, _pid in tool_log(db))
    expected = {(f"run-{i}", f"r{k}c0") for i in range(n_runs) for k in range(ROUNDS)}
    assert set(executions) == expected  # every call ran, and no other
    # a call that had finished before the kill never ran again
    assert all(executions[c] == 1 for c in finished_at_kill)
    # a call that ran twice was in flight on the killed worker (its first execution is the victim's)
    first_pid: dict[tuple[str, str], int] = {}
    for run, call, pid in tool_log(db):
        first_pid.setdefault((run, call), pid)
    repeated = [c for c, n in executions.items() if n > 1]
    assert all(first_pid[c] == victim_pid for c in repeated), repeated
    assert max(executions.values()) <= 2
    assert all(executions[c] == 2 for c in held)  # in flight at the kill: run again by the worker taking over
    # every workflow completed exactly once, the victim's taken over by the live workers
    statuses = query(db, "SELECT status, count(*) FROM dbos.workflow_status WHERE name = 'pyeino.run' GROUP BY status")
    assert dict(statuses) == {"SUCCESS": n_runs}
    (takeover,) = query(
        db,
        "SELECT taken_by, taken_at_ms - heartbeat_ms FROM pyeino_durable_workers WHERE executor_id = :e",
        e=victim.executor_id,
    )
    assert takeover[0] in {workers[1].executor_id, workers[2].executor_id}
    # the bound: dead_after (1.5 s) plus one heartbeat interval (0.2 s), with slack for a loaded machine
    assert takeover[1] <= 1500 + 200 + 3000
    taken = query(db, "SELECT count(*) FROM dbos.workflow_status WHERE executor_id = :e", e=victim.executor_id)
    assert taken == [(0,)]  # none left on the dead executor


def test_sqlite_worker_killed_and_restarted_recovers_its_runs(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'system.db'}"
    log_db = f"sqlite:///{tmp_path / 'log.db'}"
    gate = Gate(tmp_path / "gate")
    first = Worker(db, log_db, executor_id="worker-a", concurrency=4, **gate.env("r2"))
    second: Worker | None = None
    try:
        ids = submit_runs(db, [(f"s-{i}", f"q{i}") for i in range(8)])
        held = first.held(4)  # its 4 runs in flight, held in round 2
        first.kill()
        finished_at_kill = tool_steps_sqlite(db)
        gate.release()
        # the same executor id again: DBOS recovers its own pending runs at launch
        second = Worker(db, log_db, executor_id="worker-a", concurrency=4)
        outcomes = results_of(db, ids)
    finally:
        gate.release()
        first.stop()
        if second is not None:
            second.stop()
    assert [o.output.content for o in outcomes] == [f"answer q{i} 10" for i in range(8)]
    executions = Counter((run, call) for run, call, _pid in tool_log(log_db))
    assert set(executions) == {(f"s-{i}", f"r{k}c0") for i in range(8) for k in range(ROUNDS)}
    assert len(finished_at_kill) >= 8 and all(executions[c] == 1 for c in finished_at_kill)
    assert all(executions[c] == 2 for c in held)
    assert max(executions.values()) <= 2


def test_sqlite_graph_with_parallel_branches_killed_and_recovered(tmp_path: Path) -> None:
    """A graph's parallel branches killed mid-run: each step of a replay gets its own recorded result (by name),
    so every run completes with the right output and no step that had finished before the kill runs again. At
    the kill, each of the worker's 4 runs has finished b1s1 and b2s1 and holds b0s1, b1s2 and b2s2."""
    db = f"sqlite:///{tmp_path / 'system.db'}"
    log_db = f"sqlite:///{tmp_path / 'log.db'}"
    opts: dict[str, Any] = {"factory": "build_graph", "executor_id": "graph-a", "concurrency": 4}
    gate = Gate(tmp_path / "gate")
    first = Worker(db, log_db, **opts, **gate.env("b0s1", "b1s2", "b2s2"))
    second: Worker | None = None
    try:
        ids = submit_runs(db, [(f"g-{i}", i) for i in range(8)])
        held = first.held(12)
        first.kill()
        sql = "SELECT workflow_uuid, function_name FROM operation_outputs WHERE function_name LIKE 'graph.%'"
        rows = query(db, sql)
        # graph.b0.s1@runnable:branches;node:b0s1 -> b0s1
        finished_at_kill = {(run, name.split("@")[0].replace("graph.", "").replace(".", "")) for run, name in rows}
        gate.release()
        second = Worker(db, log_db, **opts)
        outcomes = results_of(db, ids)
    finally:
        gate.release()
        first.stop()
        if second is not None:
            second.stop()
    assert [o.output for o in outcomes] == [3 * i + 69 for i in range(8)]
    executions = Counter((run, call) for run, call, _pid in tool_log(log_db))
    stages = {f"b{b}s{s}" for b in range(3) for s in (1, 2)}
    assert set(executions) == {(f"g-{i}", c) for i in range(8) for c in stages}
    in_flight = {run for run, _ in held}
    assert len(in_flight) == 4
    assert finished_at_kill == {(run, c) for run in in_flight for c in ("b1s1", "b2s1")}
    assert all(executions[c] == 1 for c in finished_at_kill)
    assert all(executions[c] == 2 for c in held)
    assert max(executions.values()) <= 2


def tool_steps_sqlite(db: str) -> set[tuple[str, str]]:
    rows = query(db, "SELECT workflow_uuid, function_name FROM operation_outputs WHERE function_name LIKE '%tool.%'")
    return {(r[0], r[1].rsplit("[", 1)[1].rstrip("]")) for r in rows}


def test_sqlite_two_workers_on_one_file_share_the_runs(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'system.db'}"
    log_db = f"sqlite:///{tmp_path / 'log.db'}"
    gate = Gate(tmp_path / "gate")
    workers = Worker.many(2, db, log_db, concurrency=2, **gate.env("r0"))
    try:
        ids = submit_runs(db, [(f"t-{i}", f"q{i}") for i in range(10)])
        for w in workers:  # both serve the queue: each has its 2 runs in flight
            w.held(2)
        gate.release()
        outcomes = results_of(db, ids)
    finally:
        gate.release()
        for w in workers:
            w.stop()
    assert [o.output.content for o in outcomes] == [f"answer q{i} 10" for i in range(10)]
    executions = Counter((run, call) for run, call, _pid in tool_log(log_db))
    assert len(executions) == 50 and set(executions.values()) == {1}
    assert {pid for _r, _c, pid in tool_log(log_db)} == {w.proc.pid for w in workers}  # both served the queue


def test_two_agents_workers_on_one_database_each_run_only_their_own_agents_runs(tmp_path: Path) -> None:
    """Issue: a run submitted to queue ``slowq`` for agent ``slow`` was executed by the other agent's worker (DBOS
    dequeues from every queue its application registered). Here ``slow``'s worker registers ``slowq`` and stops;
    runs are then submitted to both queues while only the other agent's worker serves: it runs its own and leaves
    ``slowq``'s waiting for ``slow``'s next worker."""
    db = f"sqlite:///{tmp_path / 'system.db'}"
    log_db = f"sqlite:///{tmp_path / 'log.db'}"
    rounds = {"PYEINO_TEST_ROUNDS": "1"}
    Worker(db, log_db, factory="build_slow", queue="slowq", **rounds).stop()  # slowq is registered in the database
    fast = Worker(db, log_db, queue="fastq", **rounds)
    slow: Worker | None = None

    async def submit(queue: str, prefix: str) -> list[str]:
        async with DurableClient(db, queue=queue) as client:
            return [(await client.submit(f"q{i}", run_id=f"{prefix}-{i}")).run_id for i in range(3)]

    try:
        slow_ids = run_async(lambda: submit("slowq", "slow"))
        fast_ids = run_async(lambda: submit("fastq", "fast"))
        fast_out = results_of(db, fast_ids)
        slow = Worker(db, log_db, factory="build_slow", queue="slowq", **rounds)
        slow_out = results_of(db, slow_ids)
    finally:
        fast.stop()
        if slow is not None:
            slow.stop()
    assert [o.output.content for o in fast_out] == [f"answer q{i} 0" for i in range(3)]
    assert [o.output.content for o in slow_out] == [f"slow q{i} 0" for i in range(3)]
    pids = {run: pid for run, _call, pid in tool_log(log_db)}
    assert pids == {**dict.fromkeys(fast_ids, fast.proc.pid), **dict.fromkeys(slow_ids, slow.proc.pid)}


def test_run_paused_for_approval_resumes_from_another_process(pg_server: Any, tmp_path: Path) -> None:
    db = fresh_pg_database(pg_server.dsn)
    first = Worker(db, db, factory="build_approval", PYEINO_TEST_ROUNDS="1")
    second: Worker | None = None
    try:

        async def submit_and_wait_for_pause() -> list[dict[str, Any]]:
            async with DurableClient(db) as client:
                handle = await client.submit("pay", run_id="approve-1")
                async for event in handle.events():
                    if event.kind == "interrupted":
                        return [i.model_dump() for i in event.interrupts]
            raise AssertionError("the run did not pause")

        (interrupt,) = run_async(submit_and_wait_for_pause)
        assert interrupt["info"] == {"tool_name": "pay", "arguments": '{"amount": 0}', "call_id": "r0c0"}
        assert tool_log(db) == []  # not paid before approval
        # the worker holding the paused run dies; another one takes it over and waits at the same pause
        first.kill()
        second = Worker(db, db, factory="build_approval", PYEINO_TEST_ROUNDS="1")
        script = (
            "import anyio, sys\n"
            "from adk.middlewares.approval import ApprovalDecision\n"
            "from adk.durable import DurableClient\n"
            "async def main():\n"
            "    async with DurableClient(sys.argv[1]) as client:\n"
            "        await client.handle('approve-1').resume({sys.argv[2]: ApprovalDecision(approved=True)})\n"
            "anyio.run(main)\n"
        )
        subprocess.run([sys.executable, "-c", script, db, interrupt["id"]], env=env(db), check=True, timeout=60)

        async def result() -> Any:
            async with DurableClient(db) as client:
                handle = client.handle("approve-1")
                return await handle.result(), [e async for e in handle.events()]

        outcome, events = run_async(result)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    assert outcome.output.content == "answer pay 0"
    assert [(e.kind, e.role, e.message.content if e.message else None) for e in events] == [
        ("message", "assistant", ""),
        ("interrupted", None, None),
        ("message", "tool", "paid 0"),
        ("message", "assistant", "answer pay 0"),
    ]
    assert [(r, c) for r, c, _ in tool_log(db)] == [("approve-1", "r0c0")]  # paid once, after approval
    assert ApprovalDecision(approved=True).approved


READER = """
import anyio, json, sys
from adk.durable import DurableClient
async def main():
    async with DurableClient(sys.argv[1]) as client:
        async for event in client.handle(sys.argv[2]).events():
            print(json.dumps(event.model_dump(mode="json", exclude_none=True)), flush=True)
anyio.run(main)
"""


def test_events_and_tokens_of_a_running_run_read_from_a_third_process(pg_server: Any, tmp_path: Path) -> None:
    db = fresh_pg_database(pg_server.dsn)
    gate = Gate(tmp_path / "gate")
    worker = Worker(db, db, factory="build_stream", PYEINO_TEST_ROUNDS="1", **gate.env())
    reader: subprocess.Popen[str] | None = None
    try:

        async def submit() -> None:
            async with DurableClient(db) as client:
                await client.submit("hello there", run_id="stream-1", streaming=True)

        run_async(submit)
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, db, "stream-1"], stdout=subprocess.PIPE, text=True, env=env(db)
        )
        assert reader.stdout is not None
        seen: list[dict[str, Any]] = []
        # the model is stopped after its first token until the gate opens: what the reader sees before that
        # was read while the run was running
        while not (seen and seen[-1]["kind"] == "token" and seen[-1]["message"]["content"] == "answer"):
            seen.append(json.loads(reader.stdout.readline()))
        gate.release()
        rest = [json.loads(line) for line in reader.stdout]
        assert reader.wait(30) == 0
    finally:
        if reader is not None and reader.poll() is None:
            reader.kill()
            reader.wait()
        if reader is not None and reader.stdout is not None:
            reader.stdout.close()
        gate.release()
        worker.stop()
    events = [DurableEvent.model_validate(e) for e in seen + rest]
    summary = [(e.kind, e.role, e.message.content if e.message else None) for e in events]
    assert summary == [
        ("token", "assistant", ""),  # the tool-call answer, streamed too
        ("message", "assistant", ""),
        ("message", "tool", "0"),
        ("token", "assistant", "answer"),
        ("token", "assistant", " hello"),
        ("token", "assistant", " there"),
        ("token", "assistant", " 0"),
        ("message", "assistant", "answer hello there 0"),
    ]


def test_the_durable_agent_example() -> None:
    example = Path(__file__).parents[2] / "examples" / "durable_agent.py"
    out = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=120, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "killed worker-a (SIGKILL) with runs in flight; worker-b takes them over"
    assert lines[1:9] == [f"  check-{i}: invoice {i}: {100 + i} EUR, due" for i in range(8)]
    executed = int(lines[9].split()[2])
    assert 16 <= executed <= 16 + 4  # at most the worker's 4 runs in flight ran their call again
    assert lines[10:] == [
        "  tool lookup: invoice 7: 107 EUR, due",
        "  tool lookup: invoice 7: 107 EUR, due",
        'paused for approval: pay({"invoice": 7})',
        "  tool pay: paid invoice 7",
        "pay-7: paid invoice 7",
        lines[-1],
    ]
    assert lines[-1].startswith("done in ")


# ---------------------------------------------------------------------------------------------------------------
# Start-up (issue 28): workers starting together on a new database, the first heartbeat, the client first


def _lock_waiters(db: str) -> int:
    """How many sessions on ``db`` wait for a lock (a table, a row type, an advisory lock)."""
    rows = query(
        db,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    return int(rows[0][0])


def _wait_for_lock_waiters(db: str, n: int, workers: Sequence[Worker]) -> None:
    """Until ``n`` sessions wait for a lock (the workers are blocked where the test wants them)."""

    async def go() -> None:
        with anyio.fail_after(60):
            while _lock_waiters(db) < n:
                for w in workers:
                    assert w.proc.poll() is None, f"a worker exited early ({w.proc.returncode})"
                await anyio.sleep(0.05)

    run_async(go)


def _pg_conn(db: str) -> Any:
    import psycopg

    return psycopg.connect(str(sa.make_url(db).set(drivername="postgresql")))


def test_three_workers_creating_the_heartbeat_table_at_once_all_start(pg_server: Any) -> None:
    """Workers meeting a creator of the heartbeat table in flight (here the test's own uncommitted CREATE
    TABLE, which makes the race of three fresh workers certain) all start once it commits."""
    db = fresh_pg_database(pg_server.dsn)
    creator = _pg_conn(db)
    workers: list[Worker] = []
    try:
        creator.execute(
            "CREATE TABLE pyeino_durable_workers (executor_id text PRIMARY KEY, heartbeat_ms bigint NOT NULL, "
            "state text NOT NULL, taken_by text, taken_at_ms bigint)"
        )
        workers = [Worker(db, db, wait=False) for _ in range(3)]
        _wait_for_lock_waiters(db, 3, workers)  # each blocked behind the uncommitted creation
        creator.commit()
        for w in workers:
            w.wait_ready()
    finally:
        creator.close()
        for w in workers:
            w.stop()
    assert len({w.executor_id for w in workers}) == 3


def test_client_first_then_a_worker_that_dies_before_its_first_heartbeat(pg_server: Any, tmp_path: Path) -> None:
    """Submitting before any worker started creates DBOS's tables (the run waits on the queue); ``workers()``
    and ``result(timeout=...)`` say that nobody serves it; a worker that dies before its first heartbeat has
    taken no run, so the next worker runs it."""
    from adk.durable._liveness import Liveness
    from adk.errors import DurableTimeoutError

    db = fresh_pg_database(pg_server.dsn)

    async def submit_before_any_worker() -> None:
        async with DurableClient(db) as client:
            handle = await client.submit("early", run_id="early-1")
            assert await handle.status() == "ENQUEUED"
            assert await client.workers() == []
            timed_out = r"'early-1' did not end within 0\.2s; its status is ENQUEUED"
            with pytest.raises(DurableTimeoutError, match=timed_out):
                await handle.result(timeout=0.2)

    run_async(submit_before_any_worker)
    probe = Liveness(db, "probe", recover=lambda _: 0)
    probe.setup()  # the heartbeat table, so that the test can lock it
    probe.close()
    gate = Gate(tmp_path / "gate")
    locker = _pg_conn(db)
    doomed: Worker | None = None
    second: Worker | None = None
    try:
        locker.execute("LOCK TABLE pyeino_durable_workers IN ACCESS EXCLUSIVE MODE")
        doomed = Worker(db, db, wait=False, PYEINO_TEST_ROUNDS="1", **gate.env("r"))
        _wait_for_lock_waiters(db, 1, [doomed])  # blocked writing its first heartbeat
        # a negative, so a bounded wait: ten polling intervals of the queue in which it must not dequeue the run
        run_async(lambda: anyio.sleep(1.0))
        assert query(db, "SELECT status FROM dbos.workflow_status WHERE workflow_uuid = 'early-1'") == [("ENQUEUED",)]
        doomed.kill()
        locker.rollback()
        gate.release()
        second = Worker(db, db, PYEINO_TEST_ROUNDS="1")

        async def served() -> tuple[Any, list[Any]]:
            async with DurableClient(db, dead_after=1.5) as client:
                return await client.handle("early-1").result(timeout=60), await client.workers()

        outcome, workers = run_async(served)
    finally:
        gate.release()
        locker.close()
        for w in (doomed, second):
            if w is not None:
                w.stop()
    assert outcome.output.content == "answer early 0"
    assert [(w.executor_id, w.alive) for w in workers] == [(second.executor_id, True)]


def _worker_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adk.durable", "worker", *args],
        capture_output=True,
        text=True,
        env=env("sqlite://"),
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["no_such_module:build"], 2, "cannot import the target module 'no_such_module': No module named"),
        (["durable_app:no_such"], 2, "module 'durable_app' has no attribute 'no_such'"),
        (["durable_app"], 2, "target must be module:attr (e.g. myapp.agents:build), got 'durable_app'"),
        (["durable_app:HOLD_CALLS"], 2, "durable_app:HOLD_CALLS is a tuple, not an agent or a compiled graph"),
        (["durable_app:build", "--db", "runs.db"], 2, "--db must be a sqlite:///path.db or postgresql://... URL"),
        (["durable_app:build", "--heartbeat", "6"], 2, "--dead-after (5.0) must be longer than --heartbeat (6.0)"),
        (
            ["durable_app:build", "--db", "postgresql://nobody:secret@127.0.0.1:1/app"],
            1,
            "cannot launch on the system database postgresql://nobody:***@127.0.0.1:1/app: OperationalError: "
            "connection failed",
        ),
    ],
)
def test_bad_worker_command_lines_print_one_line(args: list[str], status: int, message: str) -> None:
    if "--db" not in args:
        args = [*args, "--db", "sqlite:///unused.db"]
    out = _worker_command(*args)
    assert (out.returncode, out.stdout) == (status, "")
    (line,) = out.stderr.splitlines()
    assert line.startswith("python -m adk.durable: error: ") and message in line, line


def test_the_harness_reads_held_lines_strictly(tmp_path: Path) -> None:
    """``Worker.held`` skips other output but fails, naming it, on a torn ``held`` line (two lines interleaved);
    ``durable_app.say`` writes each line whole, so tool threads' lines never tear."""
    script = (
        "import sys, threading\n"
        f"sys.path.insert(0, {str(Path(__file__).parent / 'durable_workers')!r})\n"
        "from durable_app import say\n"
        "print('a library talking', flush=True)\n"
        "def calls(i): [say(f'held run-{i} c{k}') for k in range(50)]\n"
        "threads = [threading.Thread(target=calls, args=(i,)) for i in range(8)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "sys.stdout.write('held run-x c1held run-y c2\\n')\n"
    )
    err = tmp_path / "err"
    err.write_text("")
    worker = Worker.__new__(Worker)
    worker.proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env("sqlite://")
    )
    worker._err_path = err
    try:
        calls = worker.held(400)
        assert len(set(calls)) == 400 and {run for run, _ in calls} == {f"run-{i}" for i in range(8)}
        with pytest.raises(AssertionError, match=r"a malformed held line on the worker's stdout: 'held run-x c1held"):
            worker.held(1)
    finally:
        worker.proc.wait(30)
        assert worker.proc.stdout is not None
        worker.proc.stdout.close()
