"""Closing a Runner run from a cancelled scope closes everything it holds, each cleanup run to its end.

A run's close takes no cancel scope of its own for a ChatModelAgent: it suspends only in the leaves that run
user code (the model's async iterator, callback handlers, a store), and each of those shields itself. These
tests close runs that hold such leaves from a cancelled scope (cancelled in place, or a task group cancelled
while its consumer waits) and check that each leaf's cleanup, which awaits a checkpoint before it records
its end, finished; the conftest fixture checks that no reader is left open.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint
from pydantic import BaseModel

from adk.agent import AgentContext
from adk.chat_model.agent import ChatModelAgent
from adk.chat_model.config import Limits, OutputConfig
from adk.events import AgentEvent, AgentInput, AgentOutput, MessageVariant
from adk.runner import Runner
from adk.sessions import InMemorySessionStore
from compose.callbacks import CallbackHandler, RunInfo
from compose.schema import Message, assistant_message
from compose.stream import StreamReader

pytestmark = pytest.mark.anyio


class CleanupModel:
    """A model whose stream is the user's generator: two chunks, then it waits; its cleanup awaits a checkpoint
    (where a cancellation not shielded would cut it off) and then records that it finished."""

    def __init__(self) -> None:
        self.cleaned: list[str] = []

    def with_tools(self, tools: Sequence[Any]) -> CleanupModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return assistant_message("whole")

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        async def chunks() -> AsyncIterator[Message]:
            try:
                yield assistant_message("a")
                yield assistant_message("b")
                await anyio.sleep_forever()
            finally:
                await checkpoint()
                self.cleaned.append("model stream")

        return StreamReader.from_async_iterator(chunks())


class Answer(BaseModel):
    text: str


class CancelRecorder(CallbackHandler):
    """Records each ``on_cancel``, after awaiting a checkpoint."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    async def on_cancel(self, run_info: RunInfo) -> None:
        await checkpoint()
        self.cancelled.append(run_info.component)


def agent(model: CleanupModel, **config: Any) -> ChatModelAgent:
    return ChatModelAgent("a", "answers", model=model, **config)


CONFIGS = {
    "plain": {},
    # each wraps the model stream in a relay of the framework's (adk.chat_model._model)
    "timeout": {"limits": Limits(timeout=60.0)},
    "output type": {"output": OutputConfig(Answer)},
}


async def first_token_then_close_cancelled(run: Any) -> None:
    """Read the first event's first chunk, close the event, then leave the run from a cancelled scope."""
    with anyio.CancelScope() as scope:
        async with run:
            event = await run.__anext__()
            assert event.message is not None and event.message.message_stream is not None
            assert (await event.message.message_stream.recv()).content == "a"
            await event.aclose()
            scope.cancel()  # the run's close (``__aexit__``) runs in a cancelled scope
    assert not scope.cancelled_caught  # nothing on the close path suspended outside a shield
    assert run.termination_reason == "closed"


@pytest.mark.parametrize("config", list(CONFIGS))
async def test_a_run_closed_in_a_cancelled_scope_runs_the_model_streams_cleanup_to_its_end(config: str) -> None:
    model = CleanupModel()
    runner = Runner(agent(model, **CONFIGS[config]), enable_streaming=True)
    await first_token_then_close_cancelled(runner.query("hi"))
    assert model.cleaned == ["model stream"]


async def test_a_cancellable_run_closed_in_a_cancelled_scope_runs_the_model_streams_cleanup_to_its_end() -> None:
    model = CleanupModel()
    runner = Runner(agent(model), enable_streaming=True)
    await first_token_then_close_cancelled(runner.query("hi", cancellable=True))
    assert model.cleaned == ["model stream"]


async def test_a_consumer_cancelled_while_it_waits_closes_the_run_and_the_cleanup_completes() -> None:
    model = CleanupModel()
    runner = Runner(agent(model), enable_streaming=True)
    reading = anyio.Event()
    closed: list[str] = []

    async def consumer() -> None:
        run = runner.query("hi")
        try:
            async with run:
                event = await run.__anext__()
                assert event.message is not None and event.message.message_stream is not None
                async with event.message.message_stream as tokens:
                    await tokens.recv()
                    reading.set()
                    await anyio.sleep_forever()
        finally:
            closed.append(str(run.termination_reason))

    async with anyio.create_task_group() as tg:
        tg.start_soon(consumer)
        await reading.wait()
        tg.cancel_scope.cancel()
    assert closed == ["closed"]
    assert model.cleaned == ["model stream"]


async def test_the_cancel_callbacks_of_a_run_closed_in_a_cancelled_scope_run_to_their_end() -> None:
    model = CleanupModel()
    recorder = CancelRecorder()
    runner = Runner(agent(model), enable_streaming=True, callbacks=[recorder])
    await first_token_then_close_cancelled(runner.query("hi"))
    assert model.cleaned == ["model stream"]
    assert sorted(recorder.cancelled) == ["Agent", "Graph"]  # the agent's run and its graph's


async def test_a_session_run_closed_in_a_cancelled_scope_gives_its_lease_up() -> None:
    model = CleanupModel()
    store = InMemorySessionStore()  # its release awaits a checkpoint
    runner = Runner(agent(model), enable_streaming=True, session_store=store)
    await first_token_then_close_cancelled(runner.query("hi", session_id="s"))
    assert model.cleaned == ["model stream"]
    # the lease was given up: the next run on the session starts (not SessionBusyError) and appends nothing
    await first_token_then_close_cancelled(runner.query("again", session_id="s"))
    assert await runner.history("s") == []


class GeneratorAgent:
    """A custom agent whose events come from a generator with a cleanup that awaits a checkpoint."""

    name = "custom"
    description = "emits one streaming event"

    def __init__(self) -> None:
        self.cleaned: list[str] = []

    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[AgentEvent]:
        try:
            stream = StreamReader.from_iterable([assistant_message("a")])
            yield AgentEvent(output=AgentOutput(MessageVariant(True, None, stream)))
            await anyio.sleep_forever()
        finally:
            await checkpoint()
            self.cleaned.append("agent events")


async def test_a_custom_agents_run_closed_in_a_cancelled_scope_runs_its_cleanup_to_its_end() -> None:
    custom = GeneratorAgent()
    await first_token_then_close_cancelled(Runner(custom, enable_streaming=True).query("hi"))
    assert custom.cleaned == ["agent events"]
