"""OpenAIChatModel: a chat model on the official ``openai`` async client (OpenAI and compatible servers)."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from openai import AsyncOpenAI

from compose.errors import ModelResponseError
from compose.models._openai_errors import translate_openai_error, translated_errors
from compose.models._openai_stream import ChunkIterator, usage_from
from compose.models.base import ChatModelOptions, ToolChoice
from compose.schema import FunctionCall, Message, ResponseMeta, ToolCall, ToolInfo
from compose.stream import StreamReader

__all__ = ["OpenAIChatModel", "translate_openai_error"]

_SDK_OPTIONS = ("timeout", "extra_headers", "extra_query")  # extras that configure the request, not the body
_CHOICE_KEYWORDS = ("auto", "none", "required")


class OpenAIChatModel:
    """A chat model on the ``openai`` SDK's ``AsyncOpenAI`` client.

    Works with OpenAI and with OpenAI-compatible servers (vLLM, Ollama, DeepSeek, ...). ``stream()`` asks for
    usage and yields ``Message`` chunks whose tool-call fragments carry their ``index``, so
    :func:`~compose.schema.concat_messages` rebuilds the calls; ``reasoning_content`` is read where a server
    sends it (``reasoning_content`` or ``reasoning`` in the delta). Tool calls in answers get their position
    as ``index`` in both modes.

    Errors of the SDK are translated at one boundary (:func:`translate_openai_error`) into
    :class:`~compose.errors.ChatModelError` subclasses whose ``retryable`` says whether trying again can help;
    the SDK error is the ``__cause__``. A stream that ends without a finish reason raises
    :class:`~compose.errors.ModelServerError` (``stream truncated``).

    The client this model creates has ``max_retries=0``: the retry policy belongs to the caller (an agent's
    ``ModelRetryConfig``), so errors surface at once. A client you pass in is used as it is, and not closed by
    :meth:`aclose`.

    Args:
        model: the model name; defaults to ``$OPENAI_MODEL``.
        client: an ``AsyncOpenAI`` client to use instead of creating one.
        base_url: the API's base URL; defaults to ``$OPENAI_BASE_URL``, then OpenAI's.
        api_key: the API key; defaults to ``$OPENAI_API_KEY``.
        **params: default options (``temperature``, ``max_tokens``, ``top_p``, ``stop``, ``tool_choice``,
            provider extras such as ``seed``; ``timeout``, ``extra_headers`` and ``extra_query`` configure
            the request). Options given per call override them.

    Raises:
        ValueError: if no model name or no API key can be found.

    Example:
        >>> model = OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="k")
        >>> model
        OpenAIChatModel(model='gpt-4o-mini', base_url='http://127.0.0.1:9/v1/')
    """

    def __init__(
        self,
        model: str | None = None,
        client: AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        **params: Any,
    ) -> None:
        model = model or os.environ.get("OPENAI_MODEL")
        if not model:
            raise ValueError("no model name: pass model= or set OPENAI_MODEL")
        self.model = model
        self._owns_client = client is None
        if client is None:
            api_key = api_key or os.environ.get("OPENAI_API_KEY")
            if not api_key:
                raise ValueError("no API key: pass api_key= or set OPENAI_API_KEY")
            client = AsyncOpenAI(
                api_key=api_key, base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None, max_retries=0
            )
        self.client = client
        self._options = ChatModelOptions.from_kwargs(**params)
        self._tools: tuple[ToolInfo, ...] = ()
        self._tool_params: list[dict[str, Any]] = []

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        """The tools bound to this model."""
        return self._tools

    def with_tools(self, tools: Sequence[ToolInfo]) -> OpenAIChatModel:
        """A model that offers ``tools`` to the provider; it shares the client (closing either closes it)."""
        bound = copy.copy(self)
        bound._tools = tuple(tools)
        bound._tool_params = [tool_to_openai(t) for t in tools]
        return bound

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        """Ask for one answer.

        Raises:
            ChatModelError: a subclass saying what failed and whether a retry can help.
        """
        kwargs = self._request(messages, opts)
        with translated_errors():
            completion = await self.client.chat.completions.create(**kwargs)
        if not completion.choices:
            raise ModelResponseError("the response has no choices")
        choice = completion.choices[0]
        msg = choice.message
        calls = [
            ToolCall(
                id=tc.id,
                index=i,
                type=tc.type,
                function=FunctionCall(name=tc.function.name, arguments=tc.function.arguments),
                extra={},
            )
            for i, tc in enumerate(msg.tool_calls or ())
            if tc.type == "function"
        ]
        usage = completion.usage
        return Message(
            role="assistant",
            content=msg.content or "",
            tool_calls=calls,
            reasoning_content=_reasoning(msg),
            response_meta=ResponseMeta(
                finish_reason=choice.finish_reason or "",
                usage=None if usage is None else usage_from(usage),
            ),
        )

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        """Ask for a streamed answer; the HTTP request is made now, the chunks are read as the reader is read.

        Closing the reader closes the HTTP response.

        Raises:
            ChatModelError: for a failed request here, and through the reader's ``recv()`` for a stream that
                breaks off (``ModelServerError``).
        """
        kwargs = self._request(messages, opts)
        with translated_errors():
            response = await self.client.chat.completions.create(
                **kwargs, stream=True, stream_options={"include_usage": True}
            )
        return StreamReader.from_async_iterator(ChunkIterator(response.response))

    async def aclose(self) -> None:
        """Close the client, if this model created it."""
        if self._owns_client:
            await self.client.close()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        tools = f", tools={[t.name for t in self._tools]}" if self._tools else ""
        return f"OpenAIChatModel(model={self.model!r}, base_url={str(self.client.base_url)!r}{tools})"

    def _request(self, messages: Sequence[Message], opts: Mapping[str, Any]) -> dict[str, Any]:
        options = self._options.merged(**opts)
        kwargs: dict[str, Any] = {"model": self.model, "messages": [message_to_openai(m) for m in messages]}
        if options.temperature is not None:
            kwargs["temperature"] = options.temperature
        if options.max_tokens is not None:
            kwargs["max_tokens"] = options.max_tokens
        if options.top_p is not None:
            kwargs["top_p"] = options.top_p
        if options.stop is not None:
            kwargs["stop"] = list(options.stop)
        if self._tool_params:
            kwargs["tools"] = self._tool_params
        if options.tool_choice is not None:
            kwargs["tool_choice"] = _tool_choice(options.tool_choice)
        body: dict[str, Any] = {}
        for key, value in options.extra.items():
            if key in _SDK_OPTIONS:
                kwargs[key] = value
            else:
                body[key] = value
        if body:
            kwargs["extra_body"] = body
        return kwargs


# ------------------------------------------------------------------------------------------------------------
# Mapping messages and tools to the OpenAI wire format


def message_to_openai(msg: Message) -> dict[str, Any]:
    """One message in the chat-completions request format."""
    out: dict[str, Any] = {"role": msg.role, "content": msg.content}
    if msg.name:
        out["name"] = msg.name
    if msg.role == "assistant" and msg.tool_calls:
        out["content"] = msg.content or None
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": c.type or "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in msg.tool_calls
        ]
    if msg.role == "tool":
        out["tool_call_id"] = msg.tool_call_id or ""
    return out


def tool_to_openai(tool: ToolInfo) -> dict[str, Any]:
    """One tool in the chat-completions ``tools`` format."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def _tool_choice(choice: ToolChoice) -> Any:
    if isinstance(choice, str) and choice not in _CHOICE_KEYWORDS:
        return {"type": "function", "function": {"name": choice}}
    return choice


def _reasoning(obj: Any) -> str:
    value = getattr(obj, "reasoning_content", None) or getattr(obj, "reasoning", None)
    return value if isinstance(value, str) else ""
