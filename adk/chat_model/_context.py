"""A ChatModelAgent run's data: the ReAct graph's :class:`State` (the conversation, checkpointed) and the run's
:class:`ReactContext` (its facts beside the conversation, never checkpointed but for the counters a pause saves).

``current_react`` is ``adk._run.current_run`` typed for the code inside a ReAct graph, where the run is always
a ``ReactContext`` (one variable, one set per superstep).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, cast

from adk._run import RunContext, current_run
from adk.events import AgentAction
from adk.telemetry import TelemetryEvent
from compose.schema import Message, ToolInfo

__all__ = ["DEFAULT_MAX_ITERATIONS", "ReactContext", "State", "current_react"]

DEFAULT_MAX_ITERATIONS = 20


@dataclass(slots=True, eq=False)
class State:
    """The ReAct loop's graph-local state (Eino's ``State``), fresh for every run."""

    messages: list[Message] = field(default_factory=list)
    has_return_directly: bool = False
    return_directly_tool_call_id: str = ""
    tool_gen_actions: dict[str, AgentAction] = field(default_factory=dict)
    # the action of the return-directly call, kept with the state: its event is rebuilt after a resume when the
    # call finished before the run paused (the finished call does not run again)
    return_directly_action: AgentAction | None = None
    agent_name: str = ""
    remaining_iterations: int = DEFAULT_MAX_ITERATIONS
    # the tools offered to the model when a middleware changed them for this run (None: the agent's own)
    tool_infos: list[ToolInfo] | None = None
    # the return-directly tool names when a before_agent middleware changed them (None: the agent's own)
    return_directly: list[str] | None = None
    # structured output: invalid answers so far, and the message asking the model again after one
    output_failures: int = 0
    output_retry: list[Message] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class ReactContext(RunContext):
    """A ChatModelAgent run's facts, by the feature that owns them (its ``RunContext`` part is any run's); the
    constructor takes the ``RunContext`` fields, the others start empty."""

    # the loop (adk.chat_model.react; the driver adk.chat_model._react_run)
    state: State | None = field(init=False, default=None)  # the run's graph state, set by the state factory
    model_calls: int = field(init=False, default=0)
    total_tokens: int = field(init=False, default=0)
    termination_reason: str | None = field(init=False, default=None)
    held: Any = field(init=False, default=None)  # the return-directly tool's event, sent when the ToolsNode ends
    held_call_id: str = field(init=False, default="")  # the call it is for (a resumed run rebuilds it otherwise)
    # limits (adk.middlewares.limits; the timeout is the driver's): the tools called so far (shared while empty),
    # anyio.current_time() by which the run must end once started, and the timeout that deadline stands for
    tool_history: tuple[str, ...] = field(init=False, default=())
    deadline: float | None = field(init=False, default=None)
    timeout: float = field(init=False, default=0.0)
    # before_agent middlewares' ToolsNode (adk.chat_model.agent), a valid structured answer's (call id or "",
    # parsed answer), the model that last answered under failover (None: the agent's own)
    tools_node: Any = field(init=False, default=None)
    structured: tuple[str, Any] | None = field(init=False, default=None)
    failover_model: Any = field(init=False, default=None)

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


current_react = cast(ContextVar[ReactContext | None], current_run)
