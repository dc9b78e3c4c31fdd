"""Messages between AG-UI and pyeino: ids, and the two message models converted both ways.

A pyeino ``Message`` keeps its AG-UI id in ``extra["agui_id"]``: the server stamps the id it streams a message
under onto the message (the first chunk of a streamed one, which the session's recorded copy concatenates), so
the stored conversation, ``MESSAGES_SNAPSHOT`` and ``GET /agents/{name}/threads/{id}`` all show the ids the
client saw. Input messages keep the client's ids the same way. A stored message without one (written by
another program) gets ``<thread id>-<position>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    DeveloperMessage,
    FunctionCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import Message as AGUIMessage

from adk.projection import ID_KEY, jsonable, message_id, stamp
from compose.schema import FunctionCall as PyFunctionCall
from compose.schema import Message
from compose.schema import ToolCall as PyToolCall

__all__ = ["conversation", "from_agui", "held_ids", "jsonable", "message_id", "new_input", "stamp", "to_agui"]


def _text(content: Any) -> str:
    """A user or tool message's content as text: a string as it is, the text parts of a part list joined."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content or ():
        text = getattr(part, "text", None)
        if isinstance(text, str):
            parts.append(text)
    return "\n".join(parts)


def from_agui(message: AGUIMessage) -> Message | None:
    """The pyeino message for an AG-UI input message (None for activity and reasoning messages, which are the
    client's own)."""
    extra = {ID_KEY: message.id}
    if isinstance(message, UserMessage):
        return Message(role="user", content=_text(message.content), name=message.name, extra=extra)
    if isinstance(message, ToolMessage):
        content = _text(message.content)
        if message.error:
            content = f"{content}\n(error: {message.error})" if content else f"error: {message.error}"
        return Message(role="tool", content=content, tool_call_id=message.tool_call_id, extra=extra)
    if isinstance(message, (SystemMessage, DeveloperMessage)):
        return Message(role="system", content=message.content, name=message.name, extra=extra)
    if isinstance(message, AssistantMessage):
        calls = [
            PyToolCall(id=c.id, function=PyFunctionCall(name=c.function.name, arguments=c.function.arguments))
            for c in message.tool_calls or ()
        ]
        return Message(role="assistant", content=message.content or "", tool_calls=calls, extra=extra)
    return None


def to_agui(message: Message, id: str) -> AGUIMessage:
    """The AG-UI message for a stored pyeino message."""
    if message.role == "user":
        return UserMessage(id=id, content=message.content, name=message.name)
    if message.role == "assistant":
        calls = [
            ToolCall(id=c.id, function=FunctionCall(name=c.function.name, arguments=c.function.arguments or "{}"))
            for c in message.tool_calls
        ]
        return AssistantMessage(id=id, content=message.content or None, tool_calls=calls or None, name=message.name)
    if message.role == "tool":
        return ToolMessage(id=id, content=message.content, tool_call_id=message.tool_call_id or "")
    return SystemMessage(id=id, content=message.content, name=message.name)


def conversation(thread_id: str, messages: Iterable[Message]) -> list[AGUIMessage]:
    """Stored messages as AG-UI messages, each with its stamped id (or ``<thread id>-<position>``)."""
    return [to_agui(m, message_id(m) or f"{thread_id}-{i}") for i, m in enumerate(messages)]


def held_ids(thread_id: str, messages: Sequence[Message]) -> set[str]:
    """The AG-UI ids of the messages a thread holds."""
    return {message_id(m) or f"{thread_id}-{i}" for i, m in enumerate(messages)}


def new_input(thread_id: str, stored: Sequence[Message], messages: Sequence[AGUIMessage]) -> list[Message]:
    """The turn's input: the client's user, tool and system messages the thread does not hold yet (by id)."""
    held = held_ids(thread_id, stored)
    out: list[Message] = []
    for m in messages:
        if m.id in held or m.role not in ("user", "tool", "system", "developer"):
            continue
        converted = from_agui(m)
        if converted is not None:
            out.append(converted)
    return out
