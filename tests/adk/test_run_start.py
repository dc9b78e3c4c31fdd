"""The start of a Runner run (``query`` and the first ``__anext__``): what its shortcuts must keep."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from adk.chat_model.agent import ChatModelAgent
from adk.runner import Runner
from compose.callbacks import CallbackHandler, RunInfo, append_global_callbacks, clear_global_callbacks
from compose.models import ScriptedChatModel
from compose.schema import user_message

pytestmark = pytest.mark.anyio


class CancelAtAgentStart(CallbackHandler):
    """Cancels the consumer's scope from the agent run's ``on_start`` (an await after the run's entry check)."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None

    async def on_start(self, run_info: RunInfo, input: Any) -> None:
        if run_info.component == "Agent" and self.scope is not None:
            self.scope.cancel()


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("given", [False, True])
async def test_a_cancel_during_the_agent_callbacks_start_stops_the_graph_before_the_model(
    streaming: bool, given: bool
) -> None:
    """The agent's ``on_start`` awaited after the run's entry check: its graph's entry checks again, so a cancel
    that came meanwhile runs no model (with the Runner's handlers and with global ones alike)."""
    handler = CancelAtAgentStart()
    model = ScriptedChatModel(["hello"])
    agent = ChatModelAgent("a", "answers", model=model)
    runner = Runner(agent, enable_streaming=streaming, callbacks=[handler] if given else ())
    if not given:
        append_global_callbacks(handler)
    try:
        async with runner.query("hi") as run:
            with anyio.CancelScope() as scope:
                handler.scope = scope
                await run.__anext__()
                pytest.fail("the cancellation was not raised")
            assert scope.cancelled_caught
    finally:
        clear_global_callbacks()
    assert model.calls == []


async def test_query_and_run_start_the_same_run() -> None:
    """``query(text)`` (its one message is not checked again) is ``run([user_message(text)])``, with the same
    errors for bad arguments."""
    answers = []
    for start in ("query", "run"):
        model = ScriptedChatModel(["hello"])
        runner = Runner(ChatModelAgent("a", "answers", model=model, instruction="Be brief."))
        run = runner.query("hi") if start == "query" else runner.run([user_message("hi")])
        async with run:
            events = [e async for e in run]
        assert [[(m.role, m.content) for m in c.messages] for c in model.calls] == [
            [("system", "Be brief."), ("user", "hi")]
        ]
        assert run.final_message is not None and run.termination_reason == "completed"
        answers.append([e.message.message.content for e in events if e.message and e.message.message])
    assert answers == [["hello"], ["hello"]]
    runner = Runner(ChatModelAgent("a", "answers", model=ScriptedChatModel(["x"])))
    with pytest.raises(TypeError, match="session_values must be a mapping"):
        runner.query("hi", session_values=[1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no checkpoint store"):
        runner.query("hi", checkpoint_id="c")
