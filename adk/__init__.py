"""pyeino's agent kit: ChatModelAgent on the ReAct graph, Runner and events."""

import typing

from adk.actions import send_tool_gen_action
from adk.approval import ApprovalDecision, ApprovalPredicate, ApprovalRequest, approval_middleware
from adk.chat_model_agent import ChatModelAgent, ToolExecutionMode, ToolsConfig, exit_tool
from adk.checkpointing import AgentCheckpoint
from adk.errors import (
    AgentError,
    AgentTimeoutError,
    CheckpointNotFoundError,
    ExceedMaxIterationsError,
    RetryExhaustedError,
    StallDetectedError,
    TokenBudgetExceededError,
    WillRetryError,
)
from adk.events import (
    AgentAction,
    AgentEvent,
    AgentInput,
    AgentInterruptInfo,
    AgentOutput,
    BreakLoopAction,
    MessageVariant,
    TransferToAgentAction,
)
from adk.react import ChatModelAgentState, ChatModelHook, State
from adk.retry import ModelRetryConfig, default_backoff, default_is_retryable
from adk.runner import Agent, AgentRun, Runner
from adk.session_values import add_session_value, add_session_values, get_session_value, get_session_values
from adk.telemetry import TELEMETRY_EVENT_NAMES, JSONLTraceWriter, TelemetryEvent, TelemetryHandler
from compose._lazy import lazy_names as _lazy_names

if typing.TYPE_CHECKING:
    from compose.models.json_action import JSONActionChatModel
else:
    __getattr__, __dir__ = _lazy_names(__name__, {"JSONActionChatModel": "compose.models.json_action"})

__all__ = [
    "TELEMETRY_EVENT_NAMES",
    "Agent",
    "AgentAction",
    "AgentCheckpoint",
    "AgentError",
    "AgentEvent",
    "AgentInput",
    "AgentInterruptInfo",
    "AgentOutput",
    "AgentRun",
    "AgentTimeoutError",
    "ApprovalDecision",
    "ApprovalPredicate",
    "ApprovalRequest",
    "BreakLoopAction",
    "ChatModelAgent",
    "ChatModelAgentState",
    "ChatModelHook",
    "CheckpointNotFoundError",
    "ExceedMaxIterationsError",
    "JSONActionChatModel",
    "JSONLTraceWriter",
    "MessageVariant",
    "ModelRetryConfig",
    "RetryExhaustedError",
    "Runner",
    "StallDetectedError",
    "State",
    "TelemetryEvent",
    "TelemetryHandler",
    "TokenBudgetExceededError",
    "ToolExecutionMode",
    "ToolsConfig",
    "TransferToAgentAction",
    "WillRetryError",
    "add_session_value",
    "add_session_values",
    "approval_middleware",
    "default_backoff",
    "default_is_retryable",
    "exit_tool",
    "get_session_value",
    "get_session_values",
    "send_tool_gen_action",
]
