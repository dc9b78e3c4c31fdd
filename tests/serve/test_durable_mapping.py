"""The durable mode's mapping, in process (asyncio and trio): a durable run's journal projected and mapped as the
server's EventMapper maps a run in process, a model call streamed again after its worker died, deterministic ids,
numbered SSE frames."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from ag_ui.encoder import EventEncoder
from ag_ui_validate.pytest_plugin import assert_valid_agui

pytest.importorskip("dbos", reason="dbos is not installed (pip install 'pyeino[dbos]')")

from adk.durable import DurableEvent
from adk.projection import message_id
from adk.serve._durable import _Journal, numbered, stable_ids
from adk.serve._mapping import EventMapper, agui_events
from compose.schema import FunctionCall, Message, ToolCall

pytestmark = pytest.mark.anyio


def token(text: str, attempt: str, **extra: Any) -> DurableEvent:
    return DurableEvent(
        kind="token",
        agent_name="a",
        run_path=["a"],
        role="assistant",
        attempt=attempt,
        message=Message(role="assistant", content=text, **extra),
    )


def whole(role: str, message: Message, **extra: Any) -> DurableEvent:
    return DurableEvent(kind="message", agent_name="a", run_path=["a"], role=role, message=message, **extra)


async def events_of(items: list[DurableEvent]) -> AsyncIterator[DurableEvent]:
    for item in items:
        yield item


async def mapped(items: list[DurableEvent], run_id: str = "r1") -> tuple[list[dict[str, Any]], _Journal]:
    mapper = EventMapper(new_id=stable_ids("t", run_id))
    source = _Journal(events_of(items), 0, mapper.projection)
    out = []
    async for records in source.records():
        out += [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in agui_events(records)]
    out += [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in mapper.finish()]
    assert source._events.ag_running is False and source._events.ag_frame is None  # type: ignore[attr-defined]
    return out, source


def run(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    start = {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"}
    return [start, *events, {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"}]


async def test_tokens_stream_an_answer_and_a_retried_call_is_a_new_message() -> None:
    call = ToolCall(id="c1", function=FunctionCall(name="lookup", arguments='{"q": 1}'))
    answer = Message(role="assistant", content="hello world")
    items = [
        token("", "x:1", tool_calls=[call]),
        whole("assistant", Message(role="assistant", content="", tool_calls=[call])),
        whole("tool", Message(role="tool", content="42", tool_call_id="c1"), tool_name="lookup"),
        token("hel", "x:2"),  # the worker dies here ...
        token("hel", "y:2"),  # ... and the one taking over calls the model again
        token("lo world", "y:2"),
        whole("assistant", answer),
        DurableEvent(kind="interrupted"),
        whole("assistant", Message(role="assistant", content="after the pause")),
    ]
    events, source = await mapped(items)
    assert_valid_agui(run(events), max_warnings=0)
    texts: dict[str, str] = {}
    for e in events:
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            texts[e["messageId"]] = texts.get(e["messageId"], "") + e["delta"]
    assert list(texts.values()) == ["hel", "hello world"]
    assert [e["type"] for e in events].count("TOOL_CALL_START") == 1
    # the run's messages, stamped with the ids streamed; the stream stopped at the pause
    assert [m.content for m in source.messages] == ["", "42", "hello world"]
    assert message_id(source.messages[-1]) == list(texts)[-1]
    assert source.end is not None and source.end.kind == "interrupted" and source.offset == 8
    # mapped again (another server process): the same ids
    again, _ = await mapped([DurableEvent.model_validate(i.model_dump()) for i in items])
    assert again == events
    other, _ = await mapped([DurableEvent.model_validate(i.model_dump()) for i in items], run_id="r2")
    assert other != events


async def test_internal_tokens_are_skipped_and_internal_messages_kept_out_of_the_turn() -> None:
    inner = Message(role="assistant", content="inner answer")
    items = [
        DurableEvent(kind="token", role="assistant", internal=True, attempt="x:1", message=inner),
        DurableEvent(
            kind="message", agent_name="sub", run_path=["a", "sub"], role="assistant", internal=True, message=inner
        ),
        whole("assistant", Message(role="assistant", content="outer")),
    ]
    events, source = await mapped(items)
    assert_valid_agui(run(events), max_warnings=0)
    assert [m.content for m in source.messages] == ["outer"]
    assert [e["type"] for e in events].count("SUBAGENT_STARTED") == 1


async def test_numbered_frames_skip_what_the_client_saw() -> None:
    async def frames() -> AsyncIterator[str]:
        for i in range(4):
            yield f"data: {i}\n\n"

    encoder = EventEncoder(accept="text/event-stream")
    assert [f async for f in numbered(frames(), encoder, None)][:1] == ["id: 0\ndata: 0\n\n"]
    assert [f async for f in numbered(frames(), encoder, "1")] == ["id: 2\ndata: 2\n\n", "id: 3\ndata: 3\n\n"]
    assert len([f async for f in numbered(frames(), encoder, "junk")]) == 4
