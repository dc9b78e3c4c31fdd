"""The per-run context every part of one agent run reaches: the event queue, telemetry, usage and limits.

The runner sets ``current_run`` around each superstep it drives (never across a ``yield``), so the model
wrappers, state handlers and the tool-result collector of a shared, compiled ReAct graph find the run they
belong to. Events are appended synchronously to a list the runner drains between supersteps (a list: a few
events at a time, and a parked run keeps one; a deque costs ten times its memory).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adk.events import AgentEvent
from adk.telemetry import TelemetryEvent, TelemetryHandler

if TYPE_CHECKING:
    from adk.agent import RunSession
    from adk.chat_model.react import State


@dataclass(slots=True, eq=False, init=False)
class RunContext:
    """Mutable facts of one run (not part of the graph state: they are not the conversation)."""

    agent_name: str
    run_path: tuple[str, ...]
    telemetry: tuple[TelemetryHandler, ...]
    session_values: dict[str, Any]
    events: list[AgentEvent]
    held: AgentEvent | None  # the return-directly tool's event, emitted when the ToolsNode finishes
    held_call_id: str  # the call whose event this run held (a resumed run rebuilds it otherwise)
    model_calls: int
    total_tokens: int
    tool_history: tuple[str, ...]  # the tools called so far, kept for stall detection only (ReactConfig)
    termination_reason: str | None
    state: State | None  # the run's graph state, set by the state factory
    deadline: float | None  # anyio.current_time() by which the run must end (its ``timeout``), once started
    timeout: float  # the timeout that deadline stands for (seconds)
    session: RunSession | None  # the Runner run's shared session (agent tools run their agent in it)
    emit_internal_events: bool  # agent tools forward their inner agent's events (ToolsConfig)
    tools_node: Any  # the ToolsNode of this run when before_agent middlewares ran (adk.chat_model.agent)
    structured: tuple[str, Any] | None  # (call id or "", parsed answer) once a structured answer is valid
    failover_model: Any  # the model that last answered under model failover (None: the agent's own)
    cancel: Any  # the run's ``adk.cancel.CancelLink`` when it is cancellable: its calls run guarded

    def __init__(
        self,
        agent_name: str,
        run_path: tuple[str, ...],
        telemetry: tuple[TelemetryHandler, ...] = (),
        session_values: dict[str, Any] | None = None,
        session: RunSession | None = None,
        emit_internal_events: bool = False,
    ) -> None:
        # written out (one run makes one): only the given fields are parameters, the others start empty
        self.agent_name = agent_name
        self.run_path = run_path
        self.telemetry = telemetry
        self.session_values = session_values if session_values is not None else {}
        self.events = []
        self.held = None
        self.held_call_id = ""
        self.model_calls = 0
        self.total_tokens = 0
        self.tool_history = ()  # shared while empty: a run holds no list of its own
        self.termination_reason = None
        self.state = None
        self.deadline = None
        self.timeout = 0.0
        self.session = session
        self.emit_internal_events = emit_internal_events
        self.tools_node = None
        self.structured = None
        self.failover_model = None
        self.cancel = None

    @property
    def step(self) -> int:
        """The current ReAct round (0-based)."""
        return max(self.model_calls - 1, 0)

    def emit(self, name: str, **data: Any) -> None:
        """Deliver a telemetry event to every handler (cheap no-op without handlers)."""
        if self.telemetry:
            event = TelemetryEvent(name, self.step, self.agent_name, data)
            for handler in self.telemetry:
                handler(event)

    def send(self, event: AgentEvent) -> None:
        event.agent_name = self.agent_name
        event.run_path = self.run_path
        self.events.append(event)


current_run: ContextVar[RunContext | None] = ContextVar("pyeino_agent_run", default=None)
current_session: ContextVar[RunSession | None] = ContextVar("pyeino_agent_session", default=None)
"""The Runner run's session while one of its agents works (custom agents too; ``adk.session_values``)."""
