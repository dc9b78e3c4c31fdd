"""Multi-agent building blocks (eino-semantics 4.7): agent tools, sub-agents and transfer, workflow agents, and the
history a flow gives the next agent.

The flow, workflow and agent-tool agents build on these; their public names are re-exported from ``adk``.
"""

from typing import TYPE_CHECKING

from adk.agents.agent_tool import AgentTool
from adk.agents.flow import (
    DeterministicTransfer,
    FlowAgent,
    agent_with_deterministic_transfer_to,
    agent_with_options,
    set_sub_agents,
)
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
from adk.agents.workflow import LoopAgent, ParallelAgent, SequentialAgent
from compose.lowlevel import lazy_names

if TYPE_CHECKING:
    from adk.agents.remote_a2a import RemoteA2AAgent
else:  # the a2a extra's client is imported on first use
    __getattr__, __dir__ = lazy_names(__name__, {"RemoteA2AAgent": "adk.agents.remote_a2a"})

__all__ = [
    "AgentTool",
    "DeterministicTransfer",
    "FlowAgent",
    "HistoryEntry",
    "HistoryRewriter",
    "LoopAgent",
    "ParallelAgent",
    "RecordedEvent",
    "RemoteA2AAgent",
    "SequentialAgent",
    "agent_with_deterministic_transfer_to",
    "agent_with_options",
    "build_agent_input",
    "chat_history_for_agent_tool",
    "default_history_rewriter",
    "is_own_event",
    "is_recorded",
    "rewrite_message",
    "set_sub_agents",
]
