"""Durable agent runs on DBOS, offline: two worker processes serve one queue on a SQLite file; this process
submits runs, reads their events as they happen, kills a worker (SIGKILL) with runs in flight and watches the
other one take them over and finish them (no finished tool call runs again), then approves a paused payment.

    pip install "pyeino[dbos]"
    python examples/durable_agent.py

The workers are ``python -m adk.durable worker durable_agent:build --db sqlite:///...`` (what an operator runs,
N times, with ``--db postgresql://...`` when the workers are on several machines).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from adk import ApprovalDecision, ChatModelAgent
from adk.middlewares.approval import ApprovalMiddleware
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo
from compose.tools import tool
from compose.tools.middleware import get_tool_call_id

LOG = os.environ.get("DURABLE_EXAMPLE_LOG", "")  # where the workers log each tool execution (JSON lines)


def _log(tool_name: str) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(json.dumps({"tool": tool_name, "call": get_tool_call_id(), "pid": os.getpid()}) + "\n")


@tool
async def lookup(invoice: int) -> str:
    """Look an invoice up.

    Args:
        invoice: the invoice number.
    """
    _log("lookup")
    await anyio.sleep(0.4)  # slow enough for the kill to find runs in flight
    return f"invoice {invoice}: {100 + invoice} EUR, due"


@tool
async def pay(invoice: int) -> str:
    """Pay an invoice.

    Args:
        invoice: the invoice number.
    """
    _log("pay")
    return f"paid invoice {invoice}"


class InvoiceModel:
    """A scripted model (answers are a function of the conversation, so any worker continues any run): look
    the invoice up in two rounds, pay it if asked to, then answer."""

    def with_tools(self, tools: Sequence[ToolInfo]) -> InvoiceModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        ask = next(m.content for m in messages if m.role == "user")
        invoice = int(ask.split()[-1])
        results = [m.content for m in messages if m.role == "tool"]
        if len(results) < 2:
            return _call(f"l{len(results)}", "lookup", invoice)
        if ask.startswith("pay") and len(results) == 2:
            return _call("p0", "pay", invoice)
        return Message(role="assistant", content=results[-1])

    async def stream(self, messages: Sequence[Message], **opts: Any) -> Any:
        from compose.stream import StreamReader

        return StreamReader.from_iterable([await self.generate(messages)])


def _call(call_id: str, name: str, invoice: int) -> Message:
    call = ToolCall(id=call_id, function=FunctionCall(name=name, arguments=json.dumps({"invoice": invoice})))
    return Message(role="assistant", content="", tool_calls=[call])


def build() -> ChatModelAgent:
    """What the workers serve: payments need a human's approval."""
    return ChatModelAgent(
        "clerk",
        "handles invoices",
        model=InvoiceModel(),
        tools=[lookup, pay],
        middlewares=[ApprovalMiddleware(lambda n, _a: n == "pay")],
    )


def _worker(db: str, name: str, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    env["DURABLE_EXAMPLE_LOG"] = str(log)
    args = [sys.executable, "-m", "adk.durable", "worker", "durable_agent:build", "--db", db]
    args += ["--executor-id", name, "--heartbeat", "0.2", "--dead-after", "1.5", "--concurrency", "4"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("ready "):
        proc.kill()
        raise SystemExit(f"worker {name} did not start: {line!r}")
    return proc


async def demo(db: str, log: Path, workers: dict[str, subprocess.Popen[str]]) -> None:
    from adk.durable import DurableClient

    async with DurableClient(db) as client:
        handles = [await client.submit(f"check invoice {i}", run_id=f"check-{i}") for i in range(8)]
        await anyio.sleep(0.6)  # the workers are in their first lookups
        workers["worker-a"].send_signal(signal.SIGKILL)
        workers["worker-a"].wait()
        print("killed worker-a (SIGKILL) with runs in flight; worker-b takes them over")
        for h in handles:
            result = await h.result()
            print(f"  {h.run_id}: {result.output.content}")
        text = await anyio.Path(log).read_text()
        lookups = Counter(json.loads(line)["tool"] for line in text.splitlines())["lookup"]
        print(f"lookups executed: {lookups} for {len(handles) * 2} calls (a call in flight at the kill runs again)")

        handle = await client.submit("pay invoice 7", run_id="pay-7", streaming=True)
        async for event in handle.events():  # from any process, as they happen
            if event.kind == "interrupted":
                (pending,) = event.interrupts
                print(f"paused for approval: {pending.info['tool_name']}({pending.info['arguments']})")
                await client.handle("pay-7").resume({pending.id: ApprovalDecision(approved=True)})
            elif event.kind == "message" and event.role == "tool":
                print(f"  tool {event.tool_name}: {event.message.content if event.message else ''}")
        print(f"pay-7: {(await handle.result()).output.content}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'runs.db'}"
        log = Path(tmp) / "tools.jsonl"
        log.touch()
        workers = {"worker-a": _worker(db, "worker-a", log)}  # the first creates DBOS's tables
        workers["worker-b"] = _worker(db, "worker-b", log)
        started = time.monotonic()
        try:
            anyio.run(demo, db, log, workers, backend="asyncio")  # DBOS is asyncio-only
        finally:
            for proc in workers.values():
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(15)
                if proc.stdout is not None:
                    proc.stdout.close()
        print(f"done in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
