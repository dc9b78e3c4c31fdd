"""Agent-level interrupts, checkpoints and the approval guard (issue 8, adk part; eino-semantics 4.5-4.6, seed 000).

The interrupt event, approve and reject, parallel approvals decided one by one, retention, concurrent resumes,
corrupted and foreign checkpoints, and a run killed with SIGKILL after the interrupt resumed by a fresh process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import TypeAdapter

from adk.chat_model.actions import send_tool_gen_action
from adk.chat_model.agent import ChatModelAgent
from adk.chat_model.config import ModelConfig
from adk.chat_model.react import State
from adk.errors import CheckpointNotFoundError
from adk.events import AgentAction, AgentEvent, BreakLoopAction, TransferToAgentAction
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware, ApprovalRequest, rejection_message
from adk.runner import Runner
from adk.telemetry import TelemetryEvent
from compose.checkpoint import InMemoryCheckPointStore, SQLiteCheckPointStore
from compose.errors import CheckpointError, GraphBuildError, GraphInterrupt, InterruptNotFoundError, NodeRunError
from compose.graph import END, START, Graph
from compose.interrupt import get_resume_context, interrupt
from compose.models import ScriptedChatModel
from compose.models.scripted import ScriptedResponse
from compose.schema import user_message
from compose.tools import tool
from tests.adk.helpers import call, calling, drain, reduce

pytestmark = pytest.mark.anyio

WORKER = Path(__file__).parent / "workers" / "agent_resume_worker.py"
ROOT = Path(__file__).parents[2]


class Ledger:
    """Tools that record every execution (to count runs)."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.gate: anyio.Event | None = None  # when set, pay waits for it (holding its run's claim)

        @tool
        async def pay(amount: int) -> str:
            """Pay an amount.

            Args:
                amount: how much.
            """
            if self.gate is not None:
                await self.gate.wait()
            self.ran.append(f"pay {amount}")
            await send_tool_gen_action(AgentAction(customized=f"receipt {amount}"))
            return f"paid {amount}"

        @tool
        def lookup(q: str) -> str:
            """Look something up.

            Args:
                q: the query.
            """
            self.ran.append(f"lookup {q}")
            return f"found {q}"

        self.tools = [pay, lookup]


def needs_approval(name: str, arguments: str) -> bool:
    return name == "pay"


def make(
    script: list[Any] | ScriptedChatModel, *, streaming: bool = False, store: Any = None, name: str = "ops", **kw: Any
) -> tuple[Runner, ScriptedChatModel, Ledger]:
    ledger = Ledger()
    model = script if isinstance(script, ScriptedChatModel) else ScriptedChatModel(script)
    guard = ApprovalMiddleware(needs_approval)
    agent = ChatModelAgent(name, "runs operations", model=model, tools=ledger.tools, middlewares=[guard], **kw)
    store = InMemoryCheckPointStore() if store is None else store
    return Runner(agent, enable_streaming=streaming, checkpoint_store=store), model, ledger


PAY_ONE: list[ScriptedResponse] = [calling(call("pay", '{"amount": 5}', id="c1"), content="paying"), "All paid."]


@pytest.mark.parametrize("streaming", [False, True])
async def test_approved_call_runs_on_resume(streaming: bool) -> None:
    runner, model, ledger = make(PAY_ONE, streaming=streaming)
    seen, paused = await drain(runner.query("pay 5", checkpoint_id="job-1"))
    assert [s.kind for s in seen] == ["assistant"]
    assert paused is not None and paused.checkpoint_id == "job-1"
    (ctx,) = paused.interrupt_contexts
    assert ctx.info == ApprovalRequest(tool_name="pay", arguments='{"amount": 5}', call_id="c1")
    assert ctx.address == "agent:ops;tool:pay:c1"
    assert ctx.is_root_cause and ctx.parent is not None
    assert ctx.parent.address == "agent:ops" and not ctx.parent.is_root_cause and ctx.parent.parent is None
    assert ledger.ran == []  # the guard held the call back
    store = runner.checkpoint_store
    assert store is not None and await store.list() == ["job-1"]

    run = runner.resume("job-1", targets={ctx.id: ApprovalDecision(approved=True)})
    seen, paused = await drain(run)
    assert paused is None
    assert [s.kind for s in seen] == ["tool:pay", "assistant"]
    assert [s.content for s in seen] == ["paid 5", "All paid."]
    assert seen[0].action == AgentAction(customized="receipt 5")  # the restored state took the tool's action
    assert [s.streaming for s in seen] == [False, streaming]  # the checkpoint's streaming mode
    assert ledger.ran == ["pay 5"]
    assert run.termination_reason == "completed"
    assert run.final_message is not None and run.final_message.content == "All paid."
    # the model saw the whole conversation, the approved tool's result last
    assert [(m.role, m.content) for m in model.calls[1].messages] == [
        ("user", "pay 5"),
        ("assistant", "paying"),
        ("tool", "paid 5"),
    ]
    assert [c.streaming for c in model.calls] == [streaming, streaming]
    assert await store.list() == []  # retention: a completed run's checkpoint is deleted


@pytest.mark.parametrize("streaming", [False, True])
async def test_rejected_call_never_runs_and_the_model_is_told_why(streaming: bool) -> None:
    runner, model, ledger = make(PAY_ONE, streaming=streaming)
    _, paused = await drain(runner.query("pay 5", checkpoint_id="job-1"))
    assert paused is not None
    decision = ApprovalDecision(approved=False, reason="over budget")
    seen, paused = await drain(runner.resume("job-1", targets={paused.ids[0]: decision}))
    assert paused is None
    assert [s.kind for s in seen] == ["tool:pay", "assistant"]
    expected = "The call to tool 'pay' was rejected by the user and was not executed: over budget"
    assert rejection_message("pay", "over budget") == expected
    assert seen[0].content == expected and seen[0].action is None
    assert ledger.ran == []
    last = model.calls[1].messages[-1]
    assert (last.role, last.content, last.tool_call_id, last.tool_name) == ("tool", expected, "c1", "pay")


async def test_decision_as_a_mapping_and_rejection_without_reason() -> None:
    runner, _, ledger = make(PAY_ONE)
    _, paused = await drain(runner.query("pay 5", checkpoint_id="j"))
    assert paused is not None
    seen, _ = await drain(runner.resume("j", targets={paused.ids[0]: {"approved": False}}))
    assert seen[0].content == "The call to tool 'pay' was rejected by the user and was not executed (no reason given)"
    assert ledger.ran == []


@pytest.mark.parametrize("streaming", [False, True])
async def test_parallel_approvals_resumed_one_by_one(streaming: bool) -> None:
    script = [
        calling(
            call("lookup", '{"q": "invoice"}', id="c1"),
            call("pay", '{"amount": 5}', id="c2"),
            call("pay", '{"amount": 7}', id="c3"),
        ),
        "Done.",
    ]
    runner, model, ledger = make(script, streaming=streaming)
    seen, paused = await drain(runner.query("settle", checkpoint_id="job"))
    # the call needing no approval ran in the same round; both payments wait
    assert [s.kind for s in seen] == ["assistant", "tool:lookup"]
    assert ledger.ran == ["lookup invoice"]
    assert paused is not None
    first, second = paused.interrupt_contexts
    assert [c.address for c in (first, second)] == ["agent:ops;tool:pay:c2", "agent:ops;tool:pay:c3"]
    assert [c.info.call_id for c in (first, second)] == ["c2", "c3"]

    seen, paused = await drain(runner.resume("job", targets={first.id: ApprovalDecision(approved=True)}))
    assert [s.content for s in seen] == ["paid 5"]
    assert paused is not None
    (still,) = paused.interrupt_contexts
    assert still.id == second.id  # the undecided call keeps its interrupt id
    assert still.address == "agent:ops;tool:pay:c3"
    assert ledger.ran == ["lookup invoice", "pay 5"]
    assert len(model.calls) == 1  # the round is not over: the model was not called again

    seen, paused = await drain(runner.resume("job", targets={second.id: ApprovalDecision(approved=True)}))
    assert paused is None
    assert [s.content for s in seen] == ["paid 7", "Done."]
    assert ledger.ran == ["lookup invoice", "pay 5", "pay 7"]  # nothing ran twice
    assert [(m.role, m.content) for m in model.calls[1].messages] == [
        ("user", "settle"),
        ("assistant", ""),
        ("tool", "found invoice"),
        ("tool", "paid 5"),
        ("tool", "paid 7"),
    ]


async def test_per_call_predicate_sees_the_raw_arguments() -> None:
    seen_args: list[tuple[str, str]] = []

    def big_payments(name: str, arguments: str) -> bool:
        seen_args.append((name, arguments))
        return name == "pay" and json.loads(arguments)["amount"] > 100

    ledger = Ledger()
    model = ScriptedChatModel(
        [calling(call("pay", '{"amount": 5}', id="a"), call("pay", '{"amount": 500}', id="b")), "ok"]
    )
    guard = ApprovalMiddleware(big_payments)
    agent = ChatModelAgent("ops", "runs operations", model=model, tools=ledger.tools, middlewares=[guard])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    _, paused = await drain(runner.query("pay", checkpoint_id="j"))
    assert ("pay", '{"amount": 500}') in seen_args
    assert ledger.ran == ["pay 5"]
    assert paused is not None and [c.info.call_id for c in paused.interrupt_contexts] == ["b"]


async def test_untargeted_resume_pauses_again_and_keeps_the_checkpoint() -> None:
    runner, _, ledger = make(PAY_ONE)
    _, paused = await drain(runner.query("pay 5", checkpoint_id="j"))
    assert paused is not None
    seen, again = await drain(runner.resume("j"))
    assert seen == [] and again is not None and again.ids == paused.ids
    store = runner.checkpoint_store
    assert store is not None and await store.list() == ["j"]
    assert ledger.ran == []


async def test_counters_and_session_values_survive_the_pause() -> None:
    script = [calling(call("pay", '{"amount": 5}', id="c1")), "ok"]
    runner, model, _ = make(script, output_key="answer", model_config=ModelConfig(tool_choice="required"))
    runner.session_values["user"] = "alice"
    first = runner.query("pay", checkpoint_id="j")
    _, paused = await drain(first)
    assert paused is not None and first.termination_reason == "interrupted" and first.final_message is None
    tokens = first.total_tokens
    assert tokens > 0
    # a runner of another worker: empty session values, the same store
    other = Runner(runner.agent, checkpoint_store=runner.checkpoint_store)
    resumed = other.resume("j", targets={paused.ids[0]: ApprovalDecision(approved=True)})
    await drain(resumed)
    assert resumed.session_values == {"user": "alice", "answer": "ok"}
    assert other.session_values == {}  # the runner's defaults are not the run's session
    assert resumed.total_tokens > tokens
    # tool_choice applies to the run's first model call only, even across the pause
    assert [c.options.tool_choice for c in model.calls] == ["required", None]


async def test_a_tool_calling_interrupt_itself() -> None:
    @tool
    def confirm(question: str) -> str:
        """Ask the user.

        Args:
            question: the question.
        """
        ctx = get_resume_context()
        if not ctx.is_target:
            raise interrupt({"ask": question})
        return f"user said {ctx.data}"

    model = ScriptedChatModel([calling(call("confirm", '{"question": "sure?"}', id="q1")), "fine"])
    runner = Runner(
        ChatModelAgent("ops", "d", model=model, tools=[confirm]), checkpoint_store=InMemoryCheckPointStore()
    )
    _, paused = await drain(runner.query("go", checkpoint_id="j"))
    assert paused is not None
    (ctx,) = paused.interrupt_contexts
    assert (ctx.address, ctx.info) == ("agent:ops;tool:confirm:q1", {"ask": "sure?"})
    seen, _ = await drain(runner.resume("j", targets={ctx.id: "yes"}))
    assert [s.content for s in seen] == ["user said yes", "fine"]


async def test_without_a_store_the_interrupt_event_still_arrives() -> None:
    ledger = Ledger()
    guard = ApprovalMiddleware(needs_approval)
    agent = ChatModelAgent("ops", "d", model=ScriptedChatModel(PAY_ONE), tools=ledger.tools, middlewares=[guard])
    runner = Runner(agent)
    _, paused = await drain(runner.query("pay"))
    assert paused is not None and paused.checkpoint_id is None and len(paused.ids) == 1
    with pytest.raises(ValueError, match="no checkpoint store"):
        runner.query("pay", checkpoint_id="j")
    with pytest.raises(ValueError, match="failed to resume: the runner has no checkpoint store"):
        runner.resume("j")
    with pytest.raises(GraphBuildError, match=r"object is not a checkpoint store: it lacks get\(\), set\(\)"):
        Runner(agent, checkpoint_store=object())  # type: ignore[arg-type]


async def test_resume_of_an_unknown_id_raises() -> None:
    runner, _, _ = make(PAY_ONE)
    run = runner.resume("nope")
    with pytest.raises(CheckpointNotFoundError, match=r"checkpoint\[nope\] not exist") as info:
        await run.__anext__()
    reason: str = info.value.reason  # "not_found" is adk's addition to compose's reasons
    assert reason == "not_found" and isinstance(info.value, CheckpointError)
    with pytest.raises(StopAsyncIteration):
        await run.__anext__()
    await run.aclose()


async def test_resume_with_an_unknown_interrupt_id_raises_and_keeps_the_checkpoint() -> None:
    runner, _, _ = make(PAY_ONE)
    _, paused = await drain(runner.query("pay", checkpoint_id="j"))
    assert paused is not None
    async with runner.resume("j", targets={"bogus": ApprovalDecision(approved=True)}) as run:
        with pytest.raises(InterruptNotFoundError, match=r"\['bogus'\] are not among its interrupt ids") as info:
            await run.__anext__()
    assert info.value.unknown == ["bogus"] and info.value.known == sorted(paused.ids)
    assert isinstance(info.value, ValueError)
    seen, _ = await drain(runner.resume("j", targets={paused.ids[0]: ApprovalDecision(approved=True)}))
    assert [s.content for s in seen] == ["paid 5", "All paid."]


async def test_bad_resume_data_fails_the_run_with_an_error_event() -> None:
    runner, _, ledger = make(PAY_ONE)
    _, paused = await drain(runner.query("pay", checkpoint_id="j"))
    assert paused is not None
    seen, _ = await drain(runner.resume("j", targets={paused.ids[0]: "yes please"}))
    assert [s.kind for s in seen] == ["error"]
    assert "must be an ApprovalDecision" in str(seen[0].error.__cause__ if seen[0].error else "")
    assert ledger.ran == []
    store = runner.checkpoint_store
    assert store is not None and await store.list() == ["j"]  # a failed resume keeps the checkpoint


async def test_a_failed_resume_releases_the_checkpoint_for_another_try() -> None:
    failing = ScriptedChatModel(PAY_ONE, fail_at_call={1: RuntimeError("model down")})  # the first answer fails
    runner, _, ledger = make(failing)
    _, paused = await drain(runner.query("pay", checkpoint_id="j"))
    assert paused is not None
    decision = {paused.ids[0]: ApprovalDecision(approved=True)}
    seen, _ = await drain(runner.resume("j", targets=decision))
    assert [s.kind for s in seen] == ["tool:pay", "error"]
    error = seen[1].error
    assert isinstance(error, NodeRunError) and str(error.__cause__) == "model down"
    store = runner.checkpoint_store
    assert store is not None and await store.list() == ["j"]
    seen, _ = await drain(runner.resume("j", targets=decision))
    assert [s.content for s in seen] == ["paid 5", "All paid."]
    assert ledger.ran == ["pay 5", "pay 5"]  # the failed attempt's round is re-run: its results were not saved


async def test_closing_a_resumed_run_early_releases_its_claim() -> None:
    runner, _, _ = make(PAY_ONE)
    _, paused = await drain(runner.query("pay", checkpoint_id="j"))
    assert paused is not None
    decision = {paused.ids[0]: ApprovalDecision(approved=True)}
    async with runner.resume("j", targets=decision) as run:
        event = await run.__anext__()
        await event.aclose()
    seen, _ = await drain(runner.resume("j", targets=decision))
    assert [s.content for s in seen] == ["paid 5", "All paid."]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        return InMemoryCheckPointStore()
    return SQLiteCheckPointStore(str(tmp_path / "checkpoints.db"))


async def test_concurrent_resumes_exactly_one_wins(store: Any, no_task_leaks: None) -> None:
    runner, _, ledger = make(PAY_ONE, store=store)
    _, paused = await drain(runner.query("pay", checkpoint_id="j"))
    assert paused is not None
    decision = {paused.ids[0]: ApprovalDecision(approved=True)}
    outcomes: list[str] = []
    ledger.gate = anyio.Event()  # the winner waits in the approved tool until every loser was refused

    async def resume() -> None:
        try:
            seen, _ = await drain(runner.resume("j", targets=decision))
        except CheckpointError as e:
            outcomes.append(e.reason)
            if len(outcomes) == 3:
                assert ledger.gate is not None
                ledger.gate.set()
        else:
            outcomes.append(" / ".join(s.content for s in seen))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(resume)
    assert sorted(outcomes) == ["claimed", "claimed", "claimed", "paid 5 / All paid."]
    assert ledger.ran == ["pay 5"]
    assert await store.list() == []
    with pytest.raises(CheckpointNotFoundError):
        await drain(runner.resume("j", targets=decision))
    await store.aclose()


async def test_a_claimed_checkpoint_is_refused_while_its_resume_runs() -> None:
    runner, _, _ = make(PAY_ONE)
    _, paused = await drain(runner.query("pay", checkpoint_id="j"))
    assert paused is not None
    decision = {paused.ids[0]: ApprovalDecision(approved=True)}
    async with runner.resume("j", targets=decision) as winner:
        first = await winner.__anext__()
        with pytest.raises(CheckpointError, match="being resumed by another run") as info:
            await drain(runner.resume("j", targets=decision))
        assert info.value.reason == "claimed"
        rest = [await reduce(first)] + [await reduce(e) async for e in winner]
    assert [s.content for s in rest] == ["paid 5", "All paid."]


@pytest.mark.parametrize("approved", [True, False])
async def test_the_guard_holds_back_streaming_tools_too(approved: bool) -> None:
    ran: list[str] = []

    @tool
    async def transfer(amount: int) -> Any:
        """Transfer an amount, reporting progress.

        Args:
            amount: how much.
        """
        ran.append(f"transfer {amount}")
        yield "sending "
        yield f"{amount}"

    script: list[ScriptedResponse] = [calling(call("transfer", '{"amount": 7}', id="t1")), "Done."]
    agent = ChatModelAgent(
        "ops", "runs operations", model=ScriptedChatModel(script), tools=[transfer],
        middlewares=[ApprovalMiddleware(lambda name, args: name == "transfer")],
    )
    runner = Runner(agent, enable_streaming=True, checkpoint_store=InMemoryCheckPointStore())
    _, paused = await drain(runner.query("send 7", checkpoint_id="s"))
    assert paused is not None and ran == []
    (ctx,) = paused.interrupt_contexts
    assert ctx.info == ApprovalRequest(tool_name="transfer", arguments='{"amount": 7}', call_id="t1")
    decision = ApprovalDecision(approved=approved, reason=None if approved else "over the limit")
    seen, again = await drain(runner.resume("s", targets={ctx.id: decision}))
    assert again is None
    assert [s.kind for s in seen] == ["tool:transfer", "assistant"]
    assert seen[0].streaming
    if approved:
        assert seen[0].content == "sending 7" and ran == ["transfer 7"]
    else:
        assert seen[0].content == rejection_message("transfer", "over the limit") and ran == []


async def test_a_pause_that_cannot_be_saved_fails_naming_the_session_value() -> None:
    runner, _, ledger = make(PAY_ONE)
    runner.session_values["db"] = object()  # a live handle: no JSON form
    run = runner.query("pay", checkpoint_id="j")
    seen = [await reduce(e) async for e in run]
    assert [s.kind for s in seen] == ["assistant", "error"]
    error = seen[-1].error
    assert isinstance(error, CheckpointError) and error.reason == "encode"
    assert "session value 'db' (object) cannot be saved in a checkpoint" in str(error)
    assert run.termination_reason == "error" and ledger.ran == []
    assert runner.checkpoint_store is not None and await runner.checkpoint_store.list() == []


async def test_a_stale_claim_of_a_dead_worker_is_taken_over() -> None:
    runner, _, ledger = make(PAY_ONE)
    _, paused = await drain(runner.query("pay", checkpoint_id="j"))
    assert paused is not None
    store = runner.checkpoint_store
    assert await store.claim("j", "worker-that-died")  # type: ignore[union-attr]
    decision = {paused.ids[0]: ApprovalDecision(approved=True)}
    with pytest.raises(CheckpointError) as info:
        await drain(runner.resume("j", targets=decision))
    assert info.value.reason == "claimed"  # by default a claim is never taken over
    runner.claim_stale_after = 0.0
    seen, again = await drain(runner.resume("j", targets=decision))
    assert again is None and [s.content for s in seen] == ["paid 5", "All paid."]
    assert ledger.ran == ["pay 5"]


async def test_corrupted_and_foreign_checkpoints_are_rejected() -> None:
    runner, _, ledger = make(PAY_ONE)
    store = runner.checkpoint_store
    assert store is not None
    _, paused = await drain(runner.query("pay", checkpoint_id="good"))
    assert paused is not None
    good = await store.get("good")
    assert good is not None
    header, _, body = good.partition(b"\n")

    async def reason(data: bytes) -> str:
        await store.set("bad", data)
        with pytest.raises(CheckpointError) as info:
            await drain(runner.resume("bad"))
        return info.value.reason

    assert await reason(b"\x00garbage") == "not_checkpoint"
    assert await reason(header + b"\n" + body.replace(b"pay", b"PAY", 1)) == "digest"
    assert await reason(good[:-20]) == "digest"
    # a plain graph's checkpoint under the id: another kind
    g = Graph[str, str]()

    async def ask(x: str) -> str:
        raise interrupt("?")

    g.add_lambda_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    with pytest.raises(GraphInterrupt):
        await g.compile(checkpoint_store=store).invoke("x", checkpoint_id="graph")
    assert await reason(await store.get("graph") or b"") == "kind"
    # another agent's checkpoint
    other, _, _ = make(PAY_ONE, store=store, name="other")
    await drain(other.query("pay", checkpoint_id="theirs"))
    with pytest.raises(CheckpointError, match="fingerprint") as info:
        await drain(runner.resume("theirs"))
    assert info.value.reason == "fingerprint"
    # the good one is untouched by all this
    seen, _ = await drain(runner.resume("good", targets={paused.ids[0]: ApprovalDecision(approved=True)}))
    assert [s.content for s in seen] == ["paid 5", "All paid."] and ledger.ran == ["pay 5"]


async def test_checkpoints_hold_json_not_pickle() -> None:
    runner, _, _ = make(PAY_ONE)
    _, paused = await drain(runner.query("pay", checkpoint_id="j"))
    store = runner.checkpoint_store
    assert store is not None
    data = await store.get("j")
    assert data is not None
    header, _, body = data.partition(b"\n")
    assert json.loads(header)["kind"] == "agent-run"
    payload = json.loads(body)
    assert payload["agent_name"] == "ops" and payload["interrupts"] == {
        paused.ids[0]: "agent:ops;tool:pay:c1"  # type: ignore[union-attr]
    }
    assert json.loads(payload["state"]["graph"].partition("\n")[0])["kind"] == "graph-run"


async def test_interrupts_are_not_reported_as_tool_failures() -> None:
    events: list[TelemetryEvent] = []
    ledger = Ledger()
    guard = ApprovalMiddleware(needs_approval)
    agent = ChatModelAgent("ops", "d", model=ScriptedChatModel(PAY_ONE), tools=ledger.tools, middlewares=[guard])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore(), telemetry=[events.append])
    await drain(runner.query("pay", checkpoint_id="j"))
    assert [e.name for e in events if e.name.startswith("tool.")] == ["tool.call.started"]


def test_the_agent_state_round_trips_through_json() -> None:
    # checkpoints serialise the graph state with a TypeAdapter of its declared type
    action = AgentAction(
        exit=True,
        transfer_to_agent=TransferToAgentAction("billing"),
        break_loop=BreakLoopAction("ops", done=True, current_iterations=2),
        customized={"receipt": 5},
    )
    st = State(
        messages=[calling(call("pay", '{"amount": 5}', id="c1"))],
        has_return_directly=True,
        return_directly_tool_call_id="c1",
        tool_gen_actions={"c1": action},
        agent_name="ops",
        remaining_iterations=3,
    )
    adapter = TypeAdapter(State)
    back = adapter.validate_json(adapter.dump_json(st))
    assert dataclasses.asdict(back) == dataclasses.asdict(st)  # State compares by identity


async def test_runs_without_a_pause_write_nothing() -> None:
    store = InMemoryCheckPointStore()
    ledger = Ledger()
    model = ScriptedChatModel([calling(call("lookup", '{"q": "x"}')), "ok"] * 3)
    runner = Runner(ChatModelAgent("ops", "d", model=model, tools=ledger.tools), checkpoint_store=store)
    for i in range(3):
        events: list[AgentEvent] = [e async for e in runner.query("hi", checkpoint_id=f"r{i}")]
        assert len(events) == 3
    assert await store.list() == []


# ---------------------------------------------------------------------------------------------------------------
# Across processes


def worker(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(WORKER), *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def run_then_resume(kind: str, where: str, log: Path, streaming: bool) -> None:
    mode = "stream" if streaming else "invoke"
    first = worker("run", kind, where, str(log), mode)
    assert first.returncode == -9, first.stderr  # killed by SIGKILL right after the interrupt event
    lines = [json.loads(line) for line in first.stdout.strip().splitlines()]
    assert [e["kind"] for e in lines] == ["assistant", "tool:lookup", "interrupt"]
    paused = lines[-1]
    assert paused["address"] == "agent:ops;tool:pay:c2"
    assert paused["info"] == {"tool_name": "pay", "arguments": '{"amount": 42}', "call_id": "c2"}
    assert log.read_text().splitlines() == ["lookup invoice"]

    second = worker("resume", kind, where, str(log), mode, paused["id"])
    assert second.returncode == 0, second.stderr
    *events, summary = [json.loads(line) for line in second.stdout.strip().splitlines()]
    assert [(e["kind"], e["content"]) for e in events] == [
        ("tool:pay", "paid 42"),
        ("assistant", "done: found invoice; paid 42"),
    ]
    assert summary["streaming"] == [streaming]  # the resumed run kept the checkpoint's mode
    # nothing lost: the whole conversation reached the model in the new process, with the session values
    assert summary["model_saw"] == [
        ["system", "You run operations."],
        ["user", "settle invoice"],
        ["assistant", ""],
        ["tool", "found invoice"],
        ["tool", "paid 42"],
    ]
    assert summary["session_values"] == {"user": "alice", "answer": "done: found invoice; paid 42"}
    assert summary["remaining_checkpoints"] == []
    assert log.read_text().splitlines() == ["lookup invoice", "pay 42"]  # no tool ran twice


@pytest.mark.slow
@pytest.mark.parametrize("streaming", [False, True])
def test_resume_in_a_fresh_process_from_sqlite(tmp_path: Path, streaming: bool) -> None:
    run_then_resume("sqlite", str(tmp_path / "checkpoints.db"), tmp_path / "tools.log", streaming)


@pytest.mark.slow
def test_resume_in_a_fresh_process_from_postgres(tmp_path: Path, pg_server: Any) -> None:
    run_then_resume("postgres", pg_server.dsn, tmp_path / "tools.log", streaming=True)


async def test_runner_entry_points_in_a_cancelled_scope_run_nothing() -> None:
    """Iterating ``run`` / ``query`` / ``resume`` is a cancellation point: in an already-cancelled scope the
    model is not called, no checkpoint is claimed, and the cancellation is raised; the run is left as it was."""
    runner, model, ledger = make(PAY_ONE)
    _, paused = await drain(runner.query("pay 5", checkpoint_id="job"))
    assert paused is not None and len(model.calls) == 1
    runs = [
        runner.query("hello"),
        runner.run([user_message("hello")]),
        runner.resume("job", targets={paused.ids[0]: ApprovalDecision(approved=True)}),
    ]
    for run in runs:
        async with run:
            with anyio.CancelScope() as scope:
                scope.cancel()
                await run.__anext__()
                pytest.fail("the iteration did not raise the cancellation")
            assert scope.cancelled_caught
    assert len(model.calls) == 1 and ledger.ran == []
    # the checkpoint was not claimed: it resumes as usual
    seen, again = await drain(runner.resume("job", targets={paused.ids[0]: ApprovalDecision(approved=True)}))
    assert again is None and [s.content for s in seen] == ["paid 5", "All paid."]


@pytest.mark.parametrize("streaming", [False, True])
async def test_resume_all_approves_every_pending_call(streaming: bool) -> None:
    script = [calling(call("pay", '{"amount": 5}', id="c2"), call("pay", '{"amount": 7}', id="c3")), "Done."]
    runner, _, ledger = make(script, streaming=streaming)
    _, paused = await drain(runner.query("settle", checkpoint_id="job"))
    assert paused is not None and len(paused.interrupt_contexts) == 2
    seen, paused = await drain(runner.resume("job", resume_all=ApprovalDecision(approved=True)))
    assert paused is None
    assert sorted(s.content for s in seen[:2]) == ["paid 5", "paid 7"] and seen[2].content == "Done."
    assert sorted(ledger.ran) == ["pay 5", "pay 7"]  # the approved calls run in parallel
