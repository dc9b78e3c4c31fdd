"""OpenAIChatModel: a chat model on the official ``openai`` async client (OpenAI and compatible servers)."""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import httpx2
from openai import AsyncOpenAI

from compose._db.store import Closing
from compose.errors import ChatModelError, ModelBadRequestError, ModelResponseError, ResponseFormatUnsupportedError
from compose.models._openai_errors import translate_openai_error, translated_errors
from compose.models._openai_stream import ChunkIterator
from compose.models._openai_wire import completion_message, response_format_param
from compose.models.base import ChatModelOptions, ToolChoice
from compose.schema import AudioPart, FilePart, ImagePart, Message, TextPart, ToolInfo
from compose.stream import StreamReader

__all__ = ["DEFAULT_STREAM_IDLE_TIMEOUT", "OpenAIChatModel", "translate_openai_error"]

_NOT_REFUSALS = (401, 403, 408, 429)  # statuses that say something other than "this request is malformed"
_RESPONSE_FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object", re.IGNORECASE)
_SDK_OPTIONS = ("timeout", "extra_headers", "extra_query")  # extras that configure the request, not the body
_CHOICE_KEYWORDS = ("auto", "none", "required")
_SURROGATE = re.compile("[\ud800-\udfff]")
_AUDIO_FORMATS = {"mpeg": "mp3", "mpeg3": "mp3", "x-mp3": "mp3", "x-wav": "wav", "wave": "wav", "vnd.wave": "wav"}
DEFAULT_STREAM_IDLE_TIMEOUT = 120.0


class OpenAIChatModel(Closing):
    """A chat model on the ``openai`` SDK's ``AsyncOpenAI`` client.

    Works with OpenAI and with OpenAI-compatible servers (vLLM, Ollama, DeepSeek, ...). ``stream()`` asks for
    usage and yields ``Message`` chunks whose tool-call fragments carry their ``index``, so
    :func:`~compose.schema.concat_messages` rebuilds the calls; ``reasoning_content`` is read where a server
    sends it (``reasoning_content`` or ``reasoning`` in the delta). Tool calls in answers get their position
    as ``index`` in both modes.

    Errors of the SDK are translated at one boundary (:func:`translate_openai_error`) into
    :class:`~compose.errors.ChatModelError` subclasses whose ``retryable`` says whether trying again can help;
    the SDK error is the ``__cause__``. A stream that ends without a finish reason raises
    :class:`~compose.errors.ModelServerError` (``stream truncated``). A body or stream chunk of the wrong shape
    (``choices`` not a list, a ``delta`` that is a string, a 200 body that is not a JSON object, ...) raises
    :class:`~compose.errors.ModelResponseError` quoting the bad part; a request message that cannot be encoded
    (a lone surrogate) raises :class:`~compose.errors.ModelBadRequestError` naming the message, before any
    request is made.

    **Stalled streams.** While a streamed answer is read, each wait for data from the server (the response
    headers, then every piece of the body) is bounded by ``stream_idle_timeout`` (default
    :data:`DEFAULT_STREAM_IDLE_TIMEOUT`, 120 s, or the client's read timeout if that is shorter): a server that
    stops sending raises :class:`~compose.errors.ModelTimeoutError` (retryable) instead of hanging until the
    SDK's 600 s read timeout. Raise it for servers that stay silent for long (a reasoning model that does not
    stream its thinking, a slow local server processing a long prompt); ``None`` leaves only the client's
    timeout. A ``timeout`` option replaces both. ``generate`` keeps the client's timeout (600 s by default): a
    non-streamed answer arrives only once it is complete.

    **Interoperability.** An assistant message with tool calls and no text is sent with ``"content": ""``
    (not ``null``, which llama.cpp's server refuses). ``tool_choice`` may be ``"auto"``, ``"none"``,
    ``"required"``, the name of a tool (sent as ``{"type": "function", "function": {"name": ...}}``, which
    servers that reject ``"required"`` accept) or a mapping sent as it is.

    **Structured output.** A ``response_format`` option (``{"type": "json_schema", "json_schema": {"name":
    ..., "schema": {...}, "strict": true}}``, or ``json_object`` / ``text``) is checked and sent as the request's
    ``response_format``; ``supports_response_format`` tells an agent with an ``output_type`` to use it. A server
    that refuses it (an HTTP 4xx or 5xx whose error names ``response_format``, ``json_schema`` or
    ``json_object``, as llama.cpp's does) raises :class:`~compose.errors.ResponseFormatUnsupportedError`, which
    is not retryable.

    The client this model creates has ``max_retries=0``: the retry policy belongs to the caller (an agent's
    ``ModelRetryConfig``), so errors surface at once. A client you pass in is used as it is, and not closed by
    :meth:`aclose`.

    Args:
        model: the model name; defaults to ``$OPENAI_MODEL``.
        client: an ``AsyncOpenAI`` client to use instead of creating one.
        base_url: the API's base URL; defaults to ``$OPENAI_BASE_URL``, then OpenAI's.
        api_key: the API key; defaults to ``$OPENAI_API_KEY``.
        stream_idle_timeout: seconds a streamed answer may go without data from the server (see above);
            None for no limit beyond the client's.
        **params: default options (``temperature``, ``max_tokens``, ``top_p``, ``stop``, ``tool_choice``,
            provider extras such as ``seed``; ``timeout``, ``extra_headers`` and ``extra_query`` configure
            the request). Options given per call override them.

    Raises:
        ValueError: if no model name or no API key can be found, or ``stream_idle_timeout`` is not positive.

    Example:
        >>> model = OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="k")
        >>> model
        OpenAIChatModel(model='gpt-4o-mini', base_url='http://127.0.0.1:9/v1/')
    """

    supports_response_format = True

    def __init__(
        self,
        model: str | None = None,
        client: AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        stream_idle_timeout: float | None = DEFAULT_STREAM_IDLE_TIMEOUT,
        **params: Any,
    ) -> None:
        model = model or os.environ.get("OPENAI_MODEL")
        if not model:
            raise ValueError("no model name: pass model= or set OPENAI_MODEL")
        if stream_idle_timeout is not None and not stream_idle_timeout > 0:
            raise ValueError(f"stream_idle_timeout must be positive seconds or None, got {stream_idle_timeout!r}")
        self.stream_idle_timeout = stream_idle_timeout
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

    provider_name = "openai"
    """The provider callbacks and tracing report (``gen_ai.provider.name``)."""

    @property
    def model_name(self) -> str:
        """The request model (callbacks and tracing report it); the answer's ``response_meta.model`` says which
        model the server answered with."""
        return self.model

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
        with self._refusals(kwargs), translated_errors(base_url=self.client.base_url):
            raw = await self.client.chat.completions.with_raw_response.create(**kwargs)
        data = raw.http_response.content
        try:
            body = json.loads(data)
        except ValueError:
            raise ModelResponseError(
                f"unexpected response: the body is not JSON: {data[:200]!r}", status_code=raw.status_code
            ) from None
        return completion_message(body)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        """Ask for a streamed answer; the HTTP request is made now, the chunks are read as the reader is read.

        Closing the reader closes the HTTP response.

        Raises:
            ChatModelError: for a failed request here, and through the reader's ``recv()`` for a stream that
                breaks off (``ModelServerError``).
        """
        kwargs = self._request(messages, opts, streaming=True)
        with self._refusals(kwargs), translated_errors(base_url=self.client.base_url):
            response = await self.client.chat.completions.create(
                **kwargs, stream=True, stream_options={"include_usage": True}
            )
        return StreamReader.from_async_iterator(ChunkIterator(response.response))

    async def aclose(self) -> None:
        """Close the client, if this model created it."""
        if self._owns_client:
            await self.client.close()

    def __repr__(self) -> str:
        tools = f", tools={[t.name for t in self._tools]}" if self._tools else ""
        return f"OpenAIChatModel(model={self.model!r}, base_url={str(self.client.base_url)!r}{tools})"

    def _request(
        self, messages: Sequence[Message], opts: Mapping[str, Any], *, streaming: bool = False
    ) -> dict[str, Any]:
        options = self._options.merged(**opts)
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages_to_openai(messages)}
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
            if key == "response_format":
                if value is not None:
                    kwargs["response_format"] = response_format_param(value)
            elif key in _SDK_OPTIONS:
                kwargs[key] = value
            else:
                body[key] = value
        if body:
            kwargs["extra_body"] = body
        if streaming and "timeout" not in kwargs and self.stream_idle_timeout is not None:
            kwargs["timeout"] = self._stream_timeout(self.stream_idle_timeout)
        return kwargs

    @contextmanager
    def _refusals(self, kwargs: Mapping[str, Any]) -> Iterator[None]:
        """A refusal of the request's ``response_format`` becomes ``ResponseFormatUnsupportedError``."""
        try:
            yield
        except ChatModelError as error:
            status = error.status_code
            response_format = kwargs.get("response_format")
            if (
                response_format is None
                or status is None
                or not 400 <= status < 600
                or status in _NOT_REFUSALS
                or _RESPONSE_FORMAT_WORDS.search(str(error)) is None
            ):
                raise
            kind = response_format.get("type", "?")
            raise ResponseFormatUnsupportedError(
                f"the server at {self.client.base_url} refused response_format {kind!r} ({error}): it does not "
                "take structured output by JSON schema; an agent's output_mode='tool' asks for a final_answer "
                "tool call instead (output_mode='auto' falls back to it)",
                status_code=status,
            ) from error

    def _stream_timeout(self, idle: float) -> httpx2.Timeout:
        """The client's timeout with its read timeout (the longest wait for data) cut to ``idle``."""
        base = self.client.timeout
        if not isinstance(base, httpx2.Timeout):
            base = httpx2.Timeout(base if isinstance(base, int | float) else None)
        t = base
        read = idle if t.read is None else min(t.read, idle)
        return httpx2.Timeout(connect=t.connect, read=read, write=t.write, pool=t.pool)


# ------------------------------------------------------------------------------------------------------------
# Mapping messages and tools to the OpenAI wire format


def messages_to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The messages in the chat-completions request format.

    Raises:
        ModelBadRequestError: a message holds a lone surrogate (UTF-8 cannot encode it), or a part the API
            cannot take; names the message.
    """
    out = []
    for i, msg in enumerate(messages):
        try:
            wire = message_to_openai(msg)
        except ModelBadRequestError as error:
            raise ModelBadRequestError(f"request message {i}: {error}") from None
        _check_encodable(wire, i, msg.role)
        out.append(wire)
    return out


def message_to_openai(msg: Message) -> dict[str, Any]:
    """One message in the chat-completions request format.

    An assistant message with tool calls and no text gets ``"content": ""``: OpenAI accepts ``null`` there,
    llama.cpp's server does not, and every common server accepts the empty string. A message with ``parts``
    gets a list of content parts (see :func:`content_to_openai`).

    Raises:
        ModelBadRequestError: a part the chat-completions API cannot take (see :func:`content_to_openai`).
    """
    out: dict[str, Any] = {"role": msg.role, "content": content_to_openai(msg) if msg.parts else msg.content}
    if msg.name:
        out["name"] = msg.name
    if msg.role == "assistant" and msg.tool_calls:
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


def content_to_openai(msg: Message) -> list[dict[str, Any]]:
    """A message's ``content`` and ``parts`` as chat-completions content parts: the content first (as a text
    part, when not empty), then each part.

    ``TextPart`` → ``text``; ``ImagePart`` → ``image_url`` (its URL or a ``data:`` URL, and ``detail``);
    ``AudioPart`` → ``input_audio`` (inline data; the format is the MIME subtype: ``audio/wav`` → ``wav``,
    ``audio/mpeg`` → ``mp3``); ``FilePart`` → ``file`` (``file_data`` as a ``data:`` URL, or ``file_id``, with
    ``filename``); ``VideoPart`` → ``video_url`` (not OpenAI's: vLLM-style servers take it).

    Raises:
        ModelBadRequestError: an audio part given by URL, or a file part given by URL (the API takes neither),
            naming the part.
    """
    wire: list[dict[str, Any]] = [{"type": "text", "text": msg.content}] if msg.content else []
    for n, part in enumerate(msg.parts):
        if isinstance(part, TextPart):
            wire.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            image: dict[str, Any] = {"url": part.data_url}
            if part.detail is not None:
                image["detail"] = part.detail
            wire.append({"type": "image_url", "image_url": image})
        elif isinstance(part, AudioPart):
            if part.data is None:
                raise ModelBadRequestError(
                    f"{msg.role} message: parts[{n}] is audio by URL, which the chat-completions API does not "
                    "take: give it inline (AudioPart.from_bytes(raw, 'audio/wav'))"
                )
            wire.append({"type": "input_audio", "input_audio": {"data": part.data, "format": _audio_format(part)}})
        elif isinstance(part, FilePart):
            if part.url is not None:
                raise ModelBadRequestError(
                    f"{msg.role} message: parts[{n}] is a file by URL, which the chat-completions API does not "
                    "take: give it inline (FilePart.from_bytes(raw, 'application/pdf', name=...)) or by file_id"
                )
            file: dict[str, Any] = (
                {"file_id": part.file_id} if part.file_id is not None else {"file_data": part.data_url}
            )
            if part.name:
                file["filename"] = part.name
            wire.append({"type": "file", "file": file})
        else:
            wire.append({"type": "video_url", "video_url": {"url": part.data_url}})
    return wire


def _audio_format(part: AudioPart) -> str:
    subtype = part.mime_type.partition("/")[2].lower()
    return _AUDIO_FORMATS.get(subtype, subtype)


def _check_encodable(wire: dict[str, Any], index: int, role: str) -> None:
    def check(text: str, field: str) -> None:
        # isascii() is O(1) on CPython's compact strings: the search runs only for non-ASCII text
        if not text.isascii() and (bad := _SURROGATE.search(text)) is not None:
            raise ModelBadRequestError(
                f"request message {index} (role {role!r}): its {field} holds a lone surrogate "
                f"{bad.group()!r} at offset {bad.start()}, which cannot be encoded as UTF-8"
            )

    for key in ("content", "name", "tool_call_id"):
        value = wire.get(key)
        if isinstance(value, str):
            check(value, key)
        elif isinstance(value, list):
            for n, part in enumerate(value):
                for field, text in _strings(part, f"content[{n}]"):
                    check(text, field)
    for n, call in enumerate(wire.get("tool_calls", ())):
        check(call["id"], f"tool_calls[{n}].id")
        check(call["function"]["name"], f"tool_calls[{n}].function.name")
        check(call["function"]["arguments"], f"tool_calls[{n}].function.arguments")


def _strings(value: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
    """The strings of a content part and their paths (``content[1].image_url.url``)."""
    for key, item in value.items():
        if isinstance(item, str):
            yield f"{path}.{key}", item
        elif isinstance(item, dict):
            yield from _strings(item, f"{path}.{key}")


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
