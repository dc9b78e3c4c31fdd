"""The a2a-sdk ``AgentExecutor`` that runs a served agent through its Runner.

A task is one Runner run: its id is the run's checkpoint id, its context id the session (thread) id, so a
context's tasks share one conversation. What a client sees of a task (A2A 1.0 names; 0.3 the same in its
spelling):

* ``submitted``, then ``working``;
* the text of each assistant message as an artifact (``append`` chunks as the model streams them, then the
  whole text once more with ``append = false, lastChunk = true``, so the stored task holds it in one part). A
  chunk carries the model's deltas since the last one once they are an eighth of the text sent so far: the
  first deltas go out one by one, a long text in chunks that grow with it (a few dozen for 200 kB), so the
  appends, each of which the task store saves, cost time linear in the text;
* tool calls and tool results as ``working`` status messages with a data part
  ``{"toolCalls": [{id, name, arguments}]}`` / ``{"toolResult": {id, name, content}}``;
* then exactly one of ``completed``, ``failed`` (the message names the error's class, as AG-UI's
  ``RUN_ERROR`` does) or ``input-required``;
* ``input-required``: the run paused (an approval guard, ``interrupt()``); its checkpoint is saved under the
  task id. The status message says what is asked, in text, and in a data part ``{"interrupts": [...]}`` (each
  as AG-UI's ``Interrupt``: ``id``, ``reason``, ``message``, ``toolCallId``, ``responseSchema``). The next
  message on the task (``taskId`` set) resumes it: see :func:`resume_entries` for how it answers them.

``tasks/cancel`` cancels a running run (``run.cancel("immediate", recursive=True)``, as an AG-UI hang-up does:
it pauses at once, what finished kept) and the task is ``canceled``; the run's checkpoint (or the one a paused
task had) is kept, under the task id.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from a2a.helpers import get_data_parts, new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message as A2AMessage
from a2a.types import Part, TaskState
from ag_ui.core import Interrupt, ResumeEntry

from adk.errors import AgentCancelledError, InterruptPendingError
from adk.events import AgentInterruptInfo
from adk.projection import Projection, Record
from adk.serve._run import ServedAgent, run_error
from adk.serve._threads import (
    APPROVAL_SCHEMA,
    ThreadNotFoundError,
    claim_thread,
    describe,
    edited_calls,
    open_thread,
    resume_targets,
    store_edits,
)
from compose.schema import user_message

__all__ = ["RunnerExecutor", "resume_entries", "user_text"]

logger = logging.getLogger("adk.serve")

_YES = frozenset({"y", "yes", "approve", "approved", "ok", "okay", "allow", "go", "true"})
_NO = frozenset({"n", "no", "reject", "rejected", "deny", "denied", "cancel", "stop", "false"})


def user_text(message: A2AMessage) -> str:
    """The text a user message gives the agent: its text parts, then each data part as JSON, then each file
    part as its name or URL (one per line)."""
    lines: list[str] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            lines.append(part.text)
        elif kind == "data":
            lines.append(json.dumps(get_data_parts([part])[0], ensure_ascii=False))
        elif kind == "url":
            lines.append(part.filename or part.url)
        elif kind == "raw":
            lines.append(f"[file {part.filename or 'attachment'}, {part.media_type or 'bytes'}]")
    return "\n".join(lines)


def _pending(message: A2AMessage | None) -> list[Interrupt]:
    """The interrupts an ``input-required`` status message lists."""
    if message is None:
        return []
    for data in get_data_parts(message.parts):
        if isinstance(data, Mapping) and isinstance(data.get("interrupts"), list):
            return [Interrupt.model_validate(i) for i in data["interrupts"]]
    return []


def _is_approval(interrupt: Interrupt) -> bool:
    return interrupt.reason == "tool_call" and interrupt.response_schema == APPROVAL_SCHEMA


def resume_entries(message: A2AMessage, pending: Sequence[Interrupt]) -> list[ResumeEntry]:
    """The answers a message on an ``input-required`` task gives its pending interrupts.

    * A data part ``{"interrupts": {id: payload}}`` answers each interrupt by id.
    * Any other data part (a JSON object) answers every pending interrupt with itself: for an approval
      ``{"approved": true|false, "reason"?: str, "editedArgs"?: {...}}``, for an ``interrupt()`` the resume
      data the tool gets back.
    * Text alone answers an approval with yes/no (``yes``, ``y``, ``approve``, ``ok`` ... approve; ``no``,
      ``n``, ``reject``, ``deny`` ... reject, the text as the reason); any other interrupt gets the text as its
      resume data.

    Raises:
        ValueError: the message answers nothing, or answers an approval with text that is neither yes nor no.
    """
    data = [d for d in get_data_parts(message.parts) if isinstance(d, Mapping)]
    if data and isinstance(data[0].get("interrupts"), Mapping):
        by_id = data[0]["interrupts"]
        return [ResumeEntry(interrupt_id=str(k), status="resolved", payload=v) for k, v in by_id.items()]
    if data:
        return [ResumeEntry(interrupt_id=i.id, status="resolved", payload=dict(data[0])) for i in pending]
    text = "\n".join(p.text for p in message.parts if p.WhichOneof("content") == "text").strip()
    if not text:
        raise ValueError("the task waits for input: answer it with text or a data part (see the status message)")
    entries = []
    for interrupt in pending:
        payload: Any = text
        if _is_approval(interrupt):
            words = re.findall(r"[a-z]+", text.lower())
            if len(words) == 1 and words[0] in _YES:
                payload = {"approved": True}
            elif words and words[0] in _NO:
                payload = {"approved": False, "reason": text}
            else:
                raise ValueError(
                    f"interrupt {interrupt.id!r} asks for an approval: answer yes or no, or send a data part "
                    '{"approved": true|false, "editedArgs"?: {...}}'
                )
        entries.append(ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload=payload))
    return entries


def _data_message(updater: TaskUpdater, data: Mapping[str, Any], text: str | None = None) -> A2AMessage:
    parts: list[Part] = [new_text_part(text)] if text else []
    parts.append(new_data_part(dict(data)))
    return updater.new_agent_message(parts)


# seconds a cancelled run may take to pause (an agent that does not stop at a cancel: its run is cut off then)
_CANCEL_GRACE = 10.0


class _Teller:
    """A task's artifacts and status messages from its run's projection records (see the module docstring)."""

    __slots__ = ("artifact", "calls", "held", "name", "sent", "size", "text", "updater")

    def __init__(self, updater: TaskUpdater) -> None:
        self.updater = updater
        self.artifact = ""  # the open answer's artifact ("": none)
        self.name = ""
        self.text: list[str] = []  # the answer's text
        self.held: list[str] = []  # deltas not appended yet, ``size`` characters
        self.size = 0
        self.sent = 0  # characters appended to the artifact
        self.calls: dict[str, dict[str, str]] = {}

    async def records(self, records: list[Record]) -> None:
        updater = self.updater
        for record in records:
            kind = record["kind"]
            if kind == "message_delta":
                self.text.append(record["delta"])
                self.held.append(record["delta"])
                self.size += len(record["delta"])
            elif kind == "tool_call_args":
                self.calls[record["id"]]["arguments"] += record["delta"]
            elif kind == "tool_call_started":
                self.calls[record["id"]] = {"id": record["id"], "name": record["name"], "arguments": ""}
            elif kind == "answer_started":
                self.artifact, self.name = uuid.uuid4().hex, record["agent"]
                self.text, self.held, self.size, self.sent, self.calls = [], [], 0, 0, {}
            elif kind == "answer_ended":
                artifact, self.artifact = self.artifact, ""
                if self.text:
                    part = [new_text_part("".join(self.text))]
                    await updater.add_artifact(part, artifact, self.name, append=False, last_chunk=True)
                if self.calls:
                    data = {"toolCalls": list(self.calls.values())}
                    await updater.update_status(TaskState.TASK_STATE_WORKING, _data_message(updater, data))
            elif kind == "answer_retried":  # a failed model attempt that is retried: take back what it streamed
                artifact, self.artifact = self.artifact, ""
                if self.sent:
                    part = [new_text_part("")]
                    await updater.add_artifact(part, artifact, self.name, append=False, last_chunk=True)
            elif kind == "tool_result":
                result = {"toolResult": {"id": record["call"], "name": record["name"], "content": record["content"]}}
                await updater.update_status(TaskState.TASK_STATE_WORKING, _data_message(updater, result))
        if self.artifact and self.size and self.size * 8 >= self.sent:  # a streamed answer's text, coalesced
            part = [new_text_part("".join(self.held))]
            await updater.add_artifact(part, self.artifact, self.name, append=self.sent > 0)
            self.sent += self.size
            self.held.clear()
            self.size = 0


@dataclass(slots=True, eq=False)
class _Running:
    run: Any
    scope: anyio.CancelScope
    done: anyio.Event


class RunnerExecutor(AgentExecutor):
    """Runs ``served``'s agent for the a2a-sdk request handler (see the module docstring).

    The request's principal is the call context's user (``adk.serve`` puts its ``auth`` principal there): a
    context belongs to the principal that started it, as an AG-UI thread does (its record is the thread's),
    and tasks are kept per principal by the SDK's task store.
    """

    def __init__(self, served: ServedAgent, *, tracker: Any = None) -> None:
        self.served = served
        self.tracker = tracker
        self._running: dict[str, _Running] = {}

    def __repr__(self) -> str:
        return f"RunnerExecutor({self.served.name!r}, running={sorted(self._running)})"

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id, context.context_id
        message = context.message
        assert task_id and context_id and message is not None, "the SDK's handler fills these in"
        user = context.call_context.user
        owner = user.user_name if user.is_authenticated else None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task_id, context_id)
        if self.tracker is not None:
            self.tracker.enter()
        try:
            await self._execute(context, updater, owner)
        except Exception as exc:  # the run's error, or a store's before it: told as AG-UI's RUN_ERROR is
            await self._fail(updater, exc)
        finally:
            if self.tracker is not None:
                self.tracker.leave()

    async def _execute(self, context: RequestContext, updater: TaskUpdater, owner: str | None) -> None:
        served, runner = self.served, self.served.runner
        task_id, context_id = updater.task_id, updater.context_id
        message = context.message
        assert message is not None
        task = context.current_task
        if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            session_id = task.context_id or context_id  # the task's (a message naming only the task has none)
            try:  # the context is still the principal's (not deleted, nor since created by another)
                if await open_thread(served.sessions, served.checkpoints, served.name, session_id, owner) is None:
                    raise ThreadNotFoundError(session_id)
            except ThreadNotFoundError:
                await updater.reject(updater.new_agent_message([new_text_part(f"no context {session_id!r}")]))
                return
            pending = _pending(task.status.message if task.status.HasField("message") else None)
            try:
                targets = resume_targets(task_id, pending, resume_entries(message, pending))
            except (ValueError, InterruptPendingError) as exc:  # stays paused: ask again, saying what was wrong
                await self._ask(updater, pending, problem=str(exc))
                return
            edits = edited_calls(pending, targets)
            await store_edits(served.sessions, session_id, task_id, edits, wait=runner.session_wait)
            await updater.start_work()
            run: Any = runner.resume(task_id, targets, cancellable=True)
        elif task is not None and task.status.state not in (TaskState.TASK_STATE_SUBMITTED, 0):
            await updater.failed(
                updater.new_agent_message([new_text_part(f"task {task_id!r} is {TaskState.Name(task.status.state)}")])
            )
            return
        else:
            try:
                await claim_thread(
                    served.sessions, served.checkpoints, served.name, context_id, owner, wait=runner.session_wait
                )
            except ThreadNotFoundError:
                await updater.reject(updater.new_agent_message([new_text_part(f"no context {context_id!r}")]))
                return
            await updater.start_work()
            turn = [user_message(user_text(message))]
            run = runner.run(turn, session_id=context_id, checkpoint_id=task_id, cancellable=True)
        running = _Running(run, anyio.CancelScope(), anyio.Event())
        self._running[task_id] = running
        try:
            with running.scope:
                await self._drive(run, updater)
        finally:
            self._running.pop(task_id, None)
            running.done.set()

    async def _drive(self, run: Any, updater: TaskUpdater) -> None:
        """Run to its end, telling the task's events (see the module docstring)."""
        paused: AgentInterruptInfo | None = None
        projection, tell = Projection(), _Teller(updater)
        async with run:  # an error fails the task (``execute``)
            async for event in run:
                if isinstance(event.error, AgentCancelledError):
                    return  # ``cancel`` marks the task canceled
                if event.error is not None:
                    raise event.error
                async for records in projection.project(event):
                    await tell.records(records)
                if event.action is not None and event.action.interrupted is not None:
                    paused = event.action.interrupted
        if paused is None:
            await updater.complete()
            return
        causes = [c for c in paused.interrupt_contexts if c.is_root_cause]
        await self._ask(updater, [describe(c, updater.task_id) for c in causes])

    async def _fail(self, updater: TaskUpdater, exc: BaseException) -> None:
        """Set ``failed``, telling the error as AG-UI's ``RUN_ERROR`` does (``run_error``: logged in full)."""
        where = f"agent {self.served.name!r}: A2A task {updater.task_id!r} in context {updater.context_id!r}"
        error = run_error(exc, where)
        text = f"{error.code}: {error.message}"
        await updater.failed(_data_message(updater, {"error": {"code": error.code, "message": error.message}}, text))

    async def _ask(self, updater: TaskUpdater, pending: Sequence[Interrupt], problem: str | None = None) -> None:
        """Set ``input-required``, listing what the paused run waits for."""
        lines = [i.message or f"input for {i.reason} ({i.id})" for i in pending]
        if problem:
            lines.insert(0, problem)
        data = {"interrupts": [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in pending]}
        await updater.requires_input(_data_message(updater, data, "\n".join(lines)))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Stop the task's run (its checkpoint, if it has one, stays) and mark it ``canceled``."""
        task_id = context.task_id or ""
        running = self._running.get(task_id)
        if running is not None:
            running.run.cancel("immediate", recursive=True)
            with anyio.move_on_after(_CANCEL_GRACE):
                await running.done.wait()
            if not running.done.is_set():
                running.scope.cancel()
                await running.done.wait()
        updater = TaskUpdater(event_queue, task_id, context.context_id or "")
        await updater.cancel(updater.new_agent_message([new_text_part("canceled")]))
