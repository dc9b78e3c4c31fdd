"""Property: for a random scripted agent run (rounds of parallel tool calls, then an answer, invoke or streaming),
recording it on a cassette and replaying it (the model's script empty, the tools not run) gives exactly the same
events, the order of parallel tool events aside (it follows completion)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk.chat_model.agent import ChatModelAgent
from adk.runner import Runner
from compose.models import ScriptedChatModel
from compose.testing import ChatScript, cassette, chat_scripts
from compose.tools import tool

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool
async def echo(key: str) -> str:
    """Echo after a few scheduler turns (so parallel calls finish in varying order).

    Args:
        key: key
    """
    for _ in range(sum(map(ord, key)) % 4):
        await anyio.lowlevel.checkpoint()
    ran.append(key)
    return f"echo {key}"


@tool
def ping(key: str) -> str:
    """Ping.

    Args:
        key: key
    """
    ran.append(key)
    return json.dumps({"pong": key})


async def run_events(script: ChatScript | None, path: Path, streaming: bool) -> list[Any]:
    mode = "all" if script is not None else "none"
    async with cassette(path, mode) as tape:
        model = script.model() if script is not None else ScriptedChatModel([])
        tools = [tape.wrap_tool(echo), tape.wrap_tool(ping)]
        agent = ChatModelAgent("agent", "d", "Be brief.", tape.wrap(model), tools)
        out: list[Any] = []
        async with Runner(agent, enable_streaming=streaming).query("go") as run:
            async for event in run:
                msg = await event.message.get_message() if event.message is not None else None
                variant = event.message
                out.append(
                    (
                        event.run_path,
                        variant.role if variant is not None else None,
                        variant.is_streaming if variant is not None else None,
                        msg.model_dump(mode="json") if msg is not None else None,
                        repr(event.action),
                        repr(event.error),
                    )
                )
            out.append(run.final_message)
    return out


def tools_sorted(events: list[Any]) -> list[Any]:
    out: list[Any] = []
    group: list[Any] = []
    for e in events:
        if isinstance(e, tuple) and e[1] == "tool":
            group.append(e)
            continue
        out += sorted(group, key=repr)
        group = []
        out.append(e)
    return out + sorted(group, key=repr)


@settings(max_examples=40, deadline=None)
@given(script=chat_scripts(("echo", "ping"), max_rounds=3, max_parallel=3), streaming=st.booleans())
async def test_record_then_replay_reproduces_the_events(script: ChatScript, streaming: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.json"
        ran.clear()
        recorded = await run_events(script, path, streaming)
        calls = len(ran)
        assert calls == sum(len(r) for r in script.rounds)
        replayed = await run_events(None, path, streaming)
        assert len(ran) == calls  # the replay ran no tool
    assert tools_sorted(replayed) == tools_sorted(recorded)
