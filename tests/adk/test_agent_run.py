"""``AgentRun`` with a ChatModelAgent at the root: the agent's run hands its events out itself (one ``__anext__``
per event, no Runner frame in between), doing the Runner run's part on the way (pauses saved, a resume's
checkpoint retired or released, the run closed when its consumer is cancelled)."""

from __future__ import annotations

import anyio
import pytest

from adk.chat_model._react_run import ReactRun
from adk.chat_model.agent import ChatModelAgent
from adk.errors import CheckpointNotFoundError
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import Runner
from compose.checkpoint import InMemoryCheckPointStore
from compose.models import ScriptedChatModel
from compose.tools import tool
from tests.adk.helpers import call, calling, drain

pytestmark = pytest.mark.anyio


def paying_runner(store: InMemoryCheckPointStore, entered: anyio.Event, blocked: list[bool]) -> Runner:
    """An agent whose ``pay`` call needs approval and, while ``blocked[0]``, waits forever once it is entered."""

    @tool
    async def pay(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: how much.
        """
        if blocked[0]:
            entered.set()
            await anyio.sleep_forever()
        return f"paid {amount}"

    model = ScriptedChatModel([calling(call("pay", '{"amount": 5}', id="c1")), "All paid."] * 2)
    agent = ChatModelAgent(
        "ops", "pays", model=model, tools=[pay], middlewares=[ApprovalMiddleware(lambda name, args: name == "pay")]
    )
    return Runner(agent, checkpoint_store=store)


async def test_a_lone_chat_model_agent_hands_its_events_out_itself() -> None:
    runner = Runner(ChatModelAgent("a", "answers", model=ScriptedChatModel(["hi"])))
    run = runner.query("hello")
    step = run.__anext__()
    assert step.cr_code is ReactRun.__anext__.__code__  # type: ignore[attr-defined]
    event = await step
    assert event.message is not None and event.message.message is not None
    assert event.message.message.content == "hi" and event.run_path == ("a",)
    with pytest.raises(StopAsyncIteration):
        await run.__anext__()
    assert run.termination_reason == "completed" and run.final_message is not None
    with pytest.raises(StopAsyncIteration):  # finished: it stays finished
        await run.__anext__()


async def test_a_resume_cancelled_in_its_tool_call_releases_its_claim_unclosed() -> None:
    store = InMemoryCheckPointStore()
    entered = anyio.Event()
    blocked = [True]
    runner = paying_runner(store, entered, blocked)
    async with runner.query("pay", checkpoint_id="j") as run:
        _, paused = await drain(run)
    assert paused is not None and paused.checkpoint_id == "j"  # saved on the way out
    targets = {paused.ids[0]: ApprovalDecision(approved=True)}

    resumed = runner.resume("j", targets=targets)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_once_paying() -> None:
                await entered.wait()
                scope.cancel()

            tg.start_soon(cancel_once_paying)
            async for _ in resumed:  # the consumer is cancelled in the tool call and never closes the run
                pass
    assert scope.cancelled_caught
    assert resumed.termination_reason == "closed"

    blocked[0] = False
    async with runner.resume("j", targets=targets) as again:  # its claim was released: not refused as "claimed"
        seen, _ = await drain(again)
    assert [s.content for s in seen] == ["paid 5", "All paid."]
    assert again.termination_reason == "completed"
    async with runner.resume("j", targets=targets) as done:  # the completed resume retired the checkpoint
        with pytest.raises(CheckpointNotFoundError):
            await done.__anext__()
