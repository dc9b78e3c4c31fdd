"""Cancel at safe points (issue 25 part 7; Eino's ``adk/cancel*_test.go``): each mode, timeout escalation, cancel
during a model stream, a cancel racing the end of the run, resume after a cancel with nothing finished run again,
cancel without a checkpoint store; recursive cancels are in ``test_cancel_recursive.py``.

Tests coordinate with events: a gated model or tool signals that it started and waits until the test lets it go.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from adk.cancel import CancelHandle
from adk.chat_model.agent import ChatModelAgent
from adk.errors import AgentCancelledError, StreamCancelledError
from adk.events import AgentEvent
from adk.middlewares.approval import ApprovalMiddleware
from adk.runner import AgentRun, Runner
from adk.sessions import InMemorySessionStore
from compose.checkpoint import InMemoryCheckPointStore
from compose.models import ScriptedChatModel
from compose.schema import Message, ToolInfo
from compose.stream import StreamReader
from compose.tools import tool
from tests.adk.helpers import call, calling

pytestmark = pytest.mark.anyio


class Gated:
    """A chat model playing a script whose call ``k`` signals ``started[k]`` and, when ``gates`` has ``k``, waits
    for that event before answering (a stream waits before its chunk ``gate_chunk``)."""

    def __init__(self, responses: Sequence[Message | str], gates: Sequence[int] = (), gate_chunk: int = 0) -> None:
        self.responses = list(responses)
        self.answered = 0  # a call a cancel cut off does not use up its response
        self.started = [anyio.Event() for _ in range(len(responses) + 4)]
        self.gates = {k: anyio.Event() for k in gates}
        self.gate_chunk = gate_chunk
        self.calls = 0
        self.cut_off = 0  # calls a cancel cut off while they waited

    def with_tools(self, tools: Sequence[ToolInfo]) -> Gated:
        return self

    async def _wait(self, k: int) -> None:
        gate = self.gates.get(k)
        if gate is not None:
            try:
                await gate.wait()
            except anyio.get_cancelled_exc_class():
                self.cut_off += 1
                raise

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        k = self.calls
        self.calls += 1
        self.started[k].set()
        await self._wait(k)
        answer = await self._script().generate(messages, **opts)
        self.answered += 1
        return answer

    def _script(self) -> ScriptedChatModel:
        return ScriptedChatModel([self.responses[self.answered]], chunk_size=2, usage=False)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        k = self.calls
        self.calls += 1
        self.started[k].set()
        chunks = [c async for c in await self._script().stream(messages, **opts)]

        async def gen() -> AsyncIterator[Message]:
            for j, chunk in enumerate(chunks):
                if j == self.gate_chunk:
                    await self._wait(k)
                yield chunk
            self.answered += 1

        return StreamReader.from_async_iterator(gen())


class Tools:
    """Tools whose calls are counted and may wait on a gate (``slow``)."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.slow_started = anyio.Event()
        self.slow_gate = anyio.Event()
        self.slow_cut_off = 0

    def all(self) -> list[Any]:
        @tool
        async def fast(x: str) -> str:
            """A tool that answers at once."""
            self.ran.append(f"fast:{x}")
            return f"fast {x}"

        @tool
        async def slow(x: str) -> str:
            """A tool that waits for the test."""
            self.slow_started.set()
            try:
                await self.slow_gate.wait()
            except anyio.get_cancelled_exc_class():
                self.slow_cut_off += 1
                raise
            self.ran.append(f"slow:{x}")
            return f"slow {x}"

        return [fast, slow]


def agent(model: Gated, tools: Tools | None = None) -> ChatModelAgent:
    return ChatModelAgent("assistant", "helps", model=model, tools=tools.all() if tools is not None else None)


def runner(a: Any, *, streaming: bool = False, store: bool = True) -> Runner:
    return Runner(a, enable_streaming=streaming, checkpoint_store=InMemoryCheckPointStore() if store else None)


async def drain(run: AgentRun, events: list[AgentEvent] | None = None) -> AgentCancelledError | None:
    """Iterate the run to its end, reading every stream; the cancel error of its last event, if any."""
    cancelled: AgentCancelledError | None = None
    async with run:
        async for event in run:
            assert cancelled is None, "the cancel's event is the run's last"
            if events is not None:
                events.append(event)
            if event.message is not None:
                try:
                    await event.message.get_message()
                except StreamCancelledError:
                    pass
            if isinstance(event.error, AgentCancelledError):
                cancelled = event.error
            else:
                assert event.error is None, event.error
    return cancelled


def fast_call(x: str = "1", id: str = "c1") -> Message:
    return calling(call("fast", f'{{"x": "{x}"}}', id=id))


# ---------------------------------------------------------------------------------------------------------------
# each mode


@pytest.mark.parametrize("streaming", [False, True])
async def test_immediate_cancel_during_a_model_call_cuts_it_off_and_resumes_it(streaming: bool) -> None:
    model = Gated([fast_call(), "done"], gates=[1])
    tools = Tools()
    r = runner(agent(model, tools), streaming=streaming)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    outcome: list[str] = []
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[1].wait()
            outcome.append(await run.cancel().wait())

        tg.start_soon(cancel)
        error = await drain(run)
    assert outcome == ["cancelled"]
    assert error is not None and error.mode == {"immediate"} and not error.escalated
    assert error.checkpoint_id == "c" and error.interrupt_contexts
    assert run.termination_reason == "cancelled"
    assert model.cut_off == 1 and tools.ran == ["fast:1"]
    # resume: the cut-off model call runs again; the tool that finished does not
    model.gates.clear()
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert resumed.final_message is not None and resumed.final_message.content == "done"
    assert tools.ran == ["fast:1"] and model.calls == 3


async def test_cancel_before_the_first_step_stops_before_the_model() -> None:
    model = Gated(["done"])
    r = runner(agent(model))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    handle = run.cancel()
    error = await drain(run)
    assert await handle.wait() == "cancelled"
    assert error is not None and model.calls == 0
    resumed = r.resume("c")
    assert await drain(resumed) is None and model.calls == 1


@pytest.mark.parametrize("streaming", [False, True])
async def test_after_chat_model_stops_before_the_tools_run(streaming: bool) -> None:
    model = Gated([fast_call(), "done"], gates=[0])
    tools = Tools()
    r = runner(agent(model, tools), streaming=streaming)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[0].wait()
            handle = run.cancel("after_chat_model")
            model.gates[0].set()
            assert await handle.wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and error.mode == {"after_chat_model"}
    assert model.cut_off == 0 and tools.ran == [] and model.calls == 1
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert tools.ran == ["fast:1"] and model.calls == 2


async def test_after_chat_model_on_a_final_answer_reports_already_ended() -> None:
    model = Gated(["the answer"], gates=[0])
    r = runner(agent(model, Tools()))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[0].wait()
            handle = run.cancel("after_chat_model")
            model.gates[0].set()
            assert await handle.wait() == "already_ended"

        tg.start_soon(cancel)
        assert await drain(run) is None
    assert run.termination_reason == "completed"


@pytest.mark.parametrize("streaming", [False, True])
async def test_after_tool_calls_lets_every_tool_of_the_round_finish(streaming: bool) -> None:
    both = calling(call("fast", '{"x": "a"}', id="c1"), call("slow", '{"x": "b"}', id="c2"))
    model = Gated([both, "done"])
    tools = Tools()
    r = runner(agent(model, tools), streaming=streaming)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await tools.slow_started.wait()
            handle = run.cancel("after_tool_calls")
            tools.slow_gate.set()
            assert await handle.wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and error.mode == {"after_tool_calls"}
    assert sorted(tools.ran) == ["fast:a", "slow:b"] and model.calls == 1 and tools.slow_cut_off == 0
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert sorted(tools.ran) == ["fast:a", "slow:b"] and model.calls == 2
    assert resumed.final_message is not None and resumed.final_message.content == "done"


async def test_immediate_cancel_during_tools_keeps_the_finished_ones() -> None:
    both = calling(call("fast", '{"x": "a"}', id="c1"), call("slow", '{"x": "b"}', id="c2"))
    model = Gated([both, "done"])
    tools = Tools()
    r = runner(agent(model, tools))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await tools.slow_started.wait()
            assert await run.cancel().wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None
    assert tools.ran == ["fast:a"] and tools.slow_cut_off == 1
    tools.slow_gate.set()
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert tools.ran == ["fast:a", "slow:b"] and model.calls == 2


async def test_modes_combined_stop_at_the_first_safe_point() -> None:
    model = Gated([fast_call(), "done"], gates=[0])
    tools = Tools()
    r = runner(agent(model, tools))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[0].wait()
            handle = run.cancel({"after_chat_model", "after_tool_calls"})
            model.gates[0].set()
            assert await handle.wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and error.mode == {"after_chat_model", "after_tool_calls"}
    assert tools.ran == []


# ---------------------------------------------------------------------------------------------------------------
# timeout escalation, joining calls


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_safe_point_not_reached_in_time_escalates_to_immediate(streaming: bool) -> None:
    model = Gated([fast_call(), "done"], gates=[0])  # the first model call never returns on its own
    tools = Tools()
    r = runner(agent(model, tools), streaming=streaming)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[0].wait()
            assert await run.cancel("after_tool_calls", timeout=0.01).wait() == "timed_out_escalated"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and error.escalated and error.timed_out and error.mode == {"immediate"}
    assert model.cut_off == 1 and tools.ran == []
    model.gates.clear()
    resumed = r.resume("c")  # still checkpointed
    assert await drain(resumed) is None and tools.ran == ["fast:1"]


async def test_a_second_call_escalates_a_safe_point_cancel() -> None:
    model = Gated([fast_call(), "done"], gates=[0])
    r = runner(agent(model, Tools()))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[0].wait()
            first = run.cancel("after_tool_calls")
            second = run.cancel("immediate")
            assert await first.wait() == "cancelled" and await second.wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and error.escalated and not error.timed_out and model.cut_off == 1


# ---------------------------------------------------------------------------------------------------------------
# streaming


async def cancel_when_blocked(run: AgentRun, handles: list[CancelHandle]) -> None:
    await anyio.wait_all_tasks_blocked()  # the reader waits for the gated chunk
    handles.append(run.cancel())


async def cut_in_the_answer(run: Any, model: Gated, got: list[str]) -> BaseException | None:
    """Consume ``run``; while the consumer reads the second model call's stream, cancel the run immediately (from
    another task, once the reader is blocked): the read raises ``StreamCancelledError``, the cancel answers
    "cancelled". The chunks read go to ``got``; returns the error of the run's last event."""
    handles: list[CancelHandle] = []
    error: BaseException | None = None
    async with run:
        async for event in run:
            if event.error is not None:
                error = event.error
                continue
            assert event.message is not None
            stream = event.message.message_stream
            if model.calls < 2 or stream is None:
                await event.message.get_message()
                continue
            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_when_blocked, run, handles)
                with pytest.raises(StreamCancelledError):
                    async with stream:
                        async for chunk in stream:
                            got.append(chunk.content)
    assert await handles[0].wait() == "cancelled"
    return error


async def test_immediate_cancel_while_the_consumer_reads_a_model_stream(no_task_leaks: None) -> None:
    model = Gated([fast_call(), "the final answer, streamed"], gates=[1], gate_chunk=2)
    tools = Tools()
    r = runner(agent(model, tools), streaming=True)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    got: list[str] = []
    error = await cut_in_the_answer(run, model, got)
    assert isinstance(error, AgentCancelledError)
    assert "".join(got) == "the "  # two chunks of two characters, then the cut
    assert model.cut_off == 1
    model.gates.clear()
    resumed = r.resume("c")
    assert await drain(resumed) is None
    assert resumed.final_message is not None and resumed.final_message.content == "the final answer, streamed"
    assert tools.ran == ["fast:1"]


async def test_a_session_run_cut_off_in_its_answer_stream_keeps_its_turn_pending(no_task_leaks: None) -> None:
    """The answer cut off is not part of the turn (its model call runs again on resume); what came before it is
    kept, pending under the cancel's checkpoint, and the finished tool does not run again."""
    model = Gated([fast_call(), "the final answer, streamed"], gates=[1], gate_chunk=2)
    tools = Tools()
    sessions = InMemorySessionStore()
    r = Runner(
        agent(model, tools), enable_streaming=True, checkpoint_store=InMemoryCheckPointStore(), session_store=sessions
    )
    run = r.query("go", session_id="s1", checkpoint_id="c", cancellable=True)
    error = await cut_in_the_answer(run, model, [])
    assert isinstance(error, AgentCancelledError) and error.checkpoint_id == "c"
    pending = await sessions.pending("c")
    assert pending is not None and [m.role for m in pending.messages] == ["user", "assistant", "tool"]
    model.gates.clear()
    assert await drain(r.resume("c")) is None  # type: ignore[arg-type]
    stored = (await sessions.load("s1")).messages
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[-1].content == "the final answer, streamed"
    assert tools.ran == ["fast:1"]


# ---------------------------------------------------------------------------------------------------------------
# the end of the run, no store, not cancellable


async def test_cancel_after_the_end_reports_already_ended() -> None:
    model = Gated(["done"])
    run = runner(agent(model)).query("go", cancellable=True)
    assert await drain(run) is None
    assert await run.cancel().wait() == "already_ended"


async def test_cancel_racing_the_natural_end_never_hangs() -> None:
    # the cancel lands while the last model call returns: the run ends on its own or as cancelled, never hangs
    async def cancel(model: Gated, run: AgentRun, turns: int, outcomes: list[str]) -> None:
        await model.started[0].wait()
        model.gates[0].set()
        for _ in range(turns):
            await anyio.lowlevel.checkpoint()
        outcomes.append(await run.cancel("after_tool_calls").wait())

    for turns in range(4):
        model = Gated(["done"], gates=[0])
        run = runner(agent(model)).query("go", cancellable=True)
        outcomes: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel, model, run, turns, outcomes)
            await drain(run)
        assert outcomes == ["already_ended"]


async def test_cancel_without_a_checkpoint_store_ends_cleanly(no_task_leaks: None) -> None:
    model = Gated([fast_call(), "done"], gates=[1])
    tools = Tools()
    run = runner(agent(model, tools), store=False).query("go", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[1].wait()
            assert await run.cancel().wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and error.checkpoint_id is None
    assert run.termination_reason == "cancelled"


async def test_a_run_not_started_cancellable_refuses_and_bad_arguments_are_named() -> None:
    run = runner(agent(Gated(["done"]))).query("go")
    with pytest.raises(ValueError, match="cancellable=True"):
        run.cancel()
    await drain(run)
    run = runner(agent(Gated(["done"]))).query("go", cancellable=True)
    with pytest.raises(ValueError, match="cancel mode"):
        run.cancel("later")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        run.cancel("after_tool_calls", timeout=0)
    await drain(run)


async def test_a_run_on_a_session_cancels_and_its_resume_appends_the_whole_turn() -> None:
    both = calling(call("fast", '{"x": "a"}', id="c1"), call("slow", '{"x": "b"}', id="c2"))
    model = Gated([both, "done", "again"])
    tools = Tools()
    sessions = InMemorySessionStore()
    r = Runner(agent(model, tools), checkpoint_store=InMemoryCheckPointStore(), session_store=sessions)
    run = r.query("go", session_id="s1", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await tools.slow_started.wait()
            assert await run.cancel().wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)  # type: ignore[arg-type]
    assert error is not None and error.checkpoint_id == "c"
    assert (await sessions.load("s1")).messages == []  # the turn is pending under the cancel's checkpoint
    tools.slow_gate.set()
    resumed = r.resume("c", cancellable=True)
    assert await drain(resumed) is None  # type: ignore[arg-type]
    assert tools.ran == ["fast:a", "slow:b"] and model.calls == 2
    roles = [m.role for m in (await sessions.load("s1")).messages]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    # not cancellable unless asked; a cancel of a session run that ended reports already_ended
    plain = r.query("again", session_id="s1")
    with pytest.raises(ValueError, match="cancellable=True"):
        plain.cancel()
    await drain(plain)  # type: ignore[arg-type]
    assert await resumed.cancel().wait() == "already_ended"


# ---------------------------------------------------------------------------------------------------------------
# edge cases (Eino's cancel_edge_test.go, cancel_multicall_test.go)


async def test_a_business_interrupt_while_a_cancel_is_pending_is_absorbed_and_fires_again_on_resume() -> None:
    from adk.middlewares.approval import ApprovalDecision, ApprovalRequest

    model = Gated([calling(call("fast", '{"x": "p"}', id="c1")), "done"], gates=[0])
    tools = Tools()
    a = ChatModelAgent(
        "assistant", "helps", model=model, tools=tools.all(), middlewares=[ApprovalMiddleware(lambda name, args: True)]
    )
    r = runner(a)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[0].wait()
            handle = run.cancel("after_tool_calls")  # the tool pauses for approval before its round ends
            model.gates[0].set()
            assert await handle.wait() == "cancelled"

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and tools.ran == []
    (ctx,) = error.interrupt_contexts
    assert isinstance(ctx.info, ApprovalRequest)  # the business interrupt, kept in the checkpoint
    resumed = r.resume("c", targets={ctx.id: ApprovalDecision(approved=True)})
    assert await drain(resumed) is None
    assert tools.ran == ["fast:p"]


async def test_a_failing_run_reports_already_ended() -> None:
    model = Gated([fast_call()], gates=[0])
    model.responses = []  # the call fails past its script
    run = runner(agent(model)).query("go", cancellable=True)
    outcome: list[str] = []
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[0].wait()
            handle = run.cancel("after_tool_calls")
            model.gates[0].set()
            outcome.append(await handle.wait())

        tg.start_soon(cancel)
        async with run:
            errors = [e.error async for e in run if e.error is not None]
    assert outcome == ["already_ended"] and len(errors) == 1
    assert not isinstance(errors[0], AgentCancelledError)


async def test_cancel_after_it_took_effect_reports_the_same_outcome() -> None:
    model = Gated(["done"])
    run = runner(agent(model)).query("go", checkpoint_id="c", cancellable=True)
    first = run.cancel()
    assert await drain(run) is not None
    assert await first.wait() == "cancelled"
    assert await run.cancel("after_tool_calls").wait() == "cancelled"


async def test_safe_point_modes_join_and_the_earliest_deadline_wins() -> None:
    model = Gated([fast_call(), "done"], gates=[0])
    run = runner(agent(model, Tools())).query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[0].wait()
            slow = run.cancel("after_tool_calls", timeout=3600)
            soon = run.cancel("after_tool_calls", timeout=0.01)  # the earlier deadline wins
            later = run.cancel("after_tool_calls", timeout=3600)  # and is kept
            assert [await h.wait() for h in (slow, soon, later)] == ["timed_out_escalated"] * 3

        tg.start_soon(cancel)
        error = await drain(run)
    assert error is not None and error.timed_out and model.cut_off == 1


async def test_a_cut_off_model_call_is_not_retried() -> None:
    from adk.chat_model.retry import ModelRetryConfig

    model = Gated([fast_call(), "done"], gates=[0])
    a = ChatModelAgent("assistant", "helps", model=model, model_retry=ModelRetryConfig(max_retries=3))
    r = runner(a)
    run = r.query("go", checkpoint_id="c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[0].wait()
            assert await run.cancel().wait() == "cancelled"

        tg.start_soon(cancel)
        assert await drain(run) is not None
    assert model.calls == 1 and model.cut_off == 1


async def test_a_resumed_run_can_be_cancelled_again() -> None:
    model = Gated([fast_call(), fast_call("2", "c2"), "done"], gates=[1])
    tools = Tools()
    r = runner(agent(model, tools))
    run = r.query("go", checkpoint_id="c", cancellable=True)
    run.cancel("after_tool_calls")
    assert await drain(run) is not None and tools.ran == ["fast:1"]
    resumed = r.resume("c", cancellable=True)
    async with anyio.create_task_group() as tg:

        async def cancel() -> None:
            await model.started[1].wait()
            assert await resumed.cancel().wait() == "cancelled"

        tg.start_soon(cancel)
        assert await drain(resumed) is not None
    model.gates.clear()
    again = r.resume("c")
    assert await drain(again) is None
    assert tools.ran == ["fast:1", "fast:2"] and again.final_message is not None


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cancel_run.py"


async def test_the_example_runs_offline() -> None:
    spec = importlib.util.spec_from_file_location("example_cancel_run", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert await module.main() == ["Paris", "Rome", "Vienna"]
