"""The AG-UI event mapping: a Runner run's ``AgentEvent``s as AG-UI events, in order (one module, read by
every consumer of the server's stream).

Per agent event:

* a model answer: ``TEXT_MESSAGE_START/CONTENT/END`` carrying the model's text deltas as they stream (never an
  empty delta), and per tool call ``TOOL_CALL_START`` (``parentMessageId`` = the answer's message id), its
  arguments as ``TOOL_CALL_ARGS`` fragments as the model produces them, ``TOOL_CALL_END`` when the answer
  ends. A text message is closed before the answer's first tool call opens (text after it opens another);
* a tool result: ``TOOL_CALL_RESULT{messageId, toolCallId, content}``;
* ``STEP_STARTED/STEP_FINISHED`` around each agent's part (``stepName`` = the agent's name);
* the events of an agent inside an agent tool (``internal`` events) carry AG-UI's subagent attribution: a
  ``SUBAGENT_STARTED`` (name, ``parentToolCallId`` = the agent tool's call) opens the invocation, its events
  carry its ``subagentRunId``, and ``SUBAGENT_FINISHED`` closes it when the agent tool's result arrives (or
  as ``suspended`` when the run pauses inside it). Inside it, each agent's part is a step of its own as well
  (``STEP_STARTED/STEP_FINISHED`` named after the agent, with the invocation's ``subagentRunId``), closed
  before the invocation is.

Each streamed message gets an id, stamped on the message itself (``adk.serve._messages``) so the thread stores
it under the id the client saw.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any

import anyio
from ag_ui.core import (
    BaseEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from adk.errors import WillRetryError
from adk.events import AgentEvent, MessageVariant
from adk.serve._messages import jsonable, stamp
from compose.schema import Message

__all__ = ["EventMapper"]


def _new_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex}"


class _Answer:
    """The AG-UI state of one model answer being streamed: its open text message and tool calls."""

    __slots__ = ("calls", "ended", "message_id", "new_id", "sub", "text_id")

    def __init__(self, message_id: str, sub: str | None, new_id: Callable[[str], str]) -> None:
        self.new_id = new_id
        self.message_id = message_id
        self.sub = sub
        self.text_id: str | None = None  # the open text message
        self.calls: dict[Any, tuple[str, str]] = {}  # index (or id) -> (call id, tool name)
        self.ended: set[str] = set()

    def chunk(self, chunk: Message, out: list[BaseEvent]) -> None:
        sub = self.sub
        if chunk.content:
            if self.text_id is None:
                # the answer's first text message takes the answer's id; text after a tool call gets its own
                self.text_id = self.message_id if not self.calls else self.new_id("msg")
                out.append(TextMessageStartEvent(message_id=self.text_id, role="assistant", subagent_run_id=sub))
            out.append(TextMessageContentEvent(message_id=self.text_id, delta=chunk.content, subagent_run_id=sub))
        for call in chunk.tool_calls:
            key = call.index if call.index is not None else call.id
            known = self.calls.get(key)
            if known is None:
                if self.text_id is not None:
                    out.append(TextMessageEndEvent(message_id=self.text_id, subagent_run_id=sub))
                    self.text_id = None
                call_id = call.id or self.new_id("call")
                known = (call_id, call.function.name)
                self.calls[key] = known
                out.append(
                    ToolCallStartEvent(
                        tool_call_id=call_id,
                        tool_call_name=call.function.name,
                        parent_message_id=self.message_id,
                        subagent_run_id=sub,
                    )
                )
            if call.function.arguments:
                out.append(ToolCallArgsEvent(tool_call_id=known[0], delta=call.function.arguments, subagent_run_id=sub))

    def close(self, out: list[BaseEvent]) -> None:
        if self.text_id is not None:
            out.append(TextMessageEndEvent(message_id=self.text_id, subagent_run_id=self.sub))
            self.text_id = None
        for call_id, _ in self.calls.values():
            if call_id not in self.ended:
                self.ended.add(call_id)
                out.append(ToolCallEndEvent(tool_call_id=call_id, subagent_run_id=self.sub))


class EventMapper:
    """Maps one run's agent events to AG-UI events (see the module docstring).

    ``map(event)`` yields the AG-UI events of one agent event (reading its message stream as it goes);
    ``finish(suspended=...)`` closes the open step and subagents before the terminal event. ``structured`` is the
    structured answer seen (an ``output_type`` agent's), as JSON data; ``tool_calls`` maps the ids of the calls
    started in this run to their tool names.

    Args:
        new_id: makes the ids of messages and subagent runs from a kind (``"msg"``, ``"call"``, ``"sub"``);
            default: random. Give a deterministic one to map a recorded run to the same events each time
            (``adk.serve._durable``).
    """

    def __init__(self, new_id: Callable[[str], str] | None = None) -> None:
        self.new_id = new_id if new_id is not None else _new_id
        self.step: str | None = None
        self.subagents: dict[tuple[str, ...], str] = {}  # run path -> subagentRunId, open ones
        self.sub_steps: dict[str, str] = {}  # subagentRunId -> the step open in it (its agent's name)
        self.tool_calls: dict[str, str] = {}
        self._last_call: dict[str, str] = {}  # tool name -> its latest call id (an agent tool's parent call)
        self._answer: _Answer | None = None
        self.structured: Any = None

    async def map(self, event: AgentEvent) -> AsyncGenerator[list[BaseEvent], None]:
        """The AG-UI events for ``event``, in batches (a streamed answer yields one batch per chunk)."""
        out: list[BaseEvent] = []
        sub = self._attribution(event, out)
        variant = event.message
        if variant is None:
            if out:
                yield out
            return
        if variant.role == "tool":
            message = await variant.get_message()
            self._result(event, variant, message, sub, out)
            yield out
            return
        answer = _Answer(self.new_id("msg"), sub, self.new_id)
        self._answer = answer
        try:
            if variant.message is not None or variant.message_stream is None:
                message = await variant.get_message()
                stamp(message, answer.message_id)
                answer.chunk(message, out)
            else:
                first = True
                try:
                    async for chunk in variant.message_stream:
                        if first:
                            stamp(chunk, answer.message_id)  # the recorded copy concatenates this chunk first
                            first = False
                        answer.chunk(chunk, out)
                        if out:
                            yield out
                            out = []
                except WillRetryError:
                    pass  # a failed attempt that is retried: its events end here, the retry is a new answer
                finally:
                    # cancelled (the client went away) or closed mid-answer: the mapper's copy is its to close
                    with anyio.CancelScope(shield=True):
                        await variant.message_stream.aclose()
            answer.close(out)
        finally:
            self._answer = None
        for call_id, name in answer.calls.values():
            self.tool_calls[call_id] = name
            self._last_call[name] = call_id
        if event.output is not None and event.output.structured is not None:
            self.structured = jsonable(event.output.structured)
        if out:
            yield out

    def abort(self) -> list[BaseEvent]:
        """Close what an answer interrupted by an error left open (before ``RUN_ERROR``)."""
        out: list[BaseEvent] = []
        if self._answer is not None:
            self._answer.close(out)
            self._answer = None
        return out

    def _attribution(self, event: AgentEvent, out: list[BaseEvent]) -> str | None:
        """Open the event's step or subagent as needed; its ``subagentRunId`` (None for the run's own agents)."""
        if not event.internal:
            if event.agent_name != self.step:
                if self.step is not None:
                    out.append(StepFinishedEvent(step_name=self.step))
                self.step = event.agent_name
                out.append(StepStartedEvent(step_name=event.agent_name))
            return None
        path = event.run_path
        sub = self.subagents.get(path)
        if sub is not None:
            self._sub_step(sub, event.agent_name, out)
            return sub
        parent = self._parent_subagent(path)
        sub = self.new_id("sub")
        self.subagents[path] = sub
        out.append(
            SubagentStartedEvent(
                subagent_run_id=sub,
                name=event.agent_name,
                parent_subagent_run_id=parent,
                parent_tool_call_id=self._last_call.get(event.agent_name),
            )
        )
        self._sub_step(sub, event.agent_name, out)
        return sub

    def _sub_step(self, sub: str, agent_name: str, out: list[BaseEvent]) -> None:
        """Open ``agent_name``'s step in subagent run ``sub`` (closing the step of the agent before it there)."""
        step = self.sub_steps.get(sub)
        if step == agent_name:
            return
        if step is not None:
            out.append(StepFinishedEvent(step_name=step, subagent_run_id=sub))
        self.sub_steps[sub] = agent_name
        out.append(StepStartedEvent(step_name=agent_name, subagent_run_id=sub))

    def _end_subagent(self, sub: str, outcome: Any, out: list[BaseEvent]) -> None:
        step = self.sub_steps.pop(sub, None)
        if step is not None:
            out.append(StepFinishedEvent(step_name=step, subagent_run_id=sub))
        out.append(SubagentFinishedEvent(subagent_run_id=sub, outcome=outcome))

    def _parent_subagent(self, path: tuple[str, ...]) -> str | None:
        for n in range(len(path) - 1, 0, -1):
            found = self.subagents.get(path[:n])
            if found is not None:
                return found
        return None

    def _result(
        self, event: AgentEvent, variant: MessageVariant, message: Message, sub: str | None, out: list[BaseEvent]
    ) -> None:
        message_id = self.new_id("msg")
        stamp(message, message_id)
        if variant.tool_name is not None:
            # an agent tool's result: its agent's invocation (and those nested in it) is over
            for path, run_id in list(self.subagents.items()):
                if variant.tool_name in path[len(event.run_path) :] and path[: len(event.run_path)] == event.run_path:
                    self._end_subagent(run_id, SubagentFinishedSuccessOutcome(), out)
                    del self.subagents[path]
        out.append(
            ToolCallResultEvent(
                message_id=message_id,
                tool_call_id=message.tool_call_id or "",
                content=message.content,
                subagent_run_id=sub,
            )
        )

    def finish(self, *, suspended: bool = False) -> list[BaseEvent]:
        """Close the open subagents (``suspended`` when the run paused) with their steps, and the run's step."""
        out: list[BaseEvent] = []
        for run_id in reversed(list(self.subagents.values())):
            outcome: Any = SubagentFinishedSuspendedOutcome() if suspended else SubagentFinishedSuccessOutcome()
            self._end_subagent(run_id, outcome, out)
        self.subagents.clear()
        if self.step is not None:
            out.append(StepFinishedEvent(step_name=self.step))
            self.step = None
        return out
