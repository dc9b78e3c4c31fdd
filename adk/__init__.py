"""pyeino's agent kit: ChatModelAgent on the ReAct graph, Runner and events."""

import typing

from adk.actions import send_tool_gen_action
from adk.agents.history import HistoryEntry, HistoryRewriter, default_history_rewriter, rewrite_message
from adk.approval import ApprovalDecision, ApprovalPredicate, ApprovalRequest, approval_middleware
from adk.chat_model_agent import ChatModelAgent, ToolExecutionMode, ToolsConfig, exit_tool
from adk.checkpointing import AgentCheckpoint
from adk.errors import (
    AgentError,
    AgentTimeoutError,
    CheckpointNotFoundError,
    ExceedMaxIterationsError,
    RetryExhaustedError,
    SessionBusyError,
    SessionError,
    SessionLeaseLostError,
    SessionStoreError,
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
from adk.instruction import (
    TRANSFER_TO_AGENT_TOOL_DESCRIPTION,
    TRANSFER_TO_AGENT_TOOL_NAME,
    InstructionFormatError,
    format_instruction,
    gen_transfer_messages,
    transfer_instruction,
)
from adk.react import ChatModelAgentState, ChatModelHook, State
from adk.retry import ModelRetryConfig, default_backoff, default_is_retryable
from adk.runner import Agent, AgentRun, Runner
from adk.session_values import add_session_value, add_session_values, get_session_value, get_session_values
from adk.telemetry import TELEMETRY_EVENT_NAMES, JSONLTraceWriter, TelemetryEvent, TelemetryHandler
from compose._lazy import lazy_names as _lazy_names

if typing.TYPE_CHECKING:
    from adk.sessions import (
        HistoryLimit,
        InMemorySessionStore,
        PostgresSessionStore,
        Session,
        SessionRun,
        SessionStore,
        SQLiteSessionStore,
        approximate_tokens,
    )
    from compose.models.json_action import JSONActionChatModel
else:
    __getattr__, __dir__ = _lazy_names(
        __name__,
        {
            "HistoryLimit": "adk.sessions",
            "InMemorySessionStore": "adk.sessions",
            "JSONActionChatModel": "compose.models.json_action",
            "PostgresSessionStore": "adk.sessions",
            "SQLiteSessionStore": "adk.sessions",
            "Session": "adk.sessions",
            "SessionRun": "adk.sessions",
            "SessionStore": "adk.sessions",
            "approximate_tokens": "adk.sessions",
        },
    )

__all__ = [
    "TELEMETRY_EVENT_NAMES",
    "TRANSFER_TO_AGENT_TOOL_DESCRIPTION",
    "TRANSFER_TO_AGENT_TOOL_NAME",
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
    "HistoryEntry",
    "HistoryLimit",
    "HistoryRewriter",
    "InMemorySessionStore",
    "InstructionFormatError",
    "JSONActionChatModel",
    "JSONLTraceWriter",
    "MessageVariant",
    "ModelRetryConfig",
    "PostgresSessionStore",
    "RetryExhaustedError",
    "Runner",
    "SQLiteSessionStore",
    "Session",
    "SessionBusyError",
    "SessionError",
    "SessionLeaseLostError",
    "SessionRun",
    "SessionStore",
    "SessionStoreError",
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
    "approximate_tokens",
    "default_backoff",
    "default_history_rewriter",
    "default_is_retryable",
    "exit_tool",
    "format_instruction",
    "gen_transfer_messages",
    "get_session_value",
    "get_session_values",
    "rewrite_message",
    "send_tool_gen_action",
    "transfer_instruction",
]
