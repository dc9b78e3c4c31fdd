"""``ChatModelAgent``'s options, one small frozen object per concern (as Eino's ``ChatModelAgentConfig`` groups its
tools in ``ToolsConfig``): the agent's own fields stay direct (name, description, instruction, model, tools,
middlewares, ``max_iterations``, ``model_retry``, ``exit_tool``, ``output_key``), the rest is grouped here.

Example::

    agent = ChatModelAgent(
        "ops", "runs operations", model=model,
        tools=ToolsConfig([pay, lookup], execution_mode="serial"),
        model_config=ModelConfig(failover=ModelFailoverConfig(models=[backup]), tool_choice="lookup"),
        limits=Limits(max_budget_tokens=50_000, stall_window=3, timeout=120),
        output=OutputConfig(Invoice, retries=1),
    )
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from adk.chat_model.failover import ModelFailoverConfig
from adk.chat_model.structured_output import OutputMode
from compose.models.base import ToolChoice
from compose.tools.base import BaseTool
from compose.tools.middleware import ToolMiddleware

__all__ = ["Limits", "ModelConfig", "OutputConfig", "ToolExecutionMode", "ToolsConfig"]

ToolExecutionMode = Literal["auto", "serial", "parallel"]


@dataclass(frozen=True)
class ToolsConfig:
    """The agent's tools.

    Args:
        tools: the tools the model may call.
        return_directly: names of tools whose result ends the run and becomes its output.
        middlewares: ToolsNode middlewares (inside the agent's own event collector, which is outermost).
        unknown_tools_handler: ``async (name, arguments) -> str`` answering calls of unknown tools.
        tool_arguments_handler: ``async (name, arguments) -> str`` rewriting arguments first.
        emit_internal_events: agent tools (:class:`~adk.agents.agent_tool.AgentTool`) forward their inner agent's
            events to this agent's caller, their run path prefixed with this agent's (Eino's
            ``EmitInternalEvents``); they are never part of this agent's history.
        execution_mode: ``"auto"`` (a round's calls run in parallel only when every called tool is
            parallel-safe), ``"serial"`` or ``"parallel"``.

    Raises:
        ValueError: ``execution_mode`` is none of those.
    """

    tools: Sequence[BaseTool] = ()
    return_directly: Iterable[str] = field(default_factory=frozenset)
    middlewares: Sequence[ToolMiddleware] = ()
    unknown_tools_handler: Any = None
    tool_arguments_handler: Any = None
    emit_internal_events: bool = False
    execution_mode: ToolExecutionMode = "auto"

    def __post_init__(self) -> None:
        if self.execution_mode not in ("auto", "serial", "parallel"):
            raise ValueError(
                f"ToolsConfig(execution_mode=...) must be 'auto', 'serial' or 'parallel', got {self.execution_mode!r}"
            )


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """How the agent calls its model, besides retries (``model_retry``, Eino's ``ModelRetryConfig``).

    Args:
        failover: send a failed model call (after its retries) to other models (``ModelFailoverConfig``,
            ``adk.chat_model.failover``); each later call starts with the model that answered last.
        tool_choice: sent to the model on the first model call of a run only: ``"required"``, the name of a tool
            (the simplest way to force one; OpenAIChatModel sends ``{"type": "function", "function": {"name":
            ...}}``, which servers refusing ``"required"`` such as llama.cpp's accept), or a provider mapping.

    Raises:
        TypeError: ``failover`` is not a ``ModelFailoverConfig``.
    """

    failover: ModelFailoverConfig | None = None
    tool_choice: ToolChoice | None = None

    def __post_init__(self) -> None:
        if self.failover is not None and not isinstance(self.failover, ModelFailoverConfig):
            raise TypeError(f"ModelConfig(failover=...) must be a ModelFailoverConfig, got {self.failover!r}")


@dataclass(frozen=True, slots=True)
class Limits:
    """When a run ends early, each with a typed error event (``max_iterations`` is the agent's own field).

    ``max_budget_tokens`` and ``stall_window`` are checked before each model call by the middleware they make
    (:class:`~adk.middlewares.limits.LimitsMiddleware`, first on the agent's chain); the timeout bounds the run.

    Args:
        max_budget_tokens: end the run with ``TokenBudgetExceededError`` before a model call once the run's total
            token usage has reached this.
        stall_window: end the run with ``StallDetectedError`` when the last this-many tool calls all called the
            same tool.
        timeout: end the run with ``AgentTimeoutError`` after this many seconds: a deadline on the supersteps the
            runner drives and on every read of a model stream, so a model that stalls while the consumer reads
            its tokens ends that event's stream with ``AgentTimeoutError`` too.

    Raises:
        ValueError: ``stall_window`` is below 1.
    """

    max_budget_tokens: int | None = None
    stall_window: int | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.stall_window is not None and self.stall_window < 1:
            raise ValueError(f"Limits(stall_window=...) must be at least 1, got {self.stall_window}")


@dataclass(frozen=True, slots=True)
class OutputConfig:
    """A structured answer (``adk.chat_model.structured_output``); the final event carries it as
    ``event.output.structured``.

    Args:
        type: answer with a validated instance of this pydantic model, dataclass or TypedDict.
        retries: how many times an invalid structured answer is sent back to the model with the errors before
            the run fails with ``StructuredOutputError``.
        mode: ``"native"`` (``response_format`` on every call), ``"tool"`` (a ``final_answer`` tool), or
            ``"auto"``: native for models with ``supports_response_format = True`` (``OpenAIChatModel``), falling
            back to the tool mode for good when the server refuses ``response_format``
            (``ResponseFormatUnsupportedError``).
    """

    type: Any = None
    retries: int = 2
    mode: OutputMode = "auto"


# the keyword arguments ChatModelAgent took before its options were grouped: (group, field)
_MOVED = {
    "model_failover": ("model_config", "failover"),
    "tool_choice": ("model_config", "tool_choice"),
    "tool_execution_mode": ("tools", "execution_mode"),
    "max_budget_tokens": ("limits", "max_budget_tokens"),
    "stall_window": ("limits", "stall_window"),
    "timeout": ("limits", "timeout"),
    "output_type": ("output", "type"),
    "output_retries": ("output", "retries"),
    "output_mode": ("output", "mode"),
    "approval": ("middlewares", ""),
}
_GROUPS: dict[str, Any] = {"model_config": ModelConfig, "tools": ToolsConfig, "limits": Limits, "output": OutputConfig}


def grouped(
    old: dict[str, Any],
    model_config: ModelConfig | None,
    tools: ToolsConfig,
    limits: Limits | None,
    output: OutputConfig | None,
) -> tuple[ModelConfig | None, ToolsConfig, Limits | None, OutputConfig | None, Any]:
    """The options with ChatModelAgent's deprecated keyword arguments ``old`` moved into them, each with a
    ``DeprecationWarning`` naming its new spelling, and the ``approval`` predicate (None when not given).

    Raises:
        TypeError: an unknown keyword argument.
    """
    groups: dict[str, Any] = {"model_config": model_config, "tools": tools, "limits": limits, "output": output}
    for name, value in old.items():
        moved = _MOVED.get(name)
        if moved is None:
            raise TypeError(f"ChatModelAgent() got an unexpected keyword argument {name!r}")
        group, attr = moved
        if group == "middlewares":
            new = "middlewares=[ApprovalMiddleware(predicate), ...] (adk.middlewares.approval)"
        else:
            new = f"{group}={_GROUPS[group].__name__}({attr}=...)"
            current = groups[group]
            groups[group] = replace(current if current is not None else _GROUPS[group](), **{attr: value})
        # stacklevel: this function, ChatModelAgent.__init__, its caller
        warnings.warn(f"ChatModelAgent({name}=...) is deprecated: use {new}", DeprecationWarning, stacklevel=3)
    return groups["model_config"], groups["tools"], groups["limits"], groups["output"], old.get("approval")
