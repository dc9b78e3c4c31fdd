"""The runner's checkpoints under failure (issue 13; issue 12 point 4): a resume of a finished run, a store that
fails at the end of a resume (a wrapper, and a real locked SQLite file), stores with only Eino's get/set, and
stores missing what the runner needs."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from adk.chat_model.agent import ChatModelAgent
from adk.errors import CheckpointNotFoundError
from adk.events import AgentInterruptInfo
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import AgentRun, Runner
from compose.checkpoint import InMemoryCheckPointStore, SQLiteCheckPointStore
from compose.errors import CheckpointClaimedError, CheckpointStoreError, GraphBuildError
from compose.models import ScriptedChatModel
from compose.tools import tool
from tests.adk.helpers import Seen, call, calling, reduce

pytestmark = pytest.mark.anyio

PAY = [calling(call("pay", '{"amount": 5}', id="c1"), content="paying"), "All paid."]


def make(store: Any, on_pay: Any = None) -> tuple[Runner, list[str]]:
    """A runner whose agent pays only after approval; ``on_pay`` runs inside the tool (after the resume's claim)."""
    ran: list[str] = []

    @tool
    async def pay(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: how much.
        """
        if on_pay is not None:
            on_pay()
        ran.append(f"pay {amount}")
        return f"paid {amount}"

    model = ScriptedChatModel([*PAY, "All paid.", "All paid."])  # only the first answer calls the tool
    agent = ChatModelAgent(
        "ops", "pays", model=model, tools=[pay], middlewares=[ApprovalMiddleware(lambda name, args: name == "pay")]
    )
    return Runner(agent, checkpoint_store=store), ran


async def drain(run: AgentRun) -> tuple[list[Seen], AgentInterruptInfo | None]:
    """Every event, reduced, and the interrupt info (if the run paused); leaves the run open."""
    seen: list[Seen] = []
    paused = None
    async for event in run:
        if event.action is not None and event.action.interrupted is not None:
            paused = event.action.interrupted
        else:
            seen.append(await reduce(event))
    return seen, paused


async def pause(runner: Runner) -> dict[str, ApprovalDecision]:
    async with runner.query("pay", checkpoint_id="j") as run:
        _, paused = await drain(run)
    assert paused is not None
    return {paused.ids[0]: ApprovalDecision(approved=True)}


async def test_resuming_a_finished_run_again_is_not_found_and_pays_nothing() -> None:
    runner, ran = make(InMemoryCheckPointStore())
    decision = await pause(runner)
    async with runner.resume("j", targets=decision) as run:
        seen, _ = await drain(run)
    assert [s.content for s in seen] == ["paid 5", "All paid."] and ran == ["pay 5"]
    async with runner.resume("j", targets=decision) as run:
        with pytest.raises(CheckpointNotFoundError, match=r"checkpoint\[j\] not exist"):
            await run.__anext__()
    assert ran == ["pay 5"]


class FailingDelete(InMemoryCheckPointStore):
    def __init__(self) -> None:
        super().__init__()
        self.broken = True

    async def delete(self, checkpoint_id: str) -> None:
        if self.broken:
            raise ConnectionError("server closed the connection")
        await super().delete(checkpoint_id)


async def test_a_failing_delete_ends_the_run_with_one_error_event_and_keeps_the_claim() -> None:
    store = FailingDelete()
    runner, ran = make(store)
    decision = await pause(runner)
    run = runner.resume("j", targets=decision)
    seen, _ = await drain(run)  # no exception escapes the iteration ...
    await run.aclose()  # ... nor aclose()
    assert [s.kind for s in seen] == ["tool:pay", "assistant", "error"]
    error = seen[-1].error
    assert isinstance(error, CheckpointStoreError) and "could not be deleted" in str(error)
    assert "it stays claimed by this run" in str(error) and "delete it once the store works again" in str(error)
    assert isinstance(error.__cause__, ConnectionError)
    assert run.termination_reason == "error"
    assert await store.list() == ["j"]
    store.broken = False
    async with runner.resume("j", targets=decision) as again:  # the payment is not made again
        with pytest.raises(CheckpointClaimedError):
            await again.__anext__()
    assert ran == ["pay 5"]
    await store.delete("j")  # what the error says to do
    assert await store.list() == []


async def resume_until_not_refused(runner: Runner, decision: dict[str, ApprovalDecision]) -> list[Seen] | None:
    """Resume 'j' until it is not refused as claimed: the events of the run, or None when it is gone."""
    with anyio.fail_after(60):
        while True:
            try:
                async with runner.resume("j", targets=decision) as run:
                    seen, _ = await drain(run)
                    return seen
            except CheckpointClaimedError:
                await anyio.sleep(0.1)
            except CheckpointNotFoundError:
                return None


async def test_a_store_down_as_a_resumed_run_completes_never_pays_again(tmp_path: Path) -> None:
    """Issue: the file is locked as the resumed run ends (its checkpoint is neither deleted nor released). The run
    ends with one error event; the claim is kept renewed and the delete retried until the file is free, so no
    later resume pays again, however long after the claim's lifetime it comes."""
    path = tmp_path / "cp.db"
    lock: list[sqlite3.Connection] = []

    def grab() -> None:  # another process starts a long write transaction while the resumed run pays
        if not lock:
            lock.append(sqlite3.connect(path, isolation_level=None))
            lock[0].execute("BEGIN IMMEDIATE")

    async with SQLiteCheckPointStore(path, busy_timeout=0.2, claim_ttl=1.0) as store:
        runner, ran = make(store, on_pay=grab)
        decision = await pause(runner)
        run = runner.resume("j", targets=decision)
        seen, _ = await drain(run)  # the delete times out: one error event, nothing raised
        await run.aclose()
        assert [s.kind for s in seen] == ["tool:pay", "assistant", "error"]
        error = seen[-1].error
        assert isinstance(error, CheckpointStoreError) and "could not be deleted" in str(error)
        assert "the store retries the delete until it works again" in str(error)
        assert run.termination_reason == "error"
        lock[0].execute("COMMIT")
        lock[0].close()
        assert await resume_until_not_refused(runner, decision) is None  # deleted by the store's keeper
        assert ran == ["pay 5"] and await store.list() == []


class EinoStore:
    """Eino's CheckPointStore interface only: get and set."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    async def get(self, checkpoint_id: str) -> bytes | None:
        return self.data.get(checkpoint_id)

    async def set(self, checkpoint_id: str, data: bytes) -> None:
        self.data[checkpoint_id] = data


async def test_a_get_set_store_pauses_and_resumes() -> None:
    store = EinoStore()
    runner, ran = make(store)
    decision = await pause(runner)
    async with runner.resume("j", targets=decision) as run:
        seen, _ = await drain(run)
    assert [s.kind for s in seen] == ["tool:pay", "assistant"] and ran == ["pay 5"]
    assert run.termination_reason == "completed"
    assert list(store.data) == ["j"]  # no delete(): kept, as in Eino


async def test_the_runner_rejects_a_store_missing_what_it_needs() -> None:
    async def method(*args: Any, **kwargs: Any) -> Any:
        return None

    for methods, message in [
        (("get",), r"Runner\(checkpoint_store=\.\.\.\): GetOnly is not a checkpoint store: it lacks set\(\)"),
        (("get", "set", "claim"), r"has claim\(\) but lacks release\(\)"),
    ]:
        store = type("GetOnly", (), dict.fromkeys(methods, method))()
        with pytest.raises(GraphBuildError, match=message):
            make(store)


async def test_cancelling_a_resume_waiting_on_a_locked_sqlite_file_returns_promptly(tmp_path: Path) -> None:
    path = tmp_path / "cp.db"
    async with SQLiteCheckPointStore(path, busy_timeout=20) as store:
        runner, ran = make(store)
        decision = await pause(runner)
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        try:
            run = runner.resume("j", targets=decision)
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain, run)  # waits to claim the checkpoint
                await anyio.wait_all_tasks_blocked()
                started = anyio.current_time()
                tg.cancel_scope.cancel()
            assert anyio.current_time() - started < 3  # not the lock's 20 s
            await run.aclose()
        finally:
            db.execute("COMMIT")
            db.close()
        async with runner.resume("j", targets=decision) as again:
            seen, _ = await drain(again)
        assert [s.content for s in seen] == ["paid 5", "All paid."] and ran == ["pay 5"]
