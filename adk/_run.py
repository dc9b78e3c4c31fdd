"""What any part of an agent run reaches: its name and path, session, telemetry and event queue.

The runner sets ``current_run`` around each superstep it drives (never across a ``yield``), so the model
wrappers, state handlers, middlewares and tools of a shared, compiled graph find the run they belong to. Events
are appended synchronously to a list the runner drains between supersteps (a list: a few events at a time, and a
parked run keeps one; a deque costs ten times its memory). A ChatModelAgent's run extends this with the ReAct
loop's own facts (``adk.chat_model._context.ReactContext``).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from adk.events import AgentEvent
from adk.telemetry import TelemetryHandler

if TYPE_CHECKING:
    from adk.agent import RunSession


@dataclass(slots=True, eq=False)
class RunContext:
    """Mutable facts of one run every part of it may read (not part of the graph state: not the conversation)."""

    agent_name: str
    run_path: tuple[str, ...]
    telemetry: tuple[TelemetryHandler, ...] = ()
    session_values: dict[str, Any] = field(default_factory=dict)
    session: RunSession | None = None  # the Runner run's shared session (agent tools run their agent in it)
    emit_internal_events: bool = False  # agent tools forward their inner agent's events (ToolsConfig)
    events: list[AgentEvent] = field(init=False, default_factory=list)
    cancel: Any = field(init=False, default=None)  # the run's adk.cancel.CancelLink when it is cancellable

    def send(self, event: AgentEvent) -> None:
        event.agent_name = self.agent_name
        event.run_path = self.run_path
        self.events.append(event)


current_run: ContextVar[RunContext | None] = ContextVar("pyeino_agent_run", default=None)
current_session: ContextVar[RunSession | None] = ContextVar("pyeino_agent_session", default=None)
"""The Runner run's session while one of its agents works (custom agents too; ``adk.session_values``)."""
