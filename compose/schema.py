"""Messages and tool descriptions: the data that flows between chat models, tools and graphs.

Pydantic models at the data boundary (DESIGN.md section 2, eino-semantics 3.4).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "FunctionCall",
    "Message",
    "ResponseMeta",
    "Role",
    "ToolCall",
    "ToolInfo",
    "Usage",
    "assistant_message",
    "system_message",
    "tool_message",
    "user_message",
]

Role = Literal["system", "user", "assistant", "tool"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class Usage(_Model):
    """Token usage reported by a chat model."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ResponseMeta(_Model):
    """Metadata of a model answer: why it finished and what it cost."""

    finish_reason: str = ""
    usage: Usage | None = None


class FunctionCall(_Model):
    """The function part of a tool call: its name and its JSON arguments (possibly a fragment, in a stream)."""

    name: str = ""
    arguments: str = ""


class ToolCall(_Model):
    """A tool call requested by an assistant message.

    In a stream, fragments of one call share ``index``; ``id`` and the function name usually come only in the
    first fragment.
    """

    id: str = ""
    index: int | None = None
    type: str = "function"
    function: FunctionCall = Field(default_factory=FunctionCall)
    extra: dict[str, Any] = Field(default_factory=dict)


class ToolInfo(_Model):
    """What a model is told about a tool: its name, description and the JSON schema of its parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    extra: dict[str, Any] = Field(default_factory=dict)


class Message(_Model):
    """A chat message (or a chunk of one, in a stream)."""

    role: Role
    content: str = ""
    name: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    response_meta: ResponseMeta | None = None
    reasoning_content: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)

    def __repr__(self) -> str:
        parts = [f"role={self.role!r}"]
        if self.content:
            text = self.content if len(self.content) <= 60 else self.content[:57] + "..."
            parts.append(f"content={text!r}")
        if self.reasoning_content:
            parts.append(f"reasoning_content={len(self.reasoning_content)} chars")
        if self.tool_calls:
            calls = ", ".join(f"{c.function.name or '?'}#{c.id or c.index}" for c in self.tool_calls)
            parts.append(f"tool_calls=[{calls}]")
        if self.tool_call_id:
            parts.append(f"tool_call_id={self.tool_call_id!r}")
        if self.name:
            parts.append(f"name={self.name!r}")
        return f"Message({', '.join(parts)})"


def system_message(content: str) -> Message:
    """A system message."""
    return Message(role="system", content=content)


def user_message(content: str) -> Message:
    """A user message."""
    return Message(role="user", content=content)


def assistant_message(content: str, tool_calls: list[ToolCall] | None = None) -> Message:
    """An assistant message, optionally calling tools."""
    return Message(role="assistant", content=content, tool_calls=list(tool_calls or []))


def tool_message(content: str, tool_call_id: str, tool_name: str | None = None) -> Message:
    """The result of one tool call, answering ``tool_call_id``."""
    return Message(role="tool", content=content, tool_call_id=tool_call_id, tool_name=tool_name)
