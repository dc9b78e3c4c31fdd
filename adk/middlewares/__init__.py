"""ChatModelAgent middlewares: the interface (:class:`AgentMiddleware`) and the built-ins.

``ChatModelAgent(..., middlewares=[A, B, C])``; the first wraps the others. Built-ins: summarization
(:class:`SummarizationMiddleware`), the dangling tool-call patch (:class:`PatchToolCallsMiddleware`) and tool-result
reduction (:class:`ToolResultReductionMiddleware`), the filesystem (:class:`FilesystemMiddleware` over a
:class:`Backend`: :class:`InMemoryBackend`, :class:`LocalBackend`; :class:`LocalShell`). The approval guard
(:class:`ApprovalMiddleware`, ``adk.middlewares.approval``) and the limits (``adk.middlewares.limits``) are
middlewares too.
"""

import typing

from adk.middlewares.base import (
    AgentMiddleware,
    ChatModelAgentContext,
    ChatModelAgentState,
    ModelWrapper,
    send_event,
)
from adk.middlewares.dangling import PatchToolCallsMiddleware, patch_dangling_tool_calls
from compose.lowlevel import lazy_names as _lazy_names

if typing.TYPE_CHECKING:
    from adk.middlewares.agentsmd import AgentsMDMiddleware
    from adk.middlewares.approval import ApprovalMiddleware
    from adk.middlewares.filesystem import (
        Backend,
        ExecuteResponse,
        FileInfo,
        FilesystemMiddleware,
        GrepMatch,
        GrepOptions,
        InMemoryBackend,
        LocalBackend,
        LocalShell,
        Shell,
    )
    from adk.middlewares.plantask import PlanTaskMiddleware
    from adk.middlewares.reduction import ToolResultReductionMiddleware
    from adk.middlewares.skill import Skill, SkillMiddleware
    from adk.middlewares.summarization import SummarizationMiddleware, Summarized, TokenCounter, approx_token_count
    from adk.middlewares.toolsearch import ToolSearchMiddleware
else:
    # the built-ins are imported on first use: a plain agent needs none of them (see compose._lazy)
    __getattr__, __dir__ = _lazy_names(
        __name__,
        {
            "AgentsMDMiddleware": "adk.middlewares.agentsmd",
            "ApprovalMiddleware": "adk.middlewares.approval",
            "Backend": "adk.middlewares.filesystem",
            "ExecuteResponse": "adk.middlewares.filesystem",
            "FileInfo": "adk.middlewares.filesystem",
            "FilesystemMiddleware": "adk.middlewares.filesystem",
            "GrepMatch": "adk.middlewares.filesystem",
            "GrepOptions": "adk.middlewares.filesystem",
            "InMemoryBackend": "adk.middlewares.filesystem",
            "LocalBackend": "adk.middlewares.filesystem",
            "LocalShell": "adk.middlewares.filesystem",
            "Shell": "adk.middlewares.filesystem",
            "PlanTaskMiddleware": "adk.middlewares.plantask",
            "ToolResultReductionMiddleware": "adk.middlewares.reduction",
            "Skill": "adk.middlewares.skill",
            "SkillMiddleware": "adk.middlewares.skill",
            "SummarizationMiddleware": "adk.middlewares.summarization",
            "Summarized": "adk.middlewares.summarization",
            "TokenCounter": "adk.middlewares.summarization",
            "approx_token_count": "adk.middlewares.summarization",
            "ToolSearchMiddleware": "adk.middlewares.toolsearch",
        },
    )

__all__ = [
    "AgentMiddleware",
    "AgentsMDMiddleware",
    "ApprovalMiddleware",
    "Backend",
    "ChatModelAgentContext",
    "ChatModelAgentState",
    "ExecuteResponse",
    "FileInfo",
    "FilesystemMiddleware",
    "GrepMatch",
    "GrepOptions",
    "InMemoryBackend",
    "LocalBackend",
    "LocalShell",
    "ModelWrapper",
    "PatchToolCallsMiddleware",
    "PlanTaskMiddleware",
    "Shell",
    "Skill",
    "SkillMiddleware",
    "SummarizationMiddleware",
    "Summarized",
    "TokenCounter",
    "ToolResultReductionMiddleware",
    "ToolSearchMiddleware",
    "approx_token_count",
    "patch_dangling_tool_calls",
    "send_event",
]
