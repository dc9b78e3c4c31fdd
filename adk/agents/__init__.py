"""Multi-agent building blocks (eino-semantics 4.7): the history a flow gives the next agent.

The flow, workflow and agent-tool agents build on these; their public names are re-exported from ``adk``.
"""

from adk.agents.history import (
    HistoryEntry,
    HistoryRewriter,
    RecordedEvent,
    build_agent_input,
    chat_history_for_agent_tool,
    default_history_rewriter,
    is_own_event,
    is_recorded,
    rewrite_message,
)

__all__ = [
    "HistoryEntry",
    "HistoryRewriter",
    "RecordedEvent",
    "build_agent_input",
    "chat_history_for_agent_tool",
    "default_history_rewriter",
    "is_own_event",
    "is_recorded",
    "rewrite_message",
]
