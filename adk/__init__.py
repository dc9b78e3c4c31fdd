"""pyeino's agent kit: ChatModelAgent on the ReAct graph, Runner and events."""

import typing

from adk.actions import send_tool_gen_action
from adk.agent import Agent, AgentContext, ResumableAgent, ResumeInfo, RunSession
from adk.agents import (
    AgentTool,
    FlowAgent,
    LoopAgent,
    ParallelAgent,
    SequentialAgent,
    agent_with_deterministic_transfer_to,
    agent_with_options,
    set_sub_agents,
)
from adk.agents.history import HistoryEntry, HistoryRewriter, default_history_rewriter, rewrite_message
from adk.approval import (
    ApprovalDecision,
    ApprovalMiddleware,
    ApprovalPredicate,
    ApprovalRequest,
    approval_middleware,
)
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
    StructuredOutputError,
    TokenBudgetExceededError,
    TransferError,
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
from adk.middlewares import (
    AgentMiddleware,
    ChatModelAgentContext,
    ModelWrapper,
    PatchToolCallsMiddleware,
    SummarizationMiddleware,
    Summarized,
    ToolResultReductionMiddleware,
    send_event,
)
from adk.react import ChatModelAgentState, ChatModelHook, State
from adk.retry import ModelRetryConfig, default_backoff, default_is_retryable
from adk.runner import AgentRun, Runner
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
        Turn,
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
            "Turn": "adk.sessions",
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
    "AgentContext",
    "AgentError",
    "AgentEvent",
    "AgentInput",
    "AgentInterruptInfo",
    "AgentMiddleware",
    "AgentOutput",
    "AgentRun",
    "AgentTimeoutError",
    "AgentTool",
    "ApprovalDecision",
    "ApprovalMiddleware",
    "ApprovalPredicate",
    "ApprovalRequest",
    "BreakLoopAction",
    "ChatModelAgent",
    "ChatModelAgentContext",
    "ChatModelAgentState",
    "ChatModelHook",
    "CheckpointNotFoundError",
    "ExceedMaxIterationsError",
    "FlowAgent",
    "HistoryEntry",
    "HistoryLimit",
    "HistoryRewriter",
    "InMemorySessionStore",
    "InstructionFormatError",
    "JSONActionChatModel",
    "JSONLTraceWriter",
    "LoopAgent",
    "MessageVariant",
    "ModelRetryConfig",
    "ModelWrapper",
    "ParallelAgent",
    "PatchToolCallsMiddleware",
    "PostgresSessionStore",
    "ResumableAgent",
    "ResumeInfo",
    "RetryExhaustedError",
    "RunSession",
    "Runner",
    "SQLiteSessionStore",
    "SequentialAgent",
    "Session",
    "SessionBusyError",
    "SessionError",
    "SessionLeaseLostError",
    "SessionRun",
    "SessionStore",
    "SessionStoreError",
    "StallDetectedError",
    "State",
    "StructuredOutputError",
    "SummarizationMiddleware",
    "Summarized",
    "TelemetryEvent",
    "TelemetryHandler",
    "TokenBudgetExceededError",
    "ToolExecutionMode",
    "ToolResultReductionMiddleware",
    "ToolsConfig",
    "TransferError",
    "TransferToAgentAction",
    "Turn",
    "WillRetryError",
    "add_session_value",
    "add_session_values",
    "agent_with_deterministic_transfer_to",
    "agent_with_options",
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
    "send_event",
    "send_tool_gen_action",
    "set_sub_agents",
    "transfer_instruction",
]
