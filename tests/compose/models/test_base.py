"""What a chat-model node (and an agent) does with a chat model that returns something other than a Message."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from adk.chat_model.agent import ChatModelAgent
from adk.runner import Runner
from adk.telemetry import TelemetryEvent
from compose.errors import ModelResponseError, NodeRunError
from compose.graph import END, START, Graph
from compose.models.base import checked_message, checked_stream
from compose.schema import Message, ToolInfo, user_message
from compose.stream import StreamReader
from tests.adk.helpers import collect, kinds

pytestmark = pytest.mark.anyio

HI = [user_message("hi")]


class OddModel:
    """A chat model whose generate() and stream() return ``value`` as it is."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def with_tools(self, tools: Sequence[ToolInfo]) -> OddModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Any:
        return self.value

    async def stream(self, messages: Sequence[Message], **opts: Any) -> Any:
        return self.value


ODD = [None, "plain text", 42, {"role": "assistant", "content": "a dict"}]
ODD_IDS = ["none", "str", "int", "dict"]


def described(value: Any) -> str:
    return "None" if value is None else f"{type(value).__qualname__} {value!r}"


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("value", ODD, ids=ODD_IDS)
async def test_a_model_node_names_itself_when_the_model_returns_no_message(value: Any, streaming: bool) -> None:
    g = Graph(input_type=list[Message], output_type=Message)
    g.add_chat_model_node("writer", OddModel(value))
    g.add_edge(START, "writer")
    g.add_edge("writer", END)
    runnable = g.compile()
    with pytest.raises(NodeRunError) as info:
        if streaming:
            async with await runnable.stream(HI) as reader:
                async for _ in reader:
                    pass
        else:
            await runnable.invoke(HI)
    assert info.value.node_path == ["writer"]
    cause = info.value.__cause__
    assert isinstance(cause, ModelResponseError)
    method, expected = ("stream()", "a StreamReader of Messages") if streaming else ("generate()", "a Message")
    assert str(cause) == f"chat model node 'writer' (OddModel): {method} returned {described(value)}, not {expected}"


@pytest.mark.parametrize("telemetry", [False, True])
@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("value", ODD, ids=ODD_IDS)
async def test_an_agent_names_the_model_that_returned_no_message(
    value: Any, streaming: bool, telemetry: bool
) -> None:
    events: list[TelemetryEvent] = []
    agent = ChatModelAgent("helper", "d", model=OddModel(value))
    runner = Runner(agent, enable_streaming=streaming, telemetry=[events.append] if telemetry else [])
    seen = await collect(runner.query("hi"))
    assert kinds(seen) == ["error"]
    error = seen[0].error
    assert isinstance(error, NodeRunError)
    cause = error.__cause__
    assert isinstance(cause, ModelResponseError)
    method = "stream()" if streaming else "generate()"
    assert str(cause).startswith(f"agent 'helper': chat model OddModel: {method} returned {described(value)}, not ")
    if telemetry:
        assert [e.data.get("error") is not None for e in events if e.name == "model.call.completed"] == [True]


async def test_the_checks_pass_messages_and_readers_through() -> None:
    msg = Message(role="assistant", content="ok")
    assert checked_message(msg, "m") is msg
    async with StreamReader.from_iterable([msg]) as reader:
        assert checked_stream(reader, "m") is reader
    long = "x" * 500
    with pytest.raises(ModelResponseError) as info:
        checked_message(long, "m: generate()")
    assert len(str(info.value)) < 150
