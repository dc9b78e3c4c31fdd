"""Patch dangling tool calls (Eino's ``patchtoolcalls``): an assistant tool call without a result in the history
(a turn that was cancelled or crashed between the call and its result) gets a tool message saying so, before each
model call, so providers accept the history (they reject a call without its result)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from adk.middlewares.base import AgentMiddleware, ChatModelAgentState
from compose.schema import Message, tool_message

__all__ = ["PatchToolCallsMiddleware", "dangling_result", "patch_dangling_tool_calls"]

PatchContent = Callable[[str, str], str]
"""``(tool_name, call_id) -> content`` of the tool message standing in for a missing result."""


def dangling_result(tool_name: str, call_id: str) -> str:
    """The default content of a patched result."""
    return f"Tool call {call_id} of '{tool_name}' has no result: it was cancelled or interrupted before it finished."


def patch_dangling_tool_calls(messages: Sequence[Message], content: PatchContent = dangling_result) -> list[Message]:
    """``messages`` with a tool message after every tool call that has none among the tool messages right after
    its assistant message (the patches follow the results that exist). Returns ``messages`` itself (as a list)
    when nothing dangles.

    Example:
        >>> from compose.schema import FunctionCall, ToolCall, assistant_message, user_message
        >>> call = ToolCall(id="c1", function=FunctionCall(name="search", arguments="{}"))
        >>> patched = patch_dangling_tool_calls([assistant_message("", [call]), user_message("and?")])
        >>> [(m.role, m.tool_call_id) for m in patched]
        [('assistant', None), ('tool', 'c1'), ('user', None)]
    """
    out: list[Message] | None = None
    n = len(messages)
    i = 0
    while i < n:
        msg = messages[i]
        j = i + 1
        if msg.role == "assistant" and msg.tool_calls:
            while j < n and messages[j].role == "tool":
                j += 1
            answered = {m.tool_call_id for m in messages[i + 1 : j]}
            missing = [c for c in msg.tool_calls if c.id not in answered]
            if missing:
                if out is None:
                    out = list(messages[:i])
                out.extend(messages[i:j])
                for c in missing:
                    out.append(tool_message(content(c.function.name, c.id), c.id, tool_name=c.function.name))
                i = j
                continue
        if out is not None:
            out.extend(messages[i:j])
        i = j
    return out if out is not None else list(messages)


class PatchToolCallsMiddleware(AgentMiddleware):
    """Before each model call, answer dangling tool calls (see the module docstring); the patched history is
    kept in the run's state.

    Args:
        content: ``(tool_name, call_id) -> str``, the patched result's text (default :func:`dangling_result`).
    """

    def __init__(self, content: PatchContent = dangling_result) -> None:
        self.content = content

    async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        state.messages = patch_dangling_tool_calls(state.messages, self.content)
        return state
