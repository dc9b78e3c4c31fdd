"""Durable runs behind the AG-UI server: ``create_app(..., durable=DurableClient(dsn))``.

A run is not run in the server process: it is submitted to the DBOS queue of ``adk.durable`` workers (one
workflow per thread turn, its id derived from the thread and the turn's first run id, so submitting is
idempotent), and the server streams it back from the run's durable event stream, mapped to AG-UI by the
server's :class:`~adk.serve.EventMapper` (the run's journal projected as in-process runs' events are:
``adk.projection``)
A worker killed mid-run has its run taken over by another (``adk.durable``); the server just goes on reading.

Reconnecting. The AG-UI events of a durable run are a function of its durable events (message ids are drawn
from a counter per AG-UI run, not at random), so any server process maps a run to the same events. Each SSE
frame carries its index as ``id:``. A client that lost its stream (the connection dropped, the server
restarted) POSTs the same ``RunAgentInput`` again (same ``threadId`` and ``runId``): it gets the run's whole
stream again, from ``RUN_STARTED``, live until the run ends or pauses; with the ``Last-Event-ID`` header (SSE's
reconnect) only the frames after that index, so that what it saw and what it gets is one valid run.

The turn. The worker's Runner has no session store: the server submits the thread's messages and the turn's
input as the conversation, with the session values, and keeps the turn in the thread record (``durable``)
while it runs. When the run ends, whichever server sees it first (the one streaming it, or the next request
on the thread) appends the turn to the session (the input, then the run's own messages under the ids the
client saw, and the run's final session values), once.

Pauses. A durable run that pauses waits in its workflow for its resume data (``DurableHandle.resume``); the
server records the pause's interrupts in the thread record and ends the AG-UI run with the interrupt outcome
as usual. The next ``RunAgentInput`` with ``resume`` entries sends the decisions to the workflow and streams the
rest as a new AG-UI run (its first durable event is the one after the pause).

Not in durable mode (the workers run the agent, not the server): client tools and client ``context`` (the
request's tools never reach the worker), an ``output_type`` agent's structured ``result`` (the final text is
sent), ``STATE_DELTA`` while the run goes (one delta before ``RUN_FINISHED`` instead).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import anyio
from ag_ui.core import (
    BaseEvent,
    Interrupt,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    StateDeltaEvent,
    StateSnapshotEvent,
)

from adk.errors import DurableRunError, InterruptPendingError, SessionBusyError
from adk.middlewares.approval import ApprovalRequest
from adk.projection import Projection, Record, message_id, stamp, state_of, state_patch
from adk.serve._mapping import EventMapper, agui_events
from adk.serve._messages import conversation, new_input
from adk.serve._run import branch, framed
from adk.serve._threads import ThreadRecord, describe, load_record, resume_targets, save_record
from adk.sessions.base import decode_messages, encode_messages
from compose.errors import InterruptNotFoundError
from compose.interrupt import InterruptCtx
from compose.schema import Message

__all__ = ["catch_up", "durable_agui_run", "durable_client", "durable_run", "numbered", "stable_ids"]

logger = logging.getLogger("adk.serve")
_TERMINAL = {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}
_SCAN_IDLE = 0.5  # seconds without an event after which a run read to see where it is counts as waiting


def stable_ids(thread_id: str, run_id: str) -> Callable[[str], str]:
    """The ids of one AG-UI run's messages and subagent runs: ``<kind>-<run tag>-<n>``, the same on every
    mapping of the run."""
    tag = hashlib.sha1(f"{thread_id}\0{run_id}".encode()).hexdigest()[:10]
    counter = itertools.count()
    return lambda kind: f"{kind}-{tag}-{next(counter)}"


def workflow_id(agent: str, thread_id: str, run_id: str) -> str:
    """The durable run of the thread turn that AG-UI run ``run_id`` started."""
    return f"pyeino.serve/{agent}/{thread_id}/{run_id}"


class _Journal:
    """A durable run's journal (its durable events) from an offset, projected (``adk.projection``).

    Token events stream an answer (its whole ``message`` event, which follows, is not projected again); a token
    of another attempt (the call ran again after its worker died) ends the answer as a retried one, the retry
    being a new answer. Tokens of models inside agent tools are skipped (their whole messages follow). The
    journal stops at a pause or an error (``end``); ``messages`` are the run's own messages in order, stamped with
    the ids they were projected under.
    """

    def __init__(self, events: AsyncIterator[Any], offset: int, projection: Projection) -> None:
        self._events = events
        self.offset = offset  # of the next event to read
        self.projection = projection
        self.end: Any = None
        self.messages: list[Message] = []

    async def records(self) -> AsyncIterator[list[Record]]:
        p = self.projection
        try:
            async for event in self._events:
                self.offset += 1
                kind = event.kind
                if kind in ("interrupted", "error"):
                    self.end = event
                    break
                out: list[Record] = []
                answer = p.answer
                if kind == "token":
                    if event.internal:
                        continue
                    if answer is not None and answer.attempt != event.attempt:
                        p.close_answer(out, "answer_retried")  # its worker stopped while the model streamed
                        answer = None
                    if answer is None:
                        sub = p.attribute(event.agent_name, tuple(event.run_path), False, out)
                        answer = p.open_answer(event.agent_name, sub, out, event.attempt)
                    answer.chunk(event.message, out)
                elif kind == "message":
                    if answer is not None:
                        p.close_answer(out)
                        if event.role == "assistant" and not event.internal:  # the streamed answer, whole
                            stamp(event.message, answer.message_id)
                            self.messages.append(event.message)
                            yield out
                            continue
                    self._whole(event, out)
                if out:
                    yield out
            out = []
            p.close_answer(out)  # a streamed answer the journal ends in (its run paused, failed or is read so far)
            if out:
                yield out
        finally:
            close = getattr(self._events, "aclose", None)
            if close is not None:  # stopped at a pause or an error, the durable stream is not read to its end
                with anyio.CancelScope(shield=True):
                    await close()

    def _whole(self, event: Any, out: list[Record]) -> None:
        p, path = self.projection, tuple(event.run_path)
        sub = p.attribute(event.agent_name, path, event.internal, out)
        message = event.message
        if message is None:
            return
        if event.role == "tool":
            p.result(path, event.tool_name, message, sub, out)
        else:
            answer = p.open_answer(event.agent_name, sub, out)
            stamp(message, answer.message_id)
            answer.chunk(message, out)
            p.close_answer(out)
        if not event.internal:
            self.messages.append(message)


def _contexts(interrupts: Sequence[Any]) -> list[InterruptCtx]:
    """The root causes of a durable pause as interrupt contexts (an approval's info as its request again)."""
    addresses = [i.address for i in interrupts]
    out = []
    for i in interrupts:
        if any(a != i.address and a.startswith(i.address + ";") for a in addresses):
            continue  # an enclosing composite
        info = i.info
        if isinstance(info, Mapping) and set(info) == {"tool_name", "arguments", "call_id"}:
            info = ApprovalRequest.model_validate(info)
        out.append(InterruptCtx(i.id, i.address, info))
    return out


class _Thread:
    """One request's view of a thread in durable mode: the served agent, the thread and its record."""

    def __init__(self, served: Any, thread_id: str, record: ThreadRecord) -> None:
        self.served = served
        self.thread_id = thread_id
        self.record = record
        self.client = served.durable

    def failed(self, run_id: str, error_type: str, text: str) -> RunErrorEvent:
        """``RUN_ERROR`` for a run its worker reports failed: the error's class, not its text (which may be a
        model's or a tool's; the server log has it, as for a run in process)."""
        logger.error(
            "agent %r: durable run %r on thread %r failed: %s: %s",
            self.served.name,
            run_id,
            self.thread_id,
            error_type,
            text,
        )
        return RunErrorEvent(message=f"the run failed ({error_type}); the server log has the details", code=error_type)

    async def save(self) -> None:
        await save_record(self.served.checkpoints, self.thread_id, self.record)

    async def segment(
        self, turn: dict[str, Any], run: dict[str, Any], mapper: EventMapper, *, idle: float | None = None
    ) -> AsyncIterator[BaseEvent]:
        """The AG-UI events of one AG-UI run over the turn's durable run (after ``RUN_STARTED``); records a
        pause it reaches and settles the turn when the durable run ended."""
        run_id = run["runId"]
        if run.get("opening") is not None:
            yield MessagesSnapshotEvent.model_validate({"messages": run["opening"]})
        state = dict(run["state"])
        yield StateSnapshotEvent(snapshot=state)
        handle = self.client.handle(turn["workflow"])
        source = _Journal(handle.events(offset=run["offset"], idle=idle).__aiter__(), run["offset"], mapper.projection)
        async for records in source.records():
            for out in agui_events(records):
                yield out
        end = source.end
        if end is not None and end.kind == "error":
            for out in [*mapper.abort(), *mapper.finish()]:
                yield out
            await self.settle()  # before the terminal event: a client may hang up on it
            yield self.failed(run_id, end.error_type or "DurableRunError", end.error or "")
            return
        if end is not None and end.kind == "interrupted":
            if run.get("pause") is None:  # the first to see this pause records it
                prior = run["opening"] if run.get("opening") is not None else self._start_messages(turn)
                snapshot = [*prior, *self._agui(source.messages)]
                interrupts = [describe(c, turn["workflow"]) for c in _contexts(end.interrupts)]
                run["pause"] = {
                    "offset": source.offset,
                    "snapshot": snapshot,
                    "interrupts": [i.model_dump(mode="json", by_alias=True) for i in interrupts],
                }
                self.record.interrupts = run["pause"]["interrupts"]
                await self.save()
            pause = run["pause"]
            yield MessagesSnapshotEvent.model_validate({"messages": pause["snapshot"]})
            for out in mapper.finish(suspended=True):
                yield out
            outcome = RunFinishedInterruptOutcome(interrupts=[Interrupt.model_validate(i) for i in pause["interrupts"]])
            yield RunFinishedEvent(thread_id=self.thread_id, run_id=run_id, outcome=outcome)
            return
        if idle is not None and await handle.status() not in _TERMINAL:
            return  # read to see where the run is: it is still running
        try:
            result = await handle.result()
        except DurableRunError as exc:
            for out in [*mapper.abort(), *mapper.finish()]:
                yield out
            await self.settle()
            yield self.failed(run_id, exc.error_type, exc.message)
            return
        now = state_of(result.session_values)
        if now != state:
            yield StateDeltaEvent.model_validate({"delta": state_patch(state, now)})
        for out in mapper.finish():
            yield out
        output = result.output
        text = output.content if isinstance(output, Message) else None
        await self.settle()  # before the terminal event: the thread holds the turn when the client sees the end
        yield RunFinishedEvent(
            thread_id=self.thread_id, run_id=run_id, result=text, outcome=RunFinishedSuccessOutcome()
        )

    def _start_messages(self, turn: dict[str, Any]) -> list[Any]:
        """The conversation the turn started from, as AG-UI messages (JSON)."""
        messages = [*decode_messages(turn["history"]), *decode_messages(turn["input"])]
        return self._agui(messages)

    def _agui(self, messages: Sequence[Message]) -> list[Any]:
        return [m.model_dump(mode="json", by_alias=True) for m in conversation(self.thread_id, messages)]

    async def settle(self) -> None:
        """Append the ended turn to the session (once, whoever calls), and keep it as the thread's last turn."""
        served, thread_id = self.served, self.thread_id
        now = await load_record(served.checkpoints, thread_id)
        session_id = (now or self.record).session_of(thread_id)
        try:
            lease = await served.sessions.acquire(session_id, wait=served.runner.session_wait)
        except SessionBusyError:
            return  # another server settles it now
        committed = False
        try:
            record = await load_record(served.checkpoints, thread_id)
            turn = record.durable if record is not None else None
            if record is None or turn is None:
                return
            handle = self.client.handle(turn["workflow"])
            try:
                result = await handle.result()
            except DurableRunError:
                result = None
            if result is not None and result.status == "completed":
                messages = decode_messages(turn["input"])
                for run in turn["runs"]:  # each AG-UI run mapped again: the ids its client saw
                    projection = Projection(stable_ids(thread_id, run["runId"]))
                    source = _Journal(handle.events(offset=run["offset"]).__aiter__(), run["offset"], projection)
                    async for _ in source.records():
                        pass
                    messages.extend(source.messages)
                stored = await served.sessions.load(session_id)
                last = message_id(stored.messages[-1]) if stored.messages else None
                turns = stored.turns
                if not messages or last != message_id(messages[-1]):  # not appended yet
                    await served.sessions.commit(lease, messages, result.session_values)
                    committed = True
                    turns += 1
                for run in turn["runs"]:
                    record.runs[run["runId"]] = [session_id, turns - 1]
            record.durable, record.durable_last, record.interrupts = None, turn, []
            await save_record(served.checkpoints, thread_id, record)
            self.record = record
        finally:
            if not committed:
                await served.sessions.release(lease)

    async def open_turn(self, input: RunAgentInput) -> tuple[dict[str, Any], dict[str, Any]]:
        """Claim the thread for a new turn (its session lease meanwhile: one claim wins) and submit it."""
        served, thread_id = self.served, self.thread_id
        session_id = self.record.session_of(thread_id)
        lease = await served.sessions.acquire(session_id, wait=served.runner.session_wait)
        try:
            record = await load_record(served.checkpoints, thread_id)
            if record is not None and record.durable is not None:
                raise SessionBusyError(thread_id, "a durable run of this thread")
            if record is not None:
                self.record = record
            stored = await served.sessions.load(session_id)
            turn_input = new_input(thread_id, stored.messages, input.messages)
            values = {**stored.values, **(dict(input.state) if isinstance(input.state, Mapping) else {})}
            run = {"runId": input.run_id, "offset": 0, "state": state_of(values), "opening": None}
            turn = {
                "workflow": workflow_id(served.name, thread_id, input.run_id),
                "history": encode_messages(stored.messages),
                "input": encode_messages(turn_input),
                "runs": [run],
            }
            self.record.durable = turn
            await self.save()
        finally:
            await served.sessions.release(lease)
        await self.client.submit(  # after the record: a run is never without its turn
            [*stored.messages, *turn_input], run_id=turn["workflow"], streaming=True, session_values=values
        )
        return turn, run

    async def where(self, turn: dict[str, Any]) -> str:
        """``"ended"`` (settled now), ``"paused"`` or ``"running"``: the turn's durable run, read up to now."""
        handle = self.client.handle(turn["workflow"])
        if await handle.status() in _TERMINAL:
            await self.settle()
            return "ended"
        last = turn["runs"][-1]
        if last.get("pause") is None:  # perhaps paused while nobody was reading: read what is there
            async for _ in self.segment(
                turn, last, EventMapper(new_id=stable_ids(self.thread_id, last["runId"])), idle=_SCAN_IDLE
            ):
                pass
        if last.get("pause") is not None:
            return "paused"
        return "running" if self.record.durable is not None else "ended"


def durable_agui_run(
    served: Any, input: RunAgentInput, record: ThreadRecord, owner: str | None
) -> AsyncIterator[BaseEvent]:
    """The AG-UI events of a run in durable mode (``adk.serve._run.agui_run``'s for an in-process one); a
    hang-up leaves the run going (it is the workers')."""
    mapper = EventMapper(new_id=stable_ids(input.thread_id, input.run_id))
    return framed(served, input, mapper, durable_run(served, input, record, owner, mapper))


async def durable_run(
    served: Any, input: RunAgentInput, record: ThreadRecord, owner: str | None, mapper: EventMapper
) -> AsyncIterator[BaseEvent]:
    """The AG-UI events after ``RUN_STARTED`` of a run in durable mode (see the module docstring)."""
    thread_id, run_id = input.thread_id, input.run_id
    thread = _Thread(served, thread_id, record)
    for turn in (record.durable, record.durable_last):  # a reconnect: the same run again
        run = next((r for r in (turn or {}).get("runs", ()) if r["runId"] == run_id), None)
        if turn is not None and run is not None:
            async for event in thread.segment(turn, run, mapper):
                yield event
            return
    turn = record.durable
    if turn is not None and await thread.where(turn) != "ended":
        last = turn["runs"][-1]
        pause = last.get("pause")
        if pause is None:
            raise SessionBusyError(thread_id, "a durable run of this thread")
        pending = [Interrupt.model_validate(i) for i in pause["interrupts"]]
        if not input.resume:
            raise InterruptPendingError(thread_id, [i.id for i in pending])
        targets = resume_targets(thread_id, pending, input.resume)
        run = {"runId": run_id, "offset": pause["offset"], "state": last["state"], "opening": pause["snapshot"]}
        turn["runs"].append(run)
        record.interrupts = []
        await thread.save()
        await served.durable.handle(turn["workflow"]).resume(targets)
    else:
        if input.resume:
            raise InterruptNotFoundError(f"thread {thread_id!r}", [e.interrupt_id for e in input.resume], [])
        await branch(served, input, record)
        turn, run = await thread.open_turn(input)
    async for event in thread.segment(turn, run, mapper):
        yield event


async def catch_up(served: Any, thread_id: str, record: ThreadRecord) -> ThreadRecord:
    """The thread's record once a durable run that ended while nobody read it has been settled (its turn
    appended: ``GET`` of the thread shows it)."""
    turn = record.durable
    if turn is None or await served.durable.handle(turn["workflow"]).status() not in _TERMINAL:
        return record
    thread = _Thread(served, thread_id, record)
    await thread.settle()
    return thread.record


def durable_client(durable: Any, name: str, agents: int) -> Any:
    """The DurableClient serving agent ``name`` (``create_app``'s ``durable``), or None."""
    if durable is None:
        return None
    if isinstance(durable, Mapping):
        return durable.get(name)
    if agents > 1:
        raise ValueError(
            "create_app(durable=...): one DurableClient serves one agent (one queue, one worker target); "
            "give a mapping of agent names to clients"
        )
    return durable


async def numbered(frames: AsyncIterator[str], encoder: Any, last_event_id: str | None) -> AsyncIterator[str]:
    """SSE frames with their index as ``id:``, those up to ``last_event_id`` left out (a reconnect)."""
    after = int(last_event_id) if last_event_id is not None and last_event_id.strip().isdigit() else -1
    sse = encoder.get_content_type() == "text/event-stream"
    index = -1
    async for frame in frames:
        index += 1
        if index <= after:
            continue
        yield f"id: {index}\n{frame}" if sse else frame
