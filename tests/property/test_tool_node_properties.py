"""Property: whatever the calls and however long each tool takes, the output follows the call order."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compose.schema import FunctionCall, Message, ToolCall, assistant_message, concat_message_lists
from compose.tools import tool
from compose.tools.node import ToolsNode

pytestmark = pytest.mark.anyio


async def _pause(steps: int) -> None:
    """A delay measured in scheduler turns, not seconds: other tasks run meanwhile."""
    for _ in range(steps):
        await anyio.lowlevel.checkpoint()


@tool
async def inv(key: str, delay: int, chunks: int) -> str:
    await _pause(delay)
    return "".join(f"{key}.{i};" for i in range(chunks))


@tool
async def streamer(key: str, delay: int, chunks: int) -> AsyncIterator[str]:
    for i in range(chunks):
        await _pause(delay)
        yield f"{key}.{i};"


@tool
def plain(key: str, delay: int, chunks: int) -> str:
    return "".join(f"{key}.{i};" for i in range(chunks))


calls_strategy = st.lists(
    st.tuples(st.sampled_from(["inv", "streamer", "plain"]), st.integers(0, 6), st.integers(1, 3)),
    min_size=1,
    max_size=8,
)
modes = st.sampled_from(["parallel", "sequential", "limited"])


@settings(max_examples=100, deadline=None)
@given(calls=calls_strategy, mode=modes, paradigm=st.sampled_from(["invoke", "stream"]))
async def test_output_order_is_call_order(
    calls: list[tuple[str, int, int]], mode: str, paradigm: str
) -> None:
    node = ToolsNode(
        [inv, streamer, plain],
        execute_sequentially=mode == "sequential",
        max_concurrency=2 if mode == "limited" else None,
    )
    tool_calls = [
        ToolCall(
            id=f"call-{i}",
            function=FunctionCall(
                name=name, arguments=json.dumps({"key": f"k{i}", "delay": delay, "chunks": chunks})
            ),
        )
        for i, (name, delay, chunks) in enumerate(calls)
    ]
    message = assistant_message("", tool_calls=tool_calls)
    if paradigm == "invoke":
        out: list[Message | None] = list(await node.invoke(message))
    else:
        reader = await node.stream(message)
        async with reader:
            chunks_seen = [chunk async for chunk in reader]
        for chunk in chunks_seen:
            assert len(chunk) == len(calls)
            assert sum(m is not None for m in chunk) == 1
        out = concat_message_lists(chunks_seen)
    assert [m.tool_call_id if m else None for m in out] == [f"call-{i}" for i in range(len(calls))]
    assert [m.tool_name if m else None for m in out] == [name for name, _, _ in calls]
    assert [m.content if m else None for m in out] == [
        "".join(f"k{i}.{j};" for j in range(chunks)) for i, (_, _, chunks) in enumerate(calls)
    ]
