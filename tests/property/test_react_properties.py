"""Property: for any script of k tool-call rounds (each with random parallel calls) and any max_iterations, the
agent makes exactly min(k + 1, max_iterations) model calls and either answers or raises
ExceedMaxIterationsError; tool messages reach the model in call order."""

from __future__ import annotations

import json

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk.chat_model.agent import ChatModelAgent
from adk.errors import ExceedMaxIterationsError
from adk.runner import Runner
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall
from compose.tools import tool

pytestmark = pytest.mark.anyio


@tool
async def echo(key: str, delay: int) -> str:
    """Echo after ``delay`` scheduler turns.

    Args:
        key: key
        delay: delay
    """
    for _ in range(delay):
        await anyio.lowlevel.checkpoint()
    return key


rounds_strategy = st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=4), max_size=6)


@settings(max_examples=60, deadline=None)
@given(rounds=rounds_strategy, max_iterations=st.integers(1, 8), streaming=st.booleans())
async def test_model_calls_and_tool_message_order(
    rounds: list[list[int]], max_iterations: int, streaming: bool
) -> None:
    script: list[Message | str] = []
    for r, delays in enumerate(rounds):
        calls = [
            ToolCall(
                id=f"r{r}c{i}",
                function=FunctionCall(name="echo", arguments=json.dumps({"key": f"r{r}c{i}", "delay": d})),
            )
            for i, d in enumerate(delays)
        ]
        script.append(Message(role="assistant", tool_calls=calls))
    script.append("final")
    model = ScriptedChatModel(script)
    agent = ChatModelAgent("a", "d", model=model, tools=[echo], max_iterations=max_iterations)
    errors = []
    async with Runner(agent, enable_streaming=streaming).query("go") as run:
        async for event in run:
            if event.error is not None:
                errors.append(event.error)
            else:
                assert event.message is not None
                await event.message.get_message()
    k = len(rounds)
    assert len(model.calls) == min(k + 1, max_iterations)
    if k + 1 <= max_iterations:
        assert errors == []
        assert run.final_message is not None and run.final_message.content == "final"
    else:
        assert len(errors) == 1 and isinstance(errors[0], ExceedMaxIterationsError)
    # every model call after round r sees round r's tool messages in call order
    for n, recorded in enumerate(model.calls[1:], start=1):
        tool_ids = [m.tool_call_id for m in recorded.messages if m.role == "tool"]
        expected = [f"r{r}c{i}" for r in range(n) for i in range(len(rounds[r]))]
        assert tool_ids == expected
        assert [m.content for m in recorded.messages if m.role == "tool"] == expected
