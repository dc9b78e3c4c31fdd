"""The AG-UI mapping: a run's projection records (``adk.projection``) as AG-UI events, in order (one module,
read by every consumer of the server's stream, in-process and durable runs alike).

* a model answer's text: ``TEXT_MESSAGE_START/CONTENT/END`` (its deltas as they stream); per tool call
  ``TOOL_CALL_START`` (``parentMessageId`` = the answer's message id), ``TOOL_CALL_ARGS`` fragments,
  ``TOOL_CALL_END`` when the answer ends; a retried attempt's events end there (the retry is a new answer);
* a tool result: ``TOOL_CALL_RESULT{messageId, toolCallId, content}``;
* ``STEP_STARTED/STEP_FINISHED`` around each agent's part (``stepName`` = the agent's name);
* an agent inside an agent tool: ``SUBAGENT_STARTED`` (name, ``parentToolCallId`` = the agent tool's call),
  its events carrying its ``subagentRunId`` (its agents' parts are steps of their own in it), and
  ``SUBAGENT_FINISHED`` when the agent tool's result arrives (or as ``suspended`` when the run pauses).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any

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

from adk.events import AgentEvent
from adk.projection import Projection, Record

__all__ = ["EventMapper", "agui_events"]

_SUCCESS, _SUSPENDED = SubagentFinishedSuccessOutcome(), SubagentFinishedSuspendedOutcome()

# one AG-UI event per record kind (the answer records, which AG-UI has no event for, are not here)
_EVENTS: dict[str, Callable[[Record], BaseEvent]] = {
    "message_delta": lambda r: TextMessageContentEvent(message_id=r["id"], delta=r["delta"], subagent_run_id=r["sub"]),
    "tool_call_args": lambda r: ToolCallArgsEvent(tool_call_id=r["id"], delta=r["delta"], subagent_run_id=r["sub"]),
    "message_started": lambda r: TextMessageStartEvent(message_id=r["id"], role=r["role"], subagent_run_id=r["sub"]),
    "message_ended": lambda r: TextMessageEndEvent(message_id=r["id"], subagent_run_id=r["sub"]),
    "tool_call_started": lambda r: ToolCallStartEvent(
        tool_call_id=r["id"], tool_call_name=r["name"], parent_message_id=r["message"], subagent_run_id=r["sub"]
    ),
    "tool_call_ended": lambda r: ToolCallEndEvent(tool_call_id=r["id"], subagent_run_id=r["sub"]),
    "tool_result": lambda r: ToolCallResultEvent(
        message_id=r["message"], tool_call_id=r["call"], content=r["content"], subagent_run_id=r["sub"]
    ),
    "step_started": lambda r: StepStartedEvent(step_name=r["name"], subagent_run_id=r["sub"]),
    "step_finished": lambda r: StepFinishedEvent(step_name=r["name"], subagent_run_id=r["sub"]),
    "subagent_started": lambda r: SubagentStartedEvent(
        subagent_run_id=r["sub"], name=r["name"], parent_subagent_run_id=r["parent"], parent_tool_call_id=r["call"]
    ),
    "subagent_finished": lambda r: SubagentFinishedEvent(
        subagent_run_id=r["sub"], outcome=_SUSPENDED if r["suspended"] else _SUCCESS
    ),
}


def agui_events(records: list[Record]) -> list[BaseEvent]:
    """The AG-UI events of ``records`` (the answer records, which AG-UI has no event for, left out)."""
    return [_EVENTS[r["kind"]](r) for r in records if r["kind"] in _EVENTS]


class EventMapper:
    """Maps one run's agent events to AG-UI events: its :class:`~adk.projection.Projection`, mapped.

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
        self.projection = Projection(new_id)

    def __repr__(self) -> str:
        return f"EventMapper({self.projection!r})"

    @property
    def structured(self) -> Any:
        return self.projection.structured

    @property
    def tool_calls(self) -> dict[str, str]:
        return self.projection.tool_calls

    def map(self, event: AgentEvent) -> AsyncGenerator[list[BaseEvent], None]:
        """The AG-UI events for ``event``, in batches (a streamed answer yields one batch per chunk)."""
        return self.projection.project(event, agui_events)

    def abort(self) -> list[BaseEvent]:
        """Close what an answer interrupted by an error left open (before ``RUN_ERROR``)."""
        return agui_events(self.projection.abort())

    def finish(self, *, suspended: bool = False) -> list[BaseEvent]:
        """Close the open subagents (``suspended`` when the run paused) with their steps, and the run's step."""
        return agui_events(self.projection.finish(suspended=suspended))
