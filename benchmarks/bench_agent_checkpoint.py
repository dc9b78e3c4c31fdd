"""Agent checkpoints: save/load time and size for a 50-round agent run, and storage left by completed runs.

Run: ``.venv/bin/python benchmarks/bench_agent_checkpoint.py [--rounds 50] [--runs 1000] [--backend asyncio|trio]``.

A ChatModelAgent (scripted model, two tools, the approval guard on ``pay``) calls ``lookup`` for 49 rounds and
``pay`` in round 50, so the run pauses there with ~100 messages in its state. Per store (memory, SQLite,
PostgreSQL when ``$PYEINO_TEST_PG_DSN`` is set or ``.ci/postgres.sh`` can start a throwaway server) it prints:

- ``size``: the stored checkpoint (the agent envelope, of which the graph's own checkpoint is most);
- ``save``: median time of what the runner does when the graph pauses (``CheckpointBinding.save``: wrap the
  graph's checkpoint in the agent envelope, encode, ``store.set``);
- ``load``: median time of what a resume does before the graph runs (``CheckpointBinding.load``: claim, get,
  check the digest and validate the envelope), then release;
- ``resume``: median time of a whole resume to completion (load, the graph restoring ~100 messages, the approved
  tool, the final model call, deleting the checkpoint);
- ``left``: checkpoints and bytes left after ``--runs`` runs that each pause once at an approval and are resumed
  to completion (default retention deletes each on completion: expect 0).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from adk._run import RunContext
from adk.chat_model.agent import ChatModelAgent
from adk.checkpointing import CheckpointBinding
from adk.events import AgentInterruptInfo
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import AgentRun, Runner
from compose.checkpoint import (
    CheckPointStore,
    InMemoryCheckPointStore,
    PostgresCheckPointStore,
    SQLiteCheckPointStore,
)
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall
from compose.tools import tool

ROOT = Path(__file__).resolve().parents[1]


@tool
def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: the query.
    """
    return f"result for {q}: " + "lorem ipsum dolor sit amet " * 8


@tool
def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: how much.
    """
    return f"paid {amount}"


def make_runner(store: CheckPointStore, rounds: int) -> Runner:
    def answer(messages: list[Message]) -> Message | str:
        done = sum(1 for m in messages if m.role == "assistant")
        if messages[-1].role == "tool" and messages[-1].tool_name == "pay":
            return "All done."
        name, args = ("pay", '{"amount": 42}') if done == rounds - 1 else ("lookup", f'{{"q": "item {done}"}}')
        call = ToolCall(id=f"r{done}", function=FunctionCall(name=name, arguments=args))
        return Message(role="assistant", content=f"round {done}: thinking about the next step", tool_calls=[call])

    model = ScriptedChatModel([answer] * 100_000)  # answers depend on the messages only; never exhausted
    agent = ChatModelAgent(
        "ops",
        "runs operations",
        "You run operations carefully.",
        model=model,
        tools=[lookup, pay],
        middlewares=[ApprovalMiddleware(lambda name, _args: name == "pay")],
        max_iterations=rounds + 5,
    )
    return Runner(agent, checkpoint_store=store)


async def drain(run: AgentRun) -> AgentInterruptInfo | None:
    paused = None
    async with run:
        async for event in run:
            if event.error is not None:
                raise event.error
            if event.action is not None and event.action.interrupted is not None:
                paused = event.action.interrupted
    return paused


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


async def _timed(fn: Callable[[], Awaitable[Any]], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - t0)
    return samples


async def _figures(name: str, store: CheckPointStore, rounds: int, runs: int, repeat: int) -> list[str]:
    runner = make_runner(store, rounds)
    agent = runner.agent
    assert isinstance(agent, ChatModelAgent)
    paused = await drain(runner.query("work through the list", checkpoint_id="bench/long"))
    assert paused is not None, "the run should pause at the payment"
    data = await store.get("bench/long")
    assert data is not None
    target = {paused.ids[0]: ApprovalDecision(approved=True)}

    # save: the runner's own work once the graph has written its checkpoint
    ctx = RunContext(agent_name="ops", run_path=("ops",))
    bridge = InMemoryCheckPointStore()
    probe = CheckpointBinding(store, "bench/probe", bridge)
    holder = CheckpointBinding(store, "bench/long", bridge, resuming=True, targets=target)
    await holder.load(ctx)  # fills ctx and puts the graph's bytes in the bridge
    graph_bytes = await bridge.get(holder.graph_id)
    assert graph_bytes is not None
    await holder.release()
    contexts = paused.interrupt_contexts

    async def save() -> None:
        await bridge.set(probe.graph_id, graph_bytes)
        await probe.save(ctx, False, contexts)

    save_s = await _timed(save, repeat)

    async def load() -> None:
        b = CheckpointBinding(store, "bench/long", bridge, resuming=True, targets=target)
        await b.load(RunContext(agent_name="ops", run_path=("ops",)))
        await b.release()

    load_s = await _timed(load, repeat)

    async def resume() -> None:
        await store.set("bench/long", data)
        assert await drain(runner.resume("bench/long", targets=target)) is None

    resume_s = await _timed(resume, max(repeat // 4, 3))
    await store.delete("bench/probe")

    # retention: runs that pause once and are resumed to completion
    short = make_runner(store, 1)
    t0 = time.perf_counter()
    for i in range(runs):
        p = await drain(short.query("pay", checkpoint_id=f"runs/{i}"))
        assert p is not None
        assert await drain(short.resume(f"runs/{i}", targets={p.ids[0]: ApprovalDecision(approved=True)})) is None
    per_run = (time.perf_counter() - t0) / max(runs, 1)
    left = await store.list("runs/")
    left_bytes = 0
    for k in left:
        left_bytes += len(await store.get(k) or b"")
    return [
        name,
        f"{len(data) / 1e3:.1f} KB ({len(graph_bytes) / 1e3:.1f} graph)",
        f"{_median_ms(save_s):.2f}",
        f"{_median_ms(load_s):.2f}",
        f"{_median_ms(resume_s):.2f}",
        f"{per_run * 1e3:.2f}",
        f"{len(left)} / {left_bytes} B",
    ]


def _table(rows: list[list[str]]) -> None:
    head = ["store", "size", "save ms", "load ms", "resume ms", "run+resume ms", "left after runs"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for row in [head, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


async def _bench(rounds: int, runs: int, repeat: int, pg_dsn: str | None) -> None:
    rows = [await _figures("memory", InMemoryCheckPointStore(), rounds, runs, repeat)]
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteCheckPointStore(Path(tmp) / "cp.db") as sqlite:
            rows.append(await _figures("sqlite", sqlite, rounds, runs, repeat))
    note = ""
    if pg_dsn is None:
        note = "postgres skipped: no server ($PYEINO_TEST_PG_DSN unset and .ci/postgres.sh failed)"
    else:
        table = f"bench_agent_{os.getpid()}"
        async with PostgresCheckPointStore(pg_dsn, table=table) as pg:
            try:
                rows.append(await _figures("postgres", pg, rounds, runs, repeat))
            finally:

                def drop() -> None:
                    import psycopg

                    with psycopg.connect(pg_dsn, autocommit=True) as conn:
                        conn.execute(f"DROP TABLE IF EXISTS {table}")
                        conn.execute(f"DROP SEQUENCE IF EXISTS {table}_seq")

                await anyio.to_thread.run_sync(drop)
    print(f"{rounds}-round agent run paused at round {rounds}; {runs} runs for retention; median of {repeat}")
    _table(rows)
    if note:
        print(note)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    dsn = os.environ.get("PYEINO_TEST_PG_DSN")
    state_dir = None
    if dsn is None:
        state_dir = tempfile.mkdtemp(prefix="pyeino-pg-bench-")
        env = {**os.environ, "PYEINO_PG_DIR": state_dir}
        out = subprocess.run(
            ["bash", str(ROOT / ".ci" / "postgres.sh"), "start"], env=env, capture_output=True, text=True, check=False
        )
        line = next((x for x in out.stdout.splitlines() if x.startswith("export PYEINO_TEST_PG_DSN=")), None)
        dsn = None if line is None else line.split("=", 1)[1]
        if dsn is None:
            print(out.stderr, file=sys.stderr)
    try:
        print(f"backend: {args.backend}")
        anyio.run(_bench, args.rounds, args.runs, args.repeat, dsn, backend=args.backend)
    finally:
        if state_dir is not None:
            env = {**os.environ, "PYEINO_PG_DIR": state_dir}
            subprocess.run(
                ["bash", str(ROOT / ".ci" / "postgres.sh"), "stop"], env=env, capture_output=True, check=False
            )


if __name__ == "__main__":
    main()
