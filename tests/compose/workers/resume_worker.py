"""A worker process for the cross-process resume tests: ``run`` pauses at a tool that needs approval and kills
itself with SIGKILL right after the interrupt; ``resume`` continues from the store in a fresh process.

    python resume_worker.py (run|resume) (sqlite PATH | postgres DSN) LOGFILE [INTERRUPT_ID]
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass, field
from typing import Any

import anyio

from compose import (
    END,
    START,
    FunctionCall,
    Graph,
    GraphInterrupt,
    Message,
    PostgresCheckPointStore,
    SQLiteCheckPointStore,
    ToolCall,
    ToolsNode,
    assistant_message,
    get_resume_context,
    interrupt,
    process_state,
    tool,
)


@dataclass
class Memo:
    notes: list[str] = field(default_factory=list)


def build(log: str) -> Any:
    def record(line: str) -> None:
        with open(log, "a") as f:
            f.write(line + "\n")

    @tool
    async def lookup(q: str) -> str:
        record(f"lookup {q}")
        async with process_state(Memo) as memo:
            memo.notes.append(f"looked up {q}")
        return f"found {q}"

    @tool
    async def pay(amount: int) -> str:
        ctx = get_resume_context()
        if not ctx.is_target:
            raise interrupt({"approve_payment": amount})
        record(f"pay {amount} {ctx.data}")
        return f"paid {amount}: {ctx.data}"

    async def summary(msgs: list[Message], st: Memo) -> list[Message]:
        return [*msgs, Message(role="assistant", content="; ".join(st.notes))]

    g = Graph[Message, list[Message]](state=Memo)
    g.add_tools_node("tools", ToolsNode([lookup, pay]), post_handler=summary)
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g


async def main(phase: str, kind: str, where: str, log: str, target: str | None) -> None:
    store: Any = SQLiteCheckPointStore(where) if kind == "sqlite" else PostgresCheckPointStore(where)
    r = build(log).compile(name="payments", checkpoint_store=store)
    msg = assistant_message(
        "",
        [
            ToolCall(id="c1", function=FunctionCall(name="lookup", arguments='{"q": "invoice"}')),
            ToolCall(id="c2", function=FunctionCall(name="pay", arguments='{"amount": 42}')),
        ],
    )
    try:
        if phase == "run":
            try:
                await r.invoke(msg, checkpoint_id="job-7")
            except GraphInterrupt as exc:
                (ctx,) = exc.info.interrupt_contexts
                print(json.dumps({"id": ctx.id, "address": ctx.address, "info": ctx.info}), flush=True)
                os.kill(os.getpid(), signal.SIGKILL)  # die right after the interrupt: nothing else runs
        else:
            out = await r.invoke(None, checkpoint_id="job-7", resume={target: "approved"})
            print(json.dumps([m.content for m in out]), flush=True)
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


if __name__ == "__main__":
    phase, kind, where, log = sys.argv[1:5]
    anyio.run(main, phase, kind, where, log, sys.argv[5] if len(sys.argv) > 5 else None)
