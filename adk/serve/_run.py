"""One AG-UI run: a ``RunAgentInput`` in, the AG-UI events of the Runner run (or resume) it starts out.

What a client sees, in order: ``RUN_STARTED``; on a resume a ``MESSAGES_SNAPSHOT`` of the thread holding the
paused calls; ``STATE_SNAPSHOT`` of the session values; the mapped events of the run
(``adk.serve._mapping``), with ``STATE_DELTA`` (JSON Patch) after an event that changed the session values;
when the run pauses a ``MESSAGES_SNAPSHOT`` and ``RUN_FINISHED`` with the interrupt outcome; otherwise exactly
one of ``RUN_FINISHED`` (``result``: the final text, or the structured answer) and ``RUN_ERROR{message, code}``
(the error's class name as ``code``; no traceback).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from ag_ui.core import (
    BaseEvent,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
)

from adk.agent import Agent, check_agent
from adk.cancel import Cancellable
from adk.chat_model.agent import ChatModelAgent
from adk.errors import AgentCancelledError, RemoteAgentError, RetryExhaustedError, RunNotFoundError
from adk.events import AgentInterruptInfo
from adk.projection import state_of, state_patch
from adk.runner import Runner
from adk.serve._client_tools import ClientToolCall, Extras, RequestExtras, request_extras
from adk.serve._mapping import EventMapper
from adk.serve._messages import conversation, new_input
from adk.serve._threads import (
    ThreadRecord,
    checkpoint_id_for,
    claim_branch,
    describe,
    edited_calls,
    forget,
    resume_targets,
    save_record,
    session_taken,
    store_edits,
)
from adk.sessions import SessionStore
from compose.checkpoint import CheckPointStore
from compose.errors import (
    ChatModelError,
    ComposeError,
    InterruptNotFoundError,
    MCPServerError,
    MCPToolError,
    NodeRunError,
    ToolArgumentsError,
    ToolError,
)
from compose.schema import Message

logger = logging.getLogger("adk.serve")


@dataclass(slots=True, eq=False)
class ServedAgent:
    """An agent the app serves: its name and description, and the Runner (with its stores) that runs it."""

    name: str
    description: str
    runner: Runner
    sessions: SessionStore
    checkpoints: CheckPointStore
    durable: Any = None  # a DurableClient: runs go to its queue's workers (adk.serve._durable)

    @property
    def agent(self) -> Agent:
        return self.runner.agent


def served_agent(
    name: str, agent: Agent | Runner, session_store: SessionStore, checkpoint_store: CheckPointStore
) -> ServedAgent:
    """The ``ServedAgent`` for ``agent`` (a Runner gets the stores it lacks; a ``ChatModelAgent`` is offered
    the requests' client tools and context)."""
    if isinstance(agent, Runner):
        runner = agent
        if runner.session_store is None:
            runner.session_store = session_store
        if runner.checkpoint_store is None:
            runner.checkpoint_store = checkpoint_store
    else:
        check_agent(agent, f"create_app(agents[{name!r}])")
        runner = Runner(agent, enable_streaming=True, session_store=session_store, checkpoint_store=checkpoint_store)
    root = runner.agent
    if isinstance(root, ChatModelAgent) and not any(isinstance(m, RequestExtras) for m in root.middlewares):
        try:
            root.add_middleware(RequestExtras())
        except ValueError:
            logger.warning("agent %r has run before: requests' client tools and context are not offered to it", name)
    assert runner.session_store is not None and runner.checkpoint_store is not None
    return ServedAgent(name, getattr(root, "description", ""), runner, runner.session_store, runner.checkpoint_store)


# pyeino errors whose text is another party's words (a model provider's answer, a remote agent's, an MCP server's)
_THEIR_WORDS: tuple[type[BaseException], ...] = (ChatModelError, RemoteAgentError, MCPToolError, MCPServerError)
# pyeino errors whose text is whole in itself whatever their cause: a tool's arguments refused names the tool, the
# field and what is wrong with the model's arguments (which the client saw streamed), never the cause's text
_OWN_WORDS: tuple[type[BaseException], ...] = (ToolArgumentsError,)


def _foreign(exc: BaseException) -> BaseException | None:
    """The first error along ``exc``'s causes whose text is not pyeino's own words (a model's, a tool's, a
    library's, a remote's: it may hold paths, URLs, configuration), or None when every message is pyeino's."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if not isinstance(current, ComposeError) or isinstance(current, _THEIR_WORDS):
            return current
        if isinstance(current, _OWN_WORDS):
            return None
        last = getattr(current, "last_error", None)  # RetryExhaustedError names its last attempt's error
        current = last if isinstance(last, BaseException) else current.__cause__
    return None


def _where(exc: BaseException) -> str:
    tool, call = getattr(exc, "tool_name", None), getattr(exc, "call_id", None)
    if isinstance(exc, ToolError) and isinstance(tool, str):
        return f"tool {tool!r}" + (f" (call {call!r})" if isinstance(call, str) else "")
    if isinstance(exc, NodeRunError):
        return f"node [{', '.join(exc.node_path)}]"
    if isinstance(exc, (ChatModelError, RetryExhaustedError)):
        return "the model call"
    if isinstance(exc, RemoteAgentError):
        return "the remote agent"
    return "the run"


class HangUp:
    """A request's hang-up: the server's disconnect listener calls :meth:`hang_up` when its client is gone, and
    the run the request started (``bind``) is cancelled at once and recursively (``adk.cancel``, the one way to
    stop a run from outside): the calls and model stream reads in flight are cut off, what had finished is kept,
    and the run pauses there, leaving its checkpoint."""

    __slots__ = ("_run", "requested")

    def __init__(self) -> None:
        self.requested = False
        self._run: Cancellable | None = None

    def __repr__(self) -> str:
        return f"HangUp(requested={self.requested}, bound={self._run is not None})"

    def bind(self, run: Cancellable) -> None:
        """The request's run (started ``cancellable=True``); a hang-up that came first cancels it at once."""
        self._run = run
        if self.requested:
            run.cancel("immediate", recursive=True)

    def hang_up(self) -> None:
        """The client is gone: cancel the run (idempotent; a no-op for a run that has ended)."""
        self.requested = True
        if self._run is not None:
            self._run.cancel("immediate", recursive=True)


def error_event(exc: BaseException) -> RunErrorEvent:
    """``RUN_ERROR`` for ``exc`` (a node's error as the pyeino error it wraps): ``code`` its class name
    (``InternalError`` for an error that is not pyeino's), ``message`` its text when that is pyeino's own words
    only (a pending interrupt, an unknown run, a busy thread, a limit), else a safe text naming where it failed and
    the class of the error underneath, never that error's text (see :func:`run_error`, which logs it)."""
    while isinstance(exc, NodeRunError) and isinstance(exc.__cause__, ComposeError):
        exc = exc.__cause__
    foreign = _foreign(exc)
    if foreign is None:
        return RunErrorEvent(message=str(exc), code=type(exc).__name__)
    code = type(exc).__name__ if isinstance(exc, ComposeError) else "InternalError"
    message = f"{_where(exc)} failed ({type(foreign).__name__}); the server log has the details"
    return RunErrorEvent(message=message, code=code)


def run_error(exc: BaseException, doing: str) -> RunErrorEvent:
    """:func:`error_event` for ``exc``, logged: an error the client was told in full in one line, any other with
    its traceback (``doing`` names the agent, run and thread or task)."""
    event = error_event(exc)
    if _foreign(exc) is None:
        logger.info("%s failed: %s: %s", doing, event.code, event.message)
    else:
        logger.error("%s failed: %s: %s", doing, type(exc).__name__, exc, exc_info=exc)
    return event


async def _thread_messages(served: ServedAgent, session_id: str, checkpoint_id: str | None) -> list[Message]:
    """The thread's stored messages (``session_id``: its current branch), then the turn of its paused run."""
    session = await served.sessions.load(session_id)
    messages = list(session.messages)
    if checkpoint_id is not None:
        pending = await served.sessions.pending(checkpoint_id)
        if pending is not None:
            messages.extend(pending.messages)
    return messages


def agui_run(
    served: ServedAgent,
    input: RunAgentInput,
    record: ThreadRecord,
    owner: str | None,
    stop: HangUp | None = None,
) -> AsyncIterator[BaseEvent]:
    """The AG-UI events of one run (see the module docstring); ``record`` is the thread's (``claim_thread``). ``stop``
    (the request's): when the client hangs up, the server calls ``stop.hang_up()`` and the run pauses at once,
    leaving its checkpoint (the thread's next run with the same input continues it). A durable run's events are
    ``adk.serve._durable.durable_agui_run``'s."""
    mapper = EventMapper()
    return framed(served, input, mapper, _run(served, input, record, owner, mapper, stop))


async def framed(
    served: ServedAgent, input: RunAgentInput, mapper: EventMapper, body: AsyncIterator[BaseEvent]
) -> AsyncIterator[BaseEvent]:
    """``RUN_STARTED``, the events of ``body`` (the run after it, mapped by ``mapper``), and ``RUN_ERROR`` (with
    what the mapper left open closed first) when it fails."""
    thread_id, run_id = input.thread_id, input.run_id
    yield RunStartedEvent(thread_id=thread_id, run_id=run_id, parent_run_id=input.parent_run_id, protocol_version="1.0")
    token = request_extras.set(Extras(tuple(input.tools or ()), tuple(input.context or ())))
    try:
        async for event in body:
            yield event
    except Exception as exc:
        for event in mapper.abort():
            yield event
        for event in mapper.finish():
            yield event
        yield run_error(exc, f"agent {served.name!r}: run {run_id!r} on thread {thread_id!r}")
    finally:
        request_extras.reset(token)


async def _run(
    served: ServedAgent,
    input: RunAgentInput,
    record: ThreadRecord,
    owner: str | None,
    mapper: EventMapper,
    stop: HangUp | None,
) -> AsyncIterator[BaseEvent]:
    thread_id, run_id = input.thread_id, input.run_id
    runner = served.runner
    checkpoint_id = checkpoint_id_for(thread_id)
    session_id = await branch(served, input, record)
    state = state_of((await served.sessions.load(session_id)).values)
    if record.checkpoint_id is not None and not await served.checkpoints.get(record.checkpoint_id):
        # the paused run's checkpoint is gone (its resume completed but the process stopped before saying so
        # here, or it was deleted): the thread is not paused any more
        record.checkpoint_id, record.interrupts = None, []
        await save_record(served.checkpoints, thread_id, record)
    if record.checkpoint_id is not None and record.cut and not input.resume:
        # a run its client hung up on: the same input again continues it; new input starts afresh
        held = await _thread_messages(served, session_id, record.checkpoint_id)
        if new_input(thread_id, held, input.messages):
            await forget(served.checkpoints, record.checkpoint_id)
            record.checkpoint_id, record.cut, record.turn_runs = None, False, []
            await save_record(served.checkpoints, thread_id, record)
    originals: dict[str, str] = {}
    if record.checkpoint_id is not None:
        pending = record.pending()
        if record.cut and not input.resume:
            targets: dict[str, Any] = {}
        else:
            if not input.resume:
                from adk.errors import InterruptPendingError

                raise InterruptPendingError(thread_id, [i.id for i in pending])
            targets = resume_targets(thread_id, pending, input.resume)
            edits = edited_calls(pending, targets)
            originals = await store_edits(
                served.sessions, session_id, record.checkpoint_id, edits, wait=runner.session_wait
            )
        messages = await _thread_messages(served, session_id, record.checkpoint_id)
        yield MessagesSnapshotEvent(messages=conversation(thread_id, messages))
        run: Any = runner.resume(record.checkpoint_id, targets, cancellable=stop is not None)
    else:
        if input.resume:
            raise InterruptNotFoundError(f"thread {thread_id!r}", [e.interrupt_id for e in input.resume], [])
        stored = await served.sessions.load(session_id)
        turn = new_input(thread_id, stored.messages, input.messages)
        values = dict(input.state) if isinstance(input.state, Mapping) else None
        if values:
            state = {**state, **state_of(values)}
        cancellable = stop is not None
        run = runner.run(
            turn, session_id=session_id, checkpoint_id=checkpoint_id, session_values=values, cancellable=cancellable
        )
    if stop is not None:
        stop.bind(run)
    yield StateSnapshotEvent(snapshot=state)
    paused: AgentInterruptInfo | None = None
    seen: dict[str, Any] | None = None
    event: Any = None
    failed: BaseException | None = None
    async with run:
        try:
            while True:
                # a hang-up cancels the run (``stop``, the server's disconnect listener), which pauses at once and
                # leaves its checkpoint: the request's cancellation must not cut the run's step, nor the read of
                # a model stream (it drives the model: a cut read would break the graph's copy of the stream)
                with anyio.CancelScope(shield=stop is not None):
                    event = await anext(run, None)
                if event is None:
                    break
                if stop is not None and stop.requested:
                    raise _HungUp  # the client is gone: nothing more to send
                if event.error is not None:
                    failed = event.error
                    break
                batches = mapper.map(event)
                try:
                    while True:
                        with anyio.CancelScope(shield=stop is not None):
                            try:
                                batch = await anext(batches, None)
                            except Exception:
                                if stop is not None and stop.requested:
                                    raise _HungUp from None  # the cancel ended the answer's stream
                                raise
                        if batch is None:
                            break
                        for out in batch:
                            yield out
                finally:
                    with anyio.CancelScope(shield=True):
                        await batches.aclose()
                if event.action is not None and event.action.interrupted is not None:
                    paused = event.action.interrupted
                event = None
                if run.session_values != seen:  # values changed (cheap check first: most events change none)
                    seen = dict(run.session_values)
                    now = state_of(seen)
                    if now != state:
                        ops = state_patch(state, now)
                        state = now
                        yield StateDeltaEvent.model_validate({"delta": ops})
        except (_HungUp, GeneratorExit, anyio.get_cancelled_exc_class()) as exc:
            if stop is not None:  # cancelled or closed mid-run: the client hung up
                stop.hang_up()
                await _cut(served, record, run, event, input, checkpoint_id, session_id)
            if isinstance(exc, _HungUp):
                return
            raise
        final = run.final_message
        values = dict(run.session_values)
    if failed is not None:
        if originals and record.checkpoint_id is not None:  # the run stays paused as it was: so do its calls
            await store_edits(served.sessions, session_id, record.checkpoint_id, originals, wait=runner.session_wait)
        raise failed
    if paused is None:
        record.checkpoint_id, record.interrupts, record.cut = None, [], False
        await note_turn(served, thread_id, record, session_id, run_id)
        for out in mapper.finish():
            yield out
        result = mapper.structured if mapper.structured is not None else (final.content if final else None)
        yield RunFinishedEvent(thread_id=thread_id, run_id=run_id, result=result, outcome=RunFinishedSuccessOutcome())
        return
    causes = [c for c in paused.interrupt_contexts if c.is_root_cause]
    if causes and all(isinstance(c.info, ClientToolCall) for c in causes):
        # only client tools are waited for: the run is complete as far as AG-UI goes; keep its turn in the thread
        await _settle(served, session_id, checkpoint_id, values)
        record.checkpoint_id, record.interrupts = None, []
        await note_turn(served, thread_id, record, session_id, run_id)
        for out in mapper.finish():
            yield out
        pending_calls = [c.info.call_id for c in causes]
        outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=pending_calls)
        yield RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=outcome)
        return
    interrupts = [describe(c, checkpoint_id) for c in causes]
    record.checkpoint_id, record.cut = checkpoint_id, False
    record.interrupts = [i.model_dump(mode="json", by_alias=True) for i in interrupts]
    if run_id not in record.turn_runs:
        record.turn_runs.append(run_id)
    await save_record(served.checkpoints, thread_id, record)
    messages = await _thread_messages(served, session_id, checkpoint_id)
    yield MessagesSnapshotEvent(messages=conversation(thread_id, messages))
    for out in mapper.finish(suspended=True):
        yield out
    yield RunFinishedEvent(
        thread_id=thread_id, run_id=run_id, outcome=RunFinishedInterruptOutcome(interrupts=interrupts)
    )


class _HungUp(Exception):
    """The client hung up while the run was in a step or a model stream (its ``HangUp`` cancelled the run)."""


async def _cut(
    served: ServedAgent,
    record: ThreadRecord,
    run: Any,
    event: Any,
    input: RunAgentInput,
    checkpoint_id: str,
    session_id: str,
) -> None:
    """The client hung up mid-run and its ``HangUp`` cancelled the run: read it to its end in a shield (closing
    what it hands out; the Runner saves the run before its cancel's event) and, if it was saved, keep the
    checkpoint in the thread record, so that the thread's next run continues it."""
    saved = False

    def pause_saved(e: Any) -> bool:
        if isinstance(e.error, AgentCancelledError):
            return e.error.checkpoint_id is not None
        return bool(e.action is not None and e.action.interrupted is not None and e.action.interrupted.checkpoint_id)

    with anyio.CancelScope(shield=True) as scope:
        scope.deadline = anyio.current_time() + _HANG_UP_GRACE
        if event is not None:
            saved = pause_saved(event)
            await event.aclose()
        async for rest in run:
            saved = saved or pause_saved(rest)
            await rest.aclose()
        if saved:
            record.checkpoint_id, record.interrupts, record.cut = checkpoint_id, [], True
            if input.run_id not in record.turn_runs:
                record.turn_runs.append(input.run_id)
            await save_record(served.checkpoints, input.thread_id, record)
    if scope.cancelled_caught:
        logger.warning(
            "run %r on thread %r did not pause within %s s of its client's hang-up",
            input.run_id,
            input.thread_id,
            _HANG_UP_GRACE,
        )


_HANG_UP_GRACE = 10.0  # seconds a hung-up run may take to reach its pause


async def branch(served: ServedAgent, input: RunAgentInput, record: ThreadRecord) -> str:
    """The session the run goes on: the thread's current one, or a fork of the session holding the run's
    ``parentRunId`` at that run's turn when the parent is not the thread's last run (see ``adk.serve._threads``).

    Raises:
        RunNotFoundError: ``parentRunId`` names no run of the thread.
    """
    thread_id, parent = input.thread_id, input.parent_run_id
    current = record.session_of(thread_id)
    if parent is None or input.resume or record.checkpoint_id is not None or record.durable is not None:
        return current  # a pause is answered first (AG-UI: pending interrupts block new input)
    if parent in record.turn_runs or parent == input.run_id:
        return current
    found = record.runs.get(parent)
    if found is None:
        raise RunNotFoundError(thread_id, parent, list(record.runs))
    session_id, turn = found
    if session_id == current and turn == (await served.sessions.load(current)).turns - 1:
        return current  # the parent is the last run: no branch
    new, n = f"{thread_id}~{input.run_id}", 1
    while await session_taken(served.sessions, served.checkpoints, new):  # a thread of that name exists already
        n += 1
        new = f"{thread_id}~{input.run_id}~{n}"
    await served.runner.fork(session_id, at_turn=turn + 1, new_session_id=new)
    await claim_branch(served.checkpoints, new, thread_id, record)
    record.session = new
    await save_record(served.checkpoints, thread_id, record)
    return new


async def note_turn(served: ServedAgent, thread_id: str, record: ThreadRecord, session_id: str, run_id: str) -> None:
    """Record that the runs of the turn just appended to ``session_id`` (``run_id`` and the paused runs before
    it) made its last turn, so that a later ``parentRunId`` finds it."""
    turn = (await served.sessions.load(session_id)).turns - 1
    for run in [*record.turn_runs, run_id]:
        record.runs[run] = [session_id, turn]
    record.turn_runs = []
    await save_record(served.checkpoints, thread_id, record)


async def _settle(served: ServedAgent, thread_id: str, checkpoint_id: str, values: Mapping[str, Any]) -> None:
    """Append the paused run's turn to the thread as a completed one and drop its checkpoint (the run waits for
    client tools only: the client's next run carries their results as its input)."""
    sessions = served.sessions
    pending = await sessions.pending(checkpoint_id)
    if pending is None:
        return
    lease = await sessions.acquire(thread_id, wait=served.runner.session_wait)
    try:
        await sessions.commit(lease, pending.messages, values, pending=checkpoint_id)
    except BaseException:
        await sessions.release(lease)
        raise
    await forget(served.checkpoints, checkpoint_id)
