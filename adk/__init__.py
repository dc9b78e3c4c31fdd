"""pyeino's agent kit: ChatModelAgent on the ReAct graph, Runner and events.

``__all__`` lists what a user reaches for first; the exceptions live in ``adk.errors`` (still importable from here).
"""

import typing

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
from adk.cancel import CancelHandle, CancelMode, CancelOutcome
from adk.chat_model.actions import send_tool_gen_action
from adk.chat_model.agent import ChatModelAgent, exit_tool
from adk.chat_model.config import Limits, ModelConfig, OutputConfig, ToolExecutionMode, ToolsConfig
from adk.chat_model.failover import FailoverContext, ModelFailoverConfig
from adk.chat_model.instruction import (
    TRANSFER_TO_AGENT_TOOL_DESCRIPTION,
    TRANSFER_TO_AGENT_TOOL_NAME,
    format_instruction,
    gen_transfer_messages,
    transfer_instruction,
)
from adk.chat_model.react import ChatModelAgentState, ChatModelHook, State
from adk.chat_model.retry import ModelRetryConfig, default_backoff, default_is_retryable
from adk.checkpointing import AgentCheckpoint
from adk.errors import *  # noqa: F403
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
from adk.middlewares import (
    AgentMiddleware,
    ChatModelAgentContext,
    ModelWrapper,
    PatchToolCallsMiddleware,
    send_event,
)
from adk.middlewares.approval import (
    ApprovalDecision,
    ApprovalMiddleware,
    ApprovalPredicate,
    ApprovalRequest,
    approval_middleware,
)
from adk.runner import AgentRun, Runner
from adk.session_values import add_session_value, add_session_values, get_session_value, get_session_values
from adk.telemetry import TELEMETRY_EVENT_NAMES, JSONLTraceWriter, TelemetryEvent, TelemetryHandler
from compose.lowlevel import lazy_names as _lazy_names

if typing.TYPE_CHECKING:
    from adk.middlewares.reduction import ToolResultReductionMiddleware
    from adk.middlewares.summarization import SummarizationMiddleware, Summarized
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
            "SummarizationMiddleware": "adk.middlewares.summarization",
            "Summarized": "adk.middlewares.summarization",
            "ToolResultReductionMiddleware": "adk.middlewares.reduction",
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
    "AgentEvent",
    "AgentInput",
    "AgentInterruptInfo",
    "AgentMiddleware",
    "AgentOutput",
    "AgentRun",
    "AgentTool",
    "ApprovalDecision",
    "ApprovalMiddleware",
    "ApprovalPredicate",
    "ApprovalRequest",
    "BreakLoopAction",
    "CancelHandle",
    "CancelMode",
    "CancelOutcome",
    "ChatModelAgent",
    "ChatModelAgentContext",
    "ChatModelAgentState",
    "ChatModelHook",
    "FailoverContext",
    "FlowAgent",
    "HistoryEntry",
    "HistoryLimit",
    "HistoryRewriter",
    "InMemorySessionStore",
    "JSONActionChatModel",
    "JSONLTraceWriter",
    "Limits",
    "LoopAgent",
    "MessageVariant",
    "ModelConfig",
    "ModelFailoverConfig",
    "ModelRetryConfig",
    "ModelWrapper",
    "OutputConfig",
    "ParallelAgent",
    "PatchToolCallsMiddleware",
    "PostgresSessionStore",
    "ResumableAgent",
    "ResumeInfo",
    "RunSession",
    "Runner",
    "SQLiteSessionStore",
    "SequentialAgent",
    "Session",
    "SessionRun",
    "SessionStore",
    "State",
    "SummarizationMiddleware",
    "Summarized",
    "TelemetryEvent",
    "TelemetryHandler",
    "ToolExecutionMode",
    "ToolResultReductionMiddleware",
    "ToolsConfig",
    "TransferToAgentAction",
    "Turn",
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
