"""Tool-result reduction (Eino's ``reduction``): keep tool results from filling the model's context.

* A huge result is cut to ``max_result_chars`` with a marker saying how much was cut, as the tool returns it (a
  streamed result is cut while it streams, and its stream closed there): the tool event, the history and the
  model all see the cut text.
* Before each model call, once the tool results in the conversation pass ``clear_after_tokens``, the older ones
  are replaced by a short placeholder, newest kept first; the results of the latest tool round are never
  cleared. What is cleared stays cleared (the state keeps it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from adk.middlewares.base import AgentMiddleware, ChatModelAgentState
from adk.middlewares.summarization import approx_token_count
from compose.errors import StreamEnd
from compose.schema import Message
from compose.stream import StreamReader
from compose.tools.middleware import (
    InvokableToolEndpoint,
    StreamableToolEndpoint,
    StreamToolOutput,
    ToolInput,
    ToolOutput,
)

__all__ = ["CLEARED_RESULT", "ToolResultReductionMiddleware", "cut_marker"]

CLEARED_RESULT = "[old tool result cleared to save context; call the tool again if you need it]"


def cut_marker(shown: int, total: int | None) -> str:
    """The marker ending a cut result."""
    size = f"of {total} " if total is not None else ""
    return f"\n[tool result cut: {shown} characters {size}shown]"


class ToolResultReductionMiddleware(AgentMiddleware):
    """Cuts huge tool results and clears old ones (see the module docstring).

    Args:
        max_result_chars: the longest tool result kept whole (None: no cut).
        clear_after_tokens: the token budget of all tool results in the conversation; older results past it
            are cleared (None: never).
        token_counter: counts the tokens of messages (default :func:`~adk.middlewares.approx_token_count`).
    """

    def __init__(
        self,
        *,
        max_result_chars: int | None = 20_000,
        clear_after_tokens: int | None = 50_000,
        token_counter: Callable[[Sequence[Message]], int] = approx_token_count,
    ) -> None:
        if max_result_chars is not None and max_result_chars < 1:
            raise ValueError(f"max_result_chars must be at least 1, got {max_result_chars}")
        self.max_result_chars = max_result_chars
        self.clear_after_tokens = clear_after_tokens
        self.token_counter = token_counter

    def __repr__(self) -> str:
        return (
            f"ToolResultReductionMiddleware(max_result_chars={self.max_result_chars}, "
            f"clear_after_tokens={self.clear_after_tokens})"
        )

    def wrap_invokable_tool_call(self, next: InvokableToolEndpoint) -> InvokableToolEndpoint:
        limit = self.max_result_chars
        if limit is None:
            return next

        async def endpoint(inp: ToolInput) -> ToolOutput:
            out = await next(inp)
            text = out.result
            if len(text) <= limit:
                return out
            return ToolOutput(text[:limit] + cut_marker(limit, len(text)))

        return endpoint

    def wrap_streamable_tool_call(self, next: StreamableToolEndpoint) -> StreamableToolEndpoint:
        limit = self.max_result_chars
        if limit is None:
            return next

        async def endpoint(inp: ToolInput) -> StreamToolOutput:
            out = await next(inp)
            return StreamToolOutput(StreamReader.from_async_iterator(_Cut(out.result, limit)))

        return endpoint

    async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        budget = self.clear_after_tokens
        if budget is None:
            return state
        messages = state.messages
        protected = len(messages)
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if m.role == "assistant" and m.tool_calls:
                protected = i  # the latest round's results (after it) stay
                break
        used = 0
        out: list[Message] | None = None
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if m.role != "tool" or m.content == CLEARED_RESULT:
                continue
            used += self.token_counter([m])
            if i > protected or used <= budget:
                continue
            if out is None:
                out = list(messages)
            out[i] = m.model_copy(update={"content": CLEARED_RESULT})
        if out is not None:
            state.messages = out
        return state


class _Cut:
    """A tool's result stream cut after ``limit`` characters (the marker last; the tool's stream closed)."""

    __slots__ = ("_done", "_limit", "_reader", "_sent")

    def __init__(self, reader: StreamReader[str], limit: int) -> None:
        self._reader = reader
        self._limit = limit
        self._sent = 0
        self._done = False

    def __aiter__(self) -> _Cut:
        return self

    async def __anext__(self) -> str:
        if self._done:
            raise StopAsyncIteration
        try:
            chunk = await self._reader.recv()
        except StreamEnd:
            self._done = True
            raise StopAsyncIteration from None
        room = self._limit - self._sent
        if len(chunk) <= room:
            self._sent += len(chunk)
            return chunk
        self._done = True
        await self._reader.aclose()
        self._sent = self._limit
        return chunk[:room] + cut_marker(self._limit, None)

    async def aclose(self) -> None:
        self._done = True
        await self._reader.aclose()
